"""GaussianEnsemble: batched members, the one-member fast path, fitting, persistence."""

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


def test_fit_learns_hopper_dynamics_and_round_trips(hopper_tensors, tmp_path):
    obs, act, nxt, rew = hopper_tensors
    torch.manual_seed(0)
    model = GaussianEnsemble(11, 3, EnsembleConfig(**SMALL), task="hopper")
    metrics = model.fit(obs, act, nxt, rew, torch.Generator().manual_seed(0))
    # Holdout MSE in normalised target units: predicting the mean change scores ~1.0.
    assert metrics["holdout_mse_elites"] < 0.3, metrics
    assert sorted(model.elites.tolist()) == sorted(torch.argsort(model.holdout_mse)[:3].tolist())
    mean, _ = model.predict(obs[:500], act[:500])
    err = (mean[model.elites, :, :-1] - nxt[:500]).abs().mean()
    still = (obs[:500] - nxt[:500]).abs().mean()          # "nothing moves" baseline
    assert err < 0.5 * still

    model.save(tmp_path / "wm.pt")
    back = GaussianEnsemble.load(tmp_path / "wm.pt")
    m2, _ = back.predict(obs[:50], act[:50])
    torch.testing.assert_close(m2, model.predict(obs[:50], act[:50])[0])
    assert back.spec == model.spec and torch.equal(back.elites, model.elites)


def test_step_keeps_the_contract(hopper_tensors):
    obs, act, _, _ = hopper_tensors
    model = GaussianEnsemble(11, 3, EnsembleConfig(**SMALL), task="hopper")
    model.input_norm.fit(torch.cat([obs, act], 1))
    g = torch.Generator().manual_seed(0)
    state = model.init_state(obs[:16], g)
    state, out = model.step(state, act[:16], generator=g)
    assert out.obs.shape == (16, 11) and out.reward.shape == (16,) and out.terminated.dtype == torch.bool
    assert out.uncertainty.shape == (16,) and (out.uncertainty >= 0).all()
    held = model.init_state(obs[:16], g, member=torch.full((16,), 2))
    a, _ = model.step(held, act[:16], generator=g, deterministic=True)
    torch.testing.assert_close(a["obs"], model.predict(obs[:16], act[:16])[0][2, :, :-1])
    with pytest.raises(ValueError, match=r"action: expected shape \[16, 3\]"):
        model.step(state, act[:16, :2], generator=g)


def test_bad_configs_and_small_data_are_refused(tmp_path):
    with pytest.raises(ReverieError, match="elites <= members"):
        EnsembleConfig(members=3, elites=5).validate()
    model = GaussianEnsemble(2, 1, EnsembleConfig(**SMALL))
    x = torch.zeros(100, 2)
    with pytest.raises(ReverieError, match="too small to hold out"):
        model.fit(x, torch.zeros(100, 1), x, torch.zeros(100), torch.Generator())
    (tmp_path / "junk.pt").write_text("junk")
    with pytest.raises(ReverieError, match="junk.pt: not a readable checkpoint"):
        GaussianEnsemble.load(tmp_path / "junk.pt")


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


def test_an_interrupted_fit_resumes_to_the_same_weights(hopper_tensors, tmp_path):
    cfg = EnsembleConfig(**{**SMALL, "max_epochs": 6, "patience": 100})

    def fresh():
        torch.manual_seed(0)
        return GaussianEnsemble(11, 3, cfg, task="hopper")

    straight = fresh()
    straight.fit(*hopper_tensors, torch.Generator().manual_seed(0))

    class Stop(Exception):
        pass

    def stop_after_three(epoch, mse):
        if epoch == 3:
            raise Stop

    ckpt = tmp_path / "fit.pt"
    with pytest.raises(Stop):
        fresh().fit(*hopper_tensors, torch.Generator().manual_seed(0), progress=stop_after_three, checkpoint=ckpt)
    epochs = []
    resumed = fresh()
    resumed.fit(*hopper_tensors, torch.Generator().manual_seed(0), checkpoint=ckpt,
                progress=lambda e, m: epochs.append(e))
    assert epochs == [4, 5, 6]                      # epochs 1-3 were not trained again
    for k, v in straight.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k
    # a checkpoint of another fit (another seed) is not resumed: that fit starts from epoch 1
    epochs.clear()
    fresh().fit(*hopper_tensors, torch.Generator().manual_seed(1), checkpoint=ckpt,
                progress=lambda e, m: epochs.append(e))
    assert epochs[0] == 1
