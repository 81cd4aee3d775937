"""The rollout engine: one loop for simulators and models, stopping rules, the NaN guard."""

import numpy as np
import pytest
import torch

from agents.networks import TanhActor
from envs.builtin import collect
from envs.simulator import SimulatorBatch
from envs.tasks import get_task
from worldmodels.contract import ModelSpec, StepOut
from worldmodels.ensemble import EnsembleConfig, GaussianEnsemble
from worldmodels.rollout import (ActorPolicy, ModelReplayBuffer, SimulatorSource, StartStates, StateRange,
                                 UncertaintyThreshold, rollout)


class Drift:
    """A tiny hand-checkable model: x' = x + a, reward 1, uncertainty |x'_0|,
    terminal when x'_1 > 2.5, NaN once x'_0 < -2.5."""

    spec = ModelSpec(2, 2, members=1)

    def init_state(self, start, generator=None):
        return start

    def step(self, state, action, *, generator=None, deterministic=False):
        nxt = state + action
        nxt = torch.where((nxt[:, :1] < -2.5), torch.full_like(nxt, float("nan")), nxt)
        return nxt, StepOut(nxt, torch.ones(len(nxt)), nxt[:, 1] > 2.5, nxt[:, 0].abs())


class PerRow:
    """A fixed action per row."""

    def __init__(self, actions):
        self.actions = torch.tensor(actions)

    def initial_state(self, batch_size):
        return None

    def act(self, state, obs, first, *, deterministic, generator=None, prev_reward=None):
        return state, self.actions


def test_stopping_rules_on_a_hand_checkable_model():
    start = torch.zeros(3, 2)
    policy = PerRow([[-1.0, 0.0], [0.0, 1.0], [0.1, 0.0]])
    r = rollout(Drift(), policy, start, horizon=5, generator=torch.Generator(),
                truncate=UncertaintyThreshold(0.35))
    # row 0: x0 = -1, -2 kept (uncertainty 1, 2 > 0.35!) -> cut by the rule at step 0
    # row 1: x1 = 1, 2, 3 -> terminal at step 2 (uncertainty 0)
    # row 2: x0 = 0.1, 0.2, 0.3, then 0.4 > 0.35 -> cut by the rule at step 3
    assert r.lengths().tolist() == [0, 3, 3]
    assert r.returns().tolist() == [0.0, 3.0, 3.0]
    assert r.terminated[:, 1].tolist() == [False, False, True, False, False]
    assert r.truncated[:, 2].tolist() == [False, False, True, False, False]
    assert r.rule_cut_rows == 2 and r.nonfinite_rows == 0

    r = rollout(Drift(), policy, start, horizon=4, generator=torch.Generator())
    # without the rule, row 0 reaches -3 at step 2: NaN, counted and cut, steps 0-1 kept
    assert r.lengths().tolist() == [2, 3, 4] and r.nonfinite_rows == 1
    assert r.truncated[1, 0] and r.truncated[3, 2] and not r.truncated[:, 1].any()
    assert torch.isfinite(r.next_obs[r.valid]).all()
    flat = r.transitions()
    assert len(flat["rewards"]) == 9 and flat["terminated"].sum() == 1


def test_rows_that_diverge_are_cut_and_counted_apart_from_nan_rows():
    start = torch.zeros(3, 2)
    policy = PerRow([[-1.0, 0.0], [0.0, 1.0], [0.7, 0.0]])
    # the range |x| <= 1.5 (mean 0, std 0.5, 3 stds), all values finite: row 0 leaves it at step 1 (x0 = -2,
    # before its NaN at -3), row 1 at step 1 (x1 = 2, before its terminal at 3), row 2 at step 2 (x0 = 2.1)
    bounds = StateRange(torch.full((2,), -1.5), torch.full((2,), 1.5))
    r = rollout(Drift(), policy, start, horizon=4, generator=torch.Generator(), bounds=bounds)
    assert r.lengths().tolist() == [1, 1, 2] and r.diverged_rows == 3 and r.nonfinite_rows == 0
    assert r.returns().tolist() == [1.0, 1.0, 2.0]
    assert r.truncated[0, 0] and r.truncated[1, 2] and not r.terminated.any()
    assert ((r.next_obs[r.valid].abs()) <= 1.5).all()

    class Scaled(Drift):
        def data_scale(self):
            return torch.zeros(2), torch.full((2,), 0.5)

    made = StateRange.of_model(Scaled(), 3.0)
    torch.testing.assert_close(made.low, bounds.low)
    torch.testing.assert_close(made.high, bounds.high)
    assert StateRange.of_model(Drift(), 3.0) is None            # a model that does not know its data's scale


class Recording(PerRow):
    """Remembers what the engine showed it: is this the first step, and the previous reward."""

    def __init__(self, actions):
        super().__init__(actions)
        self.seen = []

    def act(self, state, obs, first, *, deterministic, generator=None, prev_reward=None):
        self.seen.append((first.clone(), prev_reward.clone()))
        return state, self.actions


def test_policies_see_the_previous_reward_and_the_first_step():
    policy = Recording([[0.1, 0.0], [0.2, 0.0]])
    rollout(Drift(), policy, torch.zeros(2, 2), horizon=3, generator=torch.Generator())
    assert [f.tolist() for f, _ in policy.seen] == [[True, True], [False, False], [False, False]]
    assert [r.tolist() for _, r in policy.seen] == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]


@pytest.fixture(scope="module")
def hopper_data():
    task = get_task("hopper")
    torch.manual_seed(0)
    return collect(task, TanhActor(task.obs_dim, task.act_dim, (32, 32)), 3000, 0.3, seed=2, num_envs=4)


def test_simulator_rollout_from_dataset_states_matches_stepping_by_hand(hopper_data):
    torch.manual_seed(1)
    actor = TanhActor(11, 3, (32, 32))
    idx = np.arange(0, 3000, 400)
    start = StartStates.from_dataset(hopper_data, idx)
    r = rollout(SimulatorSource("hopper", len(idx)), ActorPolicy(actor), start, 50, torch.Generator(),
                deterministic=True)
    sim = SimulatorBatch("hopper", len(idx))
    obs = sim.reset_to(hopper_data.qpos[idx], hopper_data.qvel[idx])
    ret, alive = np.zeros(len(idx)), np.ones(len(idx), bool)
    for _ in range(50):
        obs, rew, term, _ = sim.step(actor(torch.from_numpy(obs)).detach().numpy())
        ret += rew * alive
        alive &= ~term
    np.testing.assert_allclose(r.returns().numpy(), ret, rtol=1e-5)
    assert (r.lengths() <= 50).all() and (r.terminated.sum(0) == torch.from_numpy(~alive)).all()
    ends = r.terminated | r.truncated
    assert (ends.sum(0) == 1).all()          # every row ends exactly once


@pytest.fixture(scope="module")
def hopper_model(hopper_data):
    obs, act = torch.from_numpy(hopper_data.observations), torch.from_numpy(hopper_data.actions)
    torch.manual_seed(0)
    model = GaussianEnsemble(11, 3, EnsembleConfig(members=4, elites=3, hidden=(32, 32),
                                                   weight_decay=(0, 0, 0), max_epochs=5), task="hopper")
    model.fit(obs, act, torch.from_numpy(hopper_data.next_observations), torch.from_numpy(hopper_data.rewards),
              torch.Generator().manual_seed(0))
    return model


def test_ensemble_rollouts_held_member_and_threshold(hopper_data, hopper_model):
    obs, act = torch.from_numpy(hopper_data.observations), torch.from_numpy(hopper_data.actions)
    model = hopper_model
    rule = UncertaintyThreshold.from_dataset(model, obs, act, quantile=1.0)
    seen = model.step(model.init_state(obs), act, deterministic=True)[1].uncertainty
    assert rule.threshold == pytest.approx(seen.max().item())
    policy = ActorPolicy(TanhActor(11, 3, (32, 32)), noise_std=0.1)
    g = torch.Generator().manual_seed(3)
    held_rule = UncertaintyThreshold.from_dataset(model, obs, act, quantile=0.99, held_members=True,
                                                  generator=torch.Generator().manual_seed(1))
    held = rollout(model, policy, obs[:64], 100, g, truncate=held_rule, member=model.sample_members(64, g))
    free = rollout(model, policy, obs[:64], 100, g, truncate=rule)
    for r, limit in ((held, held_rule), (free, rule)):
        assert r.nonfinite_rows == 0 and torch.isfinite(r.next_obs[r.valid]).all()
        assert ((r.terminated | r.truncated).sum(0) <= 1).all()
        assert (r.uncertainty[r.valid] <= limit.threshold).all()
    assert (held.uncertainty[held.valid] > 0).all()        # the held member's own std, not zeros
    # a held member gives the same futures for the same start whatever the generator draws
    a = rollout(model, policy, obs[:8], 20, torch.Generator().manual_seed(0), deterministic=True,
                sample_model=False, member=torch.full((8,), 2))
    b = rollout(model, policy, obs[:8], 20, torch.Generator().manual_seed(9), deterministic=True,
                sample_model=False, member=torch.full((8,), 2))
    torch.testing.assert_close(a.next_obs, b.next_obs)


def test_drawn_only_runs_the_same_draws_through_the_drawn_member_alone(hopper_data, hopper_model, monkeypatch):
    obs, model = torch.from_numpy(hopper_data.observations), hopper_model
    policy = ActorPolicy(TanhActor(11, 3, (32, 32)), noise_std=0.1)

    def run(seed: int, **kwargs):     # the members' means: the elite drawn for each row and step is all that varies
        return rollout(model, policy, obs[:256], 10, torch.Generator().manual_seed(seed), deterministic=True,
                       sample_model=False, **kwargs)

    every = run(4)
    calls = []
    monkeypatch.setattr(model, "predict", lambda *a: calls.append(a) or GaussianEnsemble.predict(model, *a))
    drawn, redrawn = run(4, drawn_only=True), run(5, drawn_only=True)
    assert not calls                                            # no step evaluated every member
    torch.testing.assert_close(drawn.next_obs, every.next_obs, rtol=1e-4, atol=1e-4)   # the same draws
    torch.testing.assert_close(drawn.rewards, every.rewards, rtol=1e-4, atol=1e-4)
    assert torch.equal(drawn.valid, every.valid)
    assert (drawn.next_obs - redrawn.next_obs).abs().max() > 1e-2   # other draws, other members: it matters


def test_model_replay_buffer_is_fifo():
    buf = ModelReplayBuffer(2, 1, capacity=5)
    for start in (0, 3):
        n = 3
        buf.add({"obs": torch.arange(start, start + n).float()[:, None].repeat(1, 2),
                 "actions": torch.zeros(n, 1), "rewards": torch.arange(start, start + n).float(),
                 "next_obs": torch.zeros(n, 2), "terminated": torch.zeros(n, dtype=torch.bool)})
    assert buf.size == 5 and sorted(buf.data["rewards"].tolist()) == [1, 2, 3, 4, 5]   # 0 was evicted
    sample = buf.sample(100, torch.Generator().manual_seed(0))
    assert sample["obs"].shape == (100, 2) and set(sample["rewards"].tolist()) <= {1, 2, 3, 4, 5}


def test_horizon_stability_report_compares_model_and_simulator(hopper_data, tmp_path):
    from eval.horizon_stability import horizon_rows, write_report

    obs, act = torch.from_numpy(hopper_data.observations), torch.from_numpy(hopper_data.actions)
    torch.manual_seed(0)
    model = GaussianEnsemble(11, 3, EnsembleConfig(members=4, elites=3, hidden=(32, 32), layer_norm=True,
                                                   weight_decay=(0, 0, 0), max_epochs=5), task="hopper")
    model.fit(obs, act, torch.from_numpy(hopper_data.next_observations), torch.from_numpy(hopper_data.rewards),
              torch.Generator().manual_seed(0))
    rows = horizon_rows(model, hopper_data, TanhActor(11, 3, (32, 32)), horizons=(5, 40), rows=16)
    assert [r["horizon"] for r in rows] == [5, 40]
    for r in rows:
        assert r["nonfinite_rows"] == 0 and 0.0 <= r["cut_share"] <= 1.0
        assert 0 < r["imagined_length_mean"] <= r["horizon"] and 0 < r["simulator_length_mean"] <= r["horizon"]
    assert rows[1]["simulator_return_mean"] >= rows[0]["simulator_return_mean"] - 1e-6   # longer runs collect more
    held = horizon_rows(model, hopper_data, TanhActor(11, 3, (32, 32)), horizons=(40,), rows=16, cut_on="member_std")
    assert held[0]["uncertainty_threshold"] != rows[1]["uncertainty_threshold"]   # another score, another cut
    with pytest.raises(ValueError, match="cut_on: expected one of disagreement, member_std, got 'spread'"):
        horizon_rows(model, hopper_data, TanhActor(11, 3, (32, 32)), horizons=(5,), rows=4, cut_on="spread")
    write_report(rows, tmp_path, "header")
    assert "| 40 |" in (tmp_path / "horizon_stability.md").read_text()
    assert (tmp_path / "horizon_stability.csv").read_text().startswith("horizon,rows,")


def test_held_members_can_be_cut_on_the_elites_disagreement(hopper_data, hopper_model):
    """``disagreement=True``: each row still follows its held member, but the uncertainty is the elites' spread
    (as the every-member step reports it), so a rule measured that way (NEUBAY's ``cut_on=disagreement``) cuts
    where the authors' rule does."""
    obs, act, model = (torch.from_numpy(hopper_data.observations[:256]), torch.from_numpy(hopper_data.actions[:256]),
                       hopper_model)
    member = model.sample_members(256, torch.Generator().manual_seed(0))
    _, fast = model.step(model.init_state(obs, member=member), act, deterministic=True)
    _, spread = model.step(model.init_state(obs, member=member, disagreement=True), act, deterministic=True)
    _, every = model.step(model.init_state(obs), act, deterministic=True, generator=torch.Generator())
    torch.testing.assert_close(spread.obs, fast.obs, rtol=1e-4, atol=1e-4)      # the held member's prediction
    torch.testing.assert_close(spread.uncertainty, every.uncertainty)           # the elites' disagreement
    assert (spread.uncertainty - fast.uncertainty).abs().max() > 1e-3           # not the member's own std
    with pytest.raises(ValueError, match="disagreement=True is for held members"):
        model.init_state(obs, disagreement=True)

    rule = UncertaintyThreshold.from_dataset(model, obs, act, quantile=0.9)     # measured on the spread
    policy = ActorPolicy(TanhActor(11, 3, (32, 32)), noise_std=0.1)
    g = torch.Generator().manual_seed(3)
    r = rollout(model, policy, obs[:64], 50, g, truncate=rule, member=model.sample_members(64, g), disagreement=True)
    assert r.rule_cut_rows > 0 and (r.uncertainty[r.valid] <= rule.threshold).all()
