"""The world-model contract, the same tests for every model: the Gaussian ensemble and the diffusion
model in both of its modes (one step, and segments served step by step)."""

from __future__ import annotations

import fcntl
import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from agents.networks import TanhActor
from envs.builtin import collect
from envs.errors import ReverieError
from envs.tasks import get_task
from worldmodels.diffusion import DiffusionConfig, DiffusionWorldModel
from worldmodels.ensemble import EnsembleConfig, GaussianEnsemble
from worldmodels.registry import cached_model_path, cached_world_model, fit_took, load_model
from worldmodels.rollout import ActorPolicy, StartStates, UncertaintyThreshold, rollout

MODELS = {
    "ensemble": lambda **kw: GaussianEnsemble(11, 3, EnsembleConfig(
        **{"members": 5, "elites": 3, "hidden": (64, 64), "weight_decay": (1e-5,) * 3, "max_epochs": 30,
           "patience": 3, **kw}), task="hopper"),
    "diffusion-step": lambda **kw: DiffusionWorldModel(11, 3, DiffusionConfig(
        **{"members": 3, "elites": 2, "hidden": 64, "max_epochs": 30, "patience": 3, **kw}), task="hopper"),
    "diffusion-segment": lambda **kw: DiffusionWorldModel(11, 3, DiffusionConfig(
        **{"mode": "segment", "segment": 4, "members": 3, "elites": 2, "hidden": 48, "max_epochs": 12,
           "patience": 3, **kw}), task="hopper"),
}


@pytest.fixture(scope="module")
def hopper():
    task = get_task("hopper")
    torch.manual_seed(0)
    return collect(task, TanhActor(task.obs_dim, task.act_dim, (32, 32)), 4000, 0.5, seed=7, num_envs=8)


def tensors(ds):
    t = torch.from_numpy
    return t(ds.observations), t(ds.actions), t(ds.next_observations), t(ds.rewards)


def fit(model, ds, seed=0, **kw):
    episodes = {"episode_ends": ds.episode_ends()} if getattr(model, "fits_on_episodes", False) else {}
    return model.fit(*tensors(ds), torch.Generator().manual_seed(seed), **episodes, **kw)


@pytest.fixture(scope="module")
def fitted(hopper):
    out = {}
    for name, make in MODELS.items():
        torch.manual_seed(0)
        model = make()
        out[name] = (model, fit(model, hopper))
    return out


@pytest.mark.parametrize("name", MODELS)
def test_step_keeps_the_contract(name, hopper):
    obs, act, _, _ = tensors(hopper)
    torch.manual_seed(0)
    model = MODELS[name]()
    g = torch.Generator().manual_seed(0)
    state = model.init_state(obs[:16], g)
    state, out = model.step(state, act[:16], generator=g)
    E = model.spec.members
    assert out.obs.shape == (16, 11) and out.obs.dtype == torch.float32 and out.reward.shape == (16,)
    assert out.terminated.dtype == torch.bool and out.uncertainty.shape == (16,) and (out.uncertainty >= 0).all()
    mean, std = out.members
    assert mean.shape == std.shape == (E, 16, 12)
    with pytest.raises(ValueError, match=r"action: expected shape \[16, 3\]"):
        model.step(state, act[:16, :2], generator=g)
    with pytest.raises(ValueError, match="member: expected 16 member indices"):
        model.init_state(obs[:16], g, member=torch.full((16,), E))


@pytest.mark.parametrize("name", MODELS)
def test_a_held_member_steps_as_that_member_predicts(name, hopper):
    obs, act, _, _ = tensors(hopper)
    model = MODELS[name]()
    g = torch.Generator().manual_seed(0)
    held = model.init_state(obs[:16], g, member=torch.full((16,), 1))
    state, _ = model.step(held, act[:16], generator=g, deterministic=True)
    torch.testing.assert_close(state["obs"], model.predict(obs[:16], act[:16])[0][1, :, :-1], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", MODELS)
def test_fit_learns_hopper_dynamics_and_round_trips(name, hopper, fitted, tmp_path):
    model, metrics = fitted[name]
    obs, act, nxt, _ = tensors(hopper)
    assert sorted(model.elites.tolist()) == sorted(torch.argsort(model.holdout_mse)[:len(model.elites)].tolist())
    mean, _ = model.predict(obs[:500], act[:500])
    err = (mean[model.elites, :, :-1] - nxt[:500]).abs().mean()
    still = (obs[:500] - nxt[:500]).abs().mean()          # "nothing moves" baseline
    assert err < 0.5 * still, (err, still)
    model.save(tmp_path / "wm.pt")
    back = load_model(tmp_path / "wm.pt")
    assert type(back) is type(model) and back.spec == model.spec and torch.equal(back.elites, model.elites)
    torch.testing.assert_close(back.predict(obs[:50], act[:50])[0], model.predict(obs[:50], act[:50])[0])


@pytest.mark.parametrize("name", MODELS)
def test_long_rollouts_stay_finite_and_the_uncertainty_rule_cuts(name, hopper, fitted):
    model, _ = fitted[name]
    obs, act, _, _ = tensors(hopper)
    policy = ActorPolicy(TanhActor(11, 3, (32, 32)))
    ro = rollout(model, policy, StartStates(obs[:64]), 100, torch.Generator().manual_seed(0), deterministic=True)
    assert ro.nonfinite_rows == 0 and (ro.lengths() >= 1).all()
    assert torch.isfinite(ro.next_obs[ro.valid]).all()
    rule = UncertaintyThreshold.from_dataset(model, obs[:1000], act[:1000], 0.5, torch.Generator().manual_seed(0))
    cut = rollout(model, policy, StartStates(obs[:64]), 100, torch.Generator().manual_seed(0), truncate=rule,
                  deterministic=True)
    assert cut.rule_cut_rows > 0 and (cut.uncertainty[cut.valid] <= rule.threshold).all()


@pytest.mark.parametrize("name", MODELS)
def test_an_interrupted_fit_resumes_to_the_same_weights(name, hopper, tmp_path):
    def fresh():
        torch.manual_seed(0)
        return MODELS[name](max_epochs=5, patience=100)

    straight = fresh()
    fit(straight, hopper)

    class Stop(Exception):
        pass

    def stop_after_two(epoch, mse):
        if epoch == 2:
            raise Stop

    ckpt = tmp_path / "fit.pt"
    with pytest.raises(Stop):
        fit(fresh(), hopper, progress=stop_after_two, checkpoint=ckpt)
    epochs = []
    resumed = fresh()
    fit(resumed, hopper, checkpoint=ckpt, progress=lambda e, m: epochs.append(e))
    assert epochs == [3, 4, 5]                      # epochs 1-2 were not trained again
    for k, v in straight.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k
    epochs.clear()                                  # another fit (another seed) starts from epoch 1
    fit(fresh(), hopper, seed=1, checkpoint=ckpt, progress=lambda e, m: epochs.append(e))
    assert epochs[0] == 1


@pytest.mark.parametrize("name", MODELS)
def test_small_data_and_a_junk_checkpoint_are_refused(name, tmp_path):
    model = MODELS[name]()
    x = torch.zeros(100, 11)
    kw = {"episode_ends": [100]} if getattr(model, "fits_on_episodes", False) else {}
    with pytest.raises(ReverieError, match="too small to hold out"):
        model.fit(x, torch.zeros(100, 3), x, torch.zeros(100), torch.Generator(), **kw)
    (tmp_path / "junk.pt").write_text("junk")
    with pytest.raises(ReverieError, match="junk.pt: not a readable checkpoint"):
        load_model(tmp_path / "junk.pt")


@pytest.mark.parametrize("name", MODELS)
def test_mopo_judges_every_model_from_its_members(name, hopper, fitted):
    from agents.mopo import MOPO, MOPOConfig

    model, _ = fitted[name]
    obs = tensors(hopper)[0]
    mopo = MOPO(11, 3, MOPOConfig(penalty="disagreement", penalty_coef=2.0), model=model)
    ro = rollout(model, ActorPolicy(TanhActor(11, 3, (16,))), StartStates(obs[:200]), 4,
                 torch.Generator().manual_seed(0), judge=mopo.judge)
    judged = ro.transitions()
    raw = judged["rewards"].clone()
    mopo.penalize(judged)
    assert (judged["rewards"] <= raw).all() and (judged["rewards"] < raw).any()
    if not getattr(model, "has_aleatoric", True):     # no Gaussian std to take the aleatoric penalty from
        with pytest.raises(ReverieError, match="use agent.penalty=disagreement"):
            MOPO(11, 3, MOPOConfig(penalty="aleatoric"), model=model)


def test_the_model_cache_reuses_a_fit_and_says_how_long_it_waited_for_another_runs(hopper, tmp_path):
    """Two bench cells that need the same model: one fits it, the other waits on the cache entry's lock and then
    reuses it; the wait is reported apart from the reuse, so a cell's log never counts another's fit as its own."""
    values = {"name": "ensemble", "members": 3, "elites": 2, "hidden": [32, 32], "weight_decay": [1e-5] * 3,
              "max_epochs": 2}
    model, metrics, reused = cached_world_model(hopper, values, 0, tmp_path)
    assert not reused and metrics["waited_s"] < 1
    assert fit_took(reused, 30.0, metrics).startswith("fitted in 30 s")

    path = cached_model_path(hopper, values, 0, tmp_path)
    with open(path.with_suffix(".lock"), "w") as held:         # another run holds the entry for 1.5 s
        fcntl.flock(held, fcntl.LOCK_EX)
        threading.Timer(1.5, fcntl.flock, (held, fcntl.LOCK_UN)).start()
        again, metrics, reused = cached_world_model(hopper, values, 0, tmp_path)
    assert reused and metrics["waited_s"] >= 1.4
    for k, v in model.state_dict().items():
        assert torch.equal(v, again.state_dict()[k]), k
    line = fit_took(reused, metrics["waited_s"] + 2.0, metrics)
    assert line.startswith("reused from the cache in 2 s after waiting") and "another run's fit" in line
    assert cached_model_path(hopper, {**values, "max_epochs": 3}, 0, tmp_path) != path   # another config: another entry


def test_an_option_added_after_models_were_cached_keeps_their_entries_at_its_old_behaviour(hopper, tmp_path):
    """`weight_decay_mode` came after a grid's worth of fitted models (hours each): at `decoupled`, what every fit
    before it did, the cache key is the one those fits were stored under; `l2` is another model, another entry."""
    values = {"name": "ensemble", "members": 3, "elites": 2, "hidden": [32, 32], "weight_decay": [1e-5] * 3}
    before = cached_model_path(hopper, values, 0, tmp_path)
    assert cached_model_path(hopper, {**values, "weight_decay_mode": "decoupled"}, 0, tmp_path) == before
    assert cached_model_path(hopper, {**values, "weight_decay_mode": "l2"}, 0, tmp_path) != before

    # The shipped config on fixed data, keyed as the code before the option keyed it (computed at 3318014).
    shipped = OmegaConf.to_container(OmegaConf.load("configs/world_model/ensemble.yaml"))
    data = SimpleNamespace(name="x", observations=np.zeros((3, 2), np.float32), actions=np.zeros((3, 1), np.float32),
                           rewards=np.zeros(3, np.float32), next_observations=np.zeros((3, 2), np.float32),
                           terminals=np.zeros(3, bool))
    assert cached_model_path(data, shipped, 0, tmp_path).name == "x-ensemble-seed0-bced82cecc3b2376.pt"
