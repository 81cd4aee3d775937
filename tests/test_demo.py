"""End to end on the shipped zoo: `reverie dataset make` and `reverie demo`."""

import json

import pytest

from eval.cli import main


@pytest.mark.slow
def test_dataset_make_then_info_then_reuse(capsys, tmp_path):
    argv = ["dataset", "make", "task=hopper", "level=medium-replay", "size=3000", f"run_dir={tmp_path / 'run'}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("made hopper-medium-replay: 3,000 transitions") and "transitions/s" in out
    assert (tmp_path / "run" / "config.yaml").is_file() and list((tmp_path / "run" / "tb").iterdir())
    assert main(["dataset", "info", "hopper-medium-replay", "size=3000", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["transitions"] == 3000 and info["task"] == "hopper" and info["has_simulator_states"]
    assert info["normalized_score"] is not None and info["continuity_breaks"] == 0
    assert main(argv[:-1] + [f"run_dir={tmp_path / 'run2'}"]) == 0
    assert capsys.readouterr().out.startswith("reused hopper-medium-replay")


@pytest.mark.slow
def test_demo_runs_on_the_embedded_default(capsys, tmp_path):
    assert main(["demo", "size=2000", "train.steps=200", "train.rollout_batch=500", "train.rollout_every=100",
                 "train.eval_every=100", "train.final_eval_episodes=2", "world_model_max_epochs=3",
                 "evaluate.rows=3", "evaluate.horizon=50", "evaluate.open_loop_rows=20", "evaluate.bootstrap=100",
                 f"run_dir={tmp_path / 'demo'}"]) == 0
    out = capsys.readouterr().out
    assert "transitions  2,000" in out and "normalized" in out and "coverage" in out
    assert "mopo on hopper-medium-replay, seed 0, 200 updates: normalized score" in out
    assert "name: hopper" in (tmp_path / "demo" / "config.yaml").read_text()
    result = json.loads((tmp_path / "demo" / "train" / "result.json").read_text())
    assert result["agent"] == "mopo" and result["steps"] == 200
    assert f"report: {tmp_path / 'demo' / 'evaluate' / 'report.html'}" in out
    evaluated = json.loads((tmp_path / "demo" / "evaluate" / "results.json").read_text())
    assert [p["policy"] for p in evaluated["policies"]][-1] == "train" and len(evaluated["policies"]) == 13
