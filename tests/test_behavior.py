"""The behaviour-policy trainer: it learns, it resumes, and it publishes a zoo."""

import csv

import numpy as np
import pytest

from envs.behavior import BehaviorConfig, publish_zoo, train_behavior
from envs.errors import ReverieError
from envs.policies import evaluate_actor, load_policy, load_zoo


def read_steps(workdir):
    with (workdir / "evals.csv").open() as f:
        return [int(r["step"]) for r in csv.DictReader(f)]


def test_stops_on_budget_resumes_and_publishes(tmp_path):
    cfg = BehaviorConfig(task="hopper", seed=3, total_steps=600, start_steps=200, batch_size=32, hidden=(32, 32),
                         snapshot_every=100, checkpoint_every=200, eval_episodes=2, budget_minutes=1e-9)
    work = tmp_path / "run"
    first = train_behavior(cfg, work, progress=False)
    assert not first["done"] and first["step"] == 100        # stopped at the first snapshot, checkpointed
    assert read_steps(work) == [0, 100]
    cfg.budget_minutes = 0
    second = train_behavior(cfg, work, progress=False)
    assert second["done"] and second["step"] == 600
    assert read_steps(work) == [0, 100, 200, 300, 400, 500, 600]   # each snapshot once, none lost
    assert len(list((work / "snapshots").glob("step_*.pt"))) == 7

    zoo_root = tmp_path / "zoo"
    manifest = publish_zoo("hopper", work, zoo_root, n_policies=5, eval_episodes=3, command="test")
    zoo = load_zoo("hopper", zoo_root)
    assert len(zoo.entries) == 5 and zoo.entries[0].step == 0
    roles = {r for e in zoo.entries for r in e.roles}
    assert roles == {"random", "medium", "expert"}
    expert = zoo.role("expert")
    assert expert.return_mean == max(e.return_mean for e in zoo.entries)
    assert 0 < zoo.role("medium").step < expert.step
    # The stated returns are real: re-measure one on the stated seeds.
    actor, record = load_policy(expert.path)
    again = evaluate_actor("hopper", actor, 3, seed=2_000_000)
    assert again.mean() == pytest.approx(expert.return_mean, abs=1e-3)
    assert record["meta"]["return_mean"] == expert.return_mean and manifest["command"] == "test"


def test_bad_config_is_refused(tmp_path):
    with pytest.raises(ReverieError, match="option 'checkpoint_every'"):
        train_behavior(BehaviorConfig(snapshot_every=300, checkpoint_every=500), tmp_path)
    with pytest.raises(ReverieError, match="unknown task 'pong'"):
        train_behavior(BehaviorConfig(task="pong"), tmp_path)


@pytest.mark.slow
def test_td3_learns_to_hop(tmp_path):
    cfg = BehaviorConfig(task="hopper", seed=0, total_steps=5000, start_steps=1000, snapshot_every=1000,
                         checkpoint_every=5000, eval_episodes=5)
    summary = train_behavior(cfg, tmp_path / "learn", progress=False)
    with (tmp_path / "learn" / "evals.csv").open() as f:
        returns = {int(r["step"]): float(r["return_mean"]) for r in csv.DictReader(f)}
    untrained = returns[0]
    # Seeded and deterministic on one machine type only: from an untrained ~18 the agent first learns to
    # stay up, reaching ~50 on one CPU and ~38 on another by 5,000 steps; a sign or target bug stays at ~18.
    assert summary["best_return"] > 2.0 * untrained, returns
    assert np.mean([returns[4000], returns[5000]]) > 1.8 * untrained, returns
