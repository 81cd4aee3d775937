"""``reverie evaluate``: policies in the simulator and in a world model, the report, bad input refused."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from agents.networks import TanhActor
from envs.policies import save_policy
from envs.tasks import get_task
from eval.cli import main
from eval.evaluate import EvalConfig, ReplayPolicy, evaluate, load_candidates, replay_segments, start_states
from tests.test_train import FAST, run, small_dataset

TINY_FIT = ["world_model.members=3", "world_model.elites=2", "world_model.hidden=[32,32]",
            "world_model.weight_decay=[0,0,0]", "world_model.max_epochs=2"]
QUICK = ["rows=4", "horizon=15", "open_loop_rows=12", "open_loop_horizon=8", "bootstrap=50", "threads=1"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    data = small_dataset(root / "hopper-tiny.hdf5")
    assert main(["fit", f"dataset={data}", *TINY_FIT, f"run_dir={root / 'fit'}"]) == 0
    assert main(["train", "agent=td3bc", f"dataset={data}", "train.steps=20", *FAST[:1], "train.final_eval_episodes=1",
                 f"run_dir={root / 'runs' / 'td3bc'}"]) == 0
    return {"root": root, "data": data, "model": root / "fit" / "world_model.pt", "runs": root / "runs"}


def test_evaluate_writes_a_self_contained_report(capsys, tmp_path, setup):
    code, out, err = run(capsys, "evaluate", f"dataset={setup['data']}", f"world_model.checkpoint={setup['model']}",
                         f"policies=[zoo,{setup['runs']}]", *QUICK, f"run_dir={tmp_path / 'report'}")
    assert code == 0, err
    assert "Spearman" in out and "report:" in out
    result = json.loads((tmp_path / "report" / "results.json").read_text())
    names = [p["policy"] for p in result["policies"]]
    assert len(names) == 13 and "td3bc" in names and "step_0000000" in names      # the zoo's 12 and the run
    assert {"spearman", "kendall", "pearson", "mmrv", "regret@1", "regret@3", "abs_error"} <= set(result["ranking"])
    for m in result["ranking"].values():
        assert m["low"] <= m["high"]
    assert result["closed_loop"]["error"]["step"][-1] == 15
    assert len(result["open_loop"]["error"]["q50"]) == 8
    assert all(p["nonfinite_rows"] == 0 and p["diverged_rows"] >= 0 for p in result["policies"])
    page = (tmp_path / "report" / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 3
    assert not re.search(r'(src|href)="(https?:)?//', page)      # nothing fetched from a network
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| Spearman ρ |" in md and "## Per policy" in md
    for png in ("returns.png", "horizon.png", "ranks.png"):
        assert (tmp_path / "report" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    tags = EventAccumulator(str(tmp_path / "report" / "tb")).Reload().Tags()["scalars"]
    assert "rank/spearman" in tags and "open_loop/median_state_error" in tags


def test_simulator_and_model_start_from_the_same_states(setup):
    from envs.d4rl_format import read_d4rl
    from worldmodels.registry import load_world_model

    ds = read_d4rl(setup["data"])
    task = get_task("hopper")
    model = load_world_model(setup["model"], ds)
    for how in ("reset", "dataset"):
        start = start_states(task, how, 3, seed=1, ds=ds)
        assert start.obs.shape == (3, 11) and start.qpos.shape == (3, 6)
    zoo = load_candidates(["zoo"], task)[:3]
    cfg = EvalConfig(horizon=5, rows=3, open_loop_rows=5, open_loop_horizon=4, bootstrap=20)
    a = evaluate(model, task, zoo, start_states(task, "reset", 3, 0), cfg, ds=ds)
    b = evaluate(model, task, zoo, start_states(task, "reset", 3, 0), cfg, ds=ds)
    assert a["policies"] == [dict(p, simulator_seconds=q["simulator_seconds"], model_seconds=q["model_seconds"],
                                  imagined_transitions_per_second=q["imagined_transitions_per_second"])
                             for p, q in zip(b["policies"], a["policies"])]   # the same seed, the same figures
    assert a["closed_loop"]["error"]["q50"][0] < 1.0                        # one step from an identical state


def test_replay_segments_stay_inside_episodes():
    class DS:
        def __init__(self):
            self.n = 10

        def __len__(self):
            return self.n

        def episode_ends(self):
            return np.array([4, 10])

    starts, held = replay_segments(DS(), rows=10, horizon=3, seed=0)
    ends = np.where(starts < 4, 4, 10)
    for j, s in enumerate(starts):
        assert held[:, j].tolist() == [s + t < ends[j] for t in range(3)]
    policy = ReplayPolicy(torch.arange(6.0).reshape(3, 2, 1))
    state = policy.initial_state(2)
    for t in range(3):
        state, a = policy.act(state, None, None, deterministic=True)
        assert a[:, 0].tolist() == [2.0 * t, 2.0 * t + 1]


def test_bad_input_is_refused_in_one_line(capsys, tmp_path, setup):
    base = [f"dataset={setup['data']}", f"world_model.checkpoint={setup['model']}", *QUICK]
    wrong = tmp_path / "wrong.pt"
    save_policy(wrong, TanhActor(5, 2, (8,)), "other")
    empty = tmp_path / "empty"
    empty.mkdir()
    walker = small_dataset(tmp_path / "walker2d-tiny.hdf5", "walker2d", n=1500)
    assert main(["fit", f"dataset={walker}", *TINY_FIT, f"run_dir={tmp_path / 'wfit'}"]) == 0
    capsys.readouterr()
    cases = [
        ([f"policies=[{wrong}]"], "policy has obs_dim=5, act_dim=2; task 'hopper' has obs_dim=11, act_dim=3"),
        ([f"policies=[{empty}]"], "no policies in this folder"),
        (["horizon=0"], "horizon: expected a positive integer, got 0"),
        (["max_state_std=-1"], "max_state_std: expected a positive number of standard deviations or null, got -1"),
        (["max_state_std=wide"], "option 'max_state_std': expected a number of standard deviations or null"),
        ([f"world_model.checkpoint={tmp_path / 'wfit' / 'world_model.pt'}"], "fitted for task 'walker2d'"),
    ]
    for extra, message in cases:
        out_dir = tmp_path / f"r{len(message)}"
        code, _, err = run(capsys, "evaluate", *base, *extra, f"run_dir={out_dir}")
        assert code == 2 and message in err, err
        assert len(err.strip().splitlines()) == 1
        assert not (out_dir / "report.html").exists() and not (out_dir / "results.json").exists()


@pytest.mark.parametrize("mode", ["step", "segment"])
def test_a_diffusion_model_is_fitted_trained_in_and_evaluated_like_the_ensemble(capsys, tmp_path, setup, mode):
    fit = ["world_model=diffusion", f"world_model.mode={mode}", "world_model.segment=4", "world_model.members=2",
           "world_model.elites=2", "world_model.hidden=32", "world_model.max_epochs=2"]
    code, out, err = run(capsys, "fit", f"dataset={setup['data']}", *fit, f"run_dir={tmp_path / 'fit'}")
    assert code == 0 and "member 1:" in out, err
    model = tmp_path / "fit" / "world_model.pt"
    code, out, err = run(capsys, "train", "agent=mopo", "agent.penalty=disagreement", f"dataset={setup['data']}",
                         f"world_model.checkpoint={model}", "train.steps=40", *FAST[:1], "train.rollout_batch=50",
                         "train.rollout_every=20", "train.final_eval_episodes=1", f"run_dir={tmp_path / 'train'}")
    assert code == 0 and "mopo on hopper-tiny" in out, err
    code, out, err = run(capsys, "evaluate", f"dataset={setup['data']}", f"world_model.checkpoint={model}",
                         f"policies=[zoo,{tmp_path / 'train'}]", *QUICK, f"run_dir={tmp_path / 'ev'}")
    assert code == 0, err
    result = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert [p["policy"] for p in result["policies"]][-1] == "train" and len(result["policies"]) == 13
    assert all(p["nonfinite_rows"] == 0 for p in result["policies"]) and "Spearman" in out


def test_zoo_ranking_table_and_which_error_predicts_rank_quality(tmp_path):
    from eval.zoo_ranking import LEVELS, TASKS, summarize

    rng = np.random.default_rng(0)
    for i, (task, level) in enumerate([(t, lv) for t in TASKS for lv in LEVELS][:5]):
        rho = 0.5 + 0.1 * i                      # rank quality rises as the long-horizon error falls
        ranking = {m: {"value": v, "low": v - 0.1, "high": v + 0.1}
                   for m, v in (("spearman", rho), ("mmrv", 0.3 - 0.05 * i), ("kendall", rho), ("pearson", rho),
                                ("regret@1", 0.1))}
        err = {"1": {"value": float(rng.uniform(0.01, 0.02))}, "100": {"value": 1.0 - 0.1 * i}}
        (tmp_path / f"{task}-{level}").mkdir()
        (tmp_path / f"{task}-{level}" / "results.json").write_text(json.dumps(
            {"ranking": ranking, "closed_loop": {"median_error_at": err, "calibration": 0.3},
             "policies": [{}] * 12, "command": "reverie evaluate ..."}))
    rows, lines = summarize(tmp_path, "python -m eval.zoo_ranking")
    assert len(rows) == 5 and rows[0]["task"] == "hopper" and rows[0]["data"] == "random"
    text = "\n".join(lines)
    assert "| hopper | medium-replay | 0.70 [0.60, 0.80] | 0.200 [0.100, 0.300] |" in text
    assert "| long horizon (step 100) | 1.00 [" in text           # perfectly ordered by construction
    assert "Not yet run: halfcheetah-medium-replay, walker2d-random" in text
