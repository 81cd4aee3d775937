"""GaussianEnsemble specifics: the one-member fast path, soft-clamped log-variance, chunked and bf16
predictions, MOPO's penalties (the contract every model keeps: tests/test_world_models.py)."""

import pytest
import torch

from agents.networks import TanhActor
from envs.builtin import collect
from envs.errors import ReverieError
from envs.tasks import get_task
from worldmodels.ensemble import EnsembleConfig, GaussianEnsemble

SMALL = dict(members=5, elites=3, hidden=(64, 64), weight_decay=(1e-5, 1e-5, 1e-5), max_epochs=30, patience=3)


@pytest.fixture(scope="module")
def hopper_tensors():
    task = get_task("hopper")
    torch.manual_seed(0)
    ds = collect(task, TanhActor(task.obs_dim, task.act_dim, (32, 32)), 4000, 0.5, seed=7, num_envs=8)
    t = lambda a: torch.from_numpy(a)  # noqa: E731
    return t(ds.observations), t(ds.actions), t(ds.next_observations), t(ds.rewards)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_member_path_matches_all_members(layer_norm):
    torch.manual_seed(0)
    model = GaussianEnsemble(11, 3, EnsembleConfig(**{**SMALL, "layer_norm": layer_norm}))
    obs, act = torch.randn(40, 11), torch.rand(40, 3) * 2 - 1
    mean, std = model.predict(obs, act)
    assert mean.shape == std.shape == (5, 40, 12) and (std > 0).all()
    member = torch.randint(0, 5, (40,), generator=torch.Generator().manual_seed(1))
    m1, s1 = model.predict_member(obs, act, member)
    rows = torch.arange(40)
    torch.testing.assert_close(m1, mean[member, rows], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s1, std[member, rows], rtol=1e-5, atol=1e-5)


def test_logvar_is_soft_clamped():
    model = GaussianEnsemble(3, 1, EnsembleConfig(**{**SMALL}))
    _, std = model.predict(torch.randn(10, 3) * 1e4, torch.ones(10, 1))
    logvar = 2 * (std / model.target_norm.std).log()
    assert (logvar <= model.max_logvar.detach() + 1e-4).all() and (logvar >= model.min_logvar.detach() - 1e-4).all()


def test_bad_configs_are_refused():
    with pytest.raises(ReverieError, match="elites <= members"):
        EnsembleConfig(members=3, elites=5).validate()
    with pytest.raises(ReverieError, match="weight_decay: expected 3 values"):
        EnsembleConfig(hidden=(8, 8), weight_decay=(0.0,)).validate()
    with pytest.raises(ReverieError, match="weight_decay_mode: expected decoupled or l2, got 'adamw'"):
        EnsembleConfig(weight_decay_mode="adamw").validate()


def test_l2_decay_is_a_loss_term_on_the_weights_that_shrinks_them_more_than_decoupled_decay(hopper_tensors):
    """MBPO's decay, wd/2 * ||W||^2 in the loss under Adam, is rescaled with the loss's gradient, so at the same
    coefficients it pulls far harder than AdamW's lr * wd * W a step; and it leaves the biases alone."""
    obs, act, next_obs, rew = (t[:1500] for t in hopper_tensors)
    norms = {}
    for mode in ("decoupled", "l2"):
        torch.manual_seed(0)
        model = GaussianEnsemble(11, 3, EnsembleConfig(**{**SMALL, "weight_decay": (0.05,) * 3, "max_epochs": 8,
                                                          "patience": 10, "weight_decay_mode": mode}))
        weight_norm = lambda: sum(layer.weight.norm().item() for layer in [*model.layers, model.head])  # noqa: E731
        start = weight_norm()
        model.fit(obs, act, next_obs, rew, torch.Generator().manual_seed(0))
        norms[mode] = weight_norm()
    # Measured: 26.9 at the start, 30.9 after the decoupled fit, 20.4 after the l2 fit.
    assert norms["l2"] < start < norms["decoupled"] and norms["l2"] < 0.8 * norms["decoupled"]

def test_chunked_and_bf16_predictions_agree_with_one_block():
    torch.manual_seed(0)
    model = GaussianEnsemble(11, 3, EnsembleConfig(**SMALL))
    obs, act = torch.randn(2500, 11), torch.rand(2500, 3) * 2 - 1
    model.chunk_rows = None
    whole = model.predict(obs, act)
    model.chunk_rows = 512                      # 2500 rows: four full blocks and a ragged one
    for a, b in zip(model.predict(obs, act), whole):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    half = GaussianEnsemble(11, 3, EnsembleConfig(**SMALL, inference_dtype="bfloat16"))
    half.load_state_dict(model.state_dict())
    mean, std = half.predict(obs, act)
    assert mean.dtype == std.dtype == torch.float32
    # bf16 keeps about 3 significant digits: errors are a small fraction of the predicted spread
    assert ((mean - whole[0]).abs() / whole[1]).median() < 0.05
    with pytest.raises(ReverieError, match="inference_dtype: expected float32 or bfloat16"):
        EnsembleConfig(inference_dtype="fp8").validate()


def test_a_bfloat16_fit_holds_out_as_well_as_a_float32_one(hopper_tensors):
    """``fit_precision=bfloat16``: the hidden layers' updates under autocast (1.4x an update on a CPU with bfloat16,
    the video model's dynamics' shapes), the output layer, the loss and the holdout in float32. The fitted
    weights stay float32, and the held-out error is the float32 fit's within a tenth."""
    obs, act, next_obs, rew = (t[:3000] for t in hopper_tensors)
    holdout = {}
    for precision in ("float32", "bfloat16"):
        torch.manual_seed(0)
        model = GaussianEnsemble(11, 3, EnsembleConfig(**{**SMALL, "max_epochs": 15, "fit_precision": precision}))
        holdout[precision] = model.fit(obs, act, next_obs, rew, torch.Generator().manual_seed(0))["holdout_mse_mean"]
        assert all(p.dtype == torch.float32 for p in model.parameters())
    assert holdout["bfloat16"] < 1.1 * holdout["float32"], holdout
    with pytest.raises(ReverieError, match="fit_precision: expected float32, bfloat16 or auto, got 'half'"):
        EnsembleConfig(fit_precision="half").validate()


def test_mopo_penalty_from_the_rollout_equals_a_fresh_prediction(hopper_tensors):
    from agents.mopo import MOPO, MOPOConfig
    from worldmodels.rollout import ActorPolicy, StartStates, rollout

    obs = hopper_tensors[0]
    torch.manual_seed(0)
    model = GaussianEnsemble(11, 3, EnsembleConfig(**SMALL), task="hopper")
    for kind in ("aleatoric", "disagreement"):
        mopo = MOPO(11, 3, MOPOConfig(penalty=kind, penalty_coef=2.0), model=model)
        ro = rollout(model, ActorPolicy(TanhActor(11, 3, (16,))), StartStates(obs[:300]), 4,
                     torch.Generator().manual_seed(0), judge=mopo.judge)
        judged = ro.transitions()
        fresh = {k: v for k, v in judged.items() if k != "judged"}
        raw = judged["rewards"].clone()
        mopo.penalize(judged)
        mopo.penalize(fresh)
        torch.testing.assert_close(judged["rewards"], fresh["rewards"], rtol=1e-4, atol=1e-4)
        assert (judged["rewards"] < raw).all()      # every imagined reward is lowered


