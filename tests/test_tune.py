"""``reverie tune``: Optuna (Hydra's sweeper) over a learner's hyper-parameters, by the simulator's
score or by the policy's value in a held-out world model; trials are cached and the search replays."""

from __future__ import annotations

import csv
import json

import pytest

pytest.importorskip("optuna")

from eval.cli import main  # noqa: E402
from tests.test_train import small_dataset  # noqa: E402

TINY = ["agent.hidden=[32,32]", "world_model.members=3", "world_model.elites=2", "world_model.hidden=[32,32]",
        "world_model.weight_decay=[0,0,0]", "world_model.max_epochs=2",
        "train_overrides=['train.rollout_batch=200','train.rollout_every=50','train.eval_every=100',"
        "'train.eval_episodes=2','train.final_eval_episodes=2','train.log_every=50']"]


@pytest.mark.slow
def test_both_objectives_search_the_space_record_true_scores_and_replay(capsys, tmp_path):
    data = small_dataset(tmp_path / "hopper-tiny.hdf5")
    base = ["tune", f"dataset={data}", "size=null", "steps=40", "trials=3", "startup_trials=2",
            "holdout.rows=5", "holdout.horizon=50", f"out={tmp_path / 'tune'}", *TINY]
    assert main([*base, "objective=simulator"]) == 0, capsys.readouterr().err
    assert main([*base, "objective=offline"]) == 0, capsys.readouterr().err
    out = tmp_path / "tune"
    trials = {p.parent.name: json.loads(p.read_text()) for p in out.glob("trials/*/result.json")}
    searched = [t for t in trials.values() if t["params"]]
    # the default and at least the 3 first trials (both searches start from the same seeded random draws)
    assert any(not t["params"] for t in trials.values()) and len(searched) >= 3
    for t in searched:
        p = t["params"]
        assert set(p) == {"agent.penalty_coef", "agent.penalty", "agent.rollout_length"}   # members was fixed
        assert 0.1 <= float(p["agent.penalty_coef"]) <= 10 and p["agent.penalty"] in ("aleatoric", "disagreement")
        assert int(p["agent.rollout_length"]) in (1, 5, 10, 20)
        assert f"agent.rollout_length={p['agent.rollout_length']}" in t["command"]
        assert t["offline_nonfinite_rows"] == 0 and 0 < t["offline_length"] <= 50
    assert len({json.dumps(t["params"], sort_keys=True) for t in searched}) == len(searched)
    for objective in ("simulator", "offline"):
        assert len(list((out / "searches" / objective).glob("*.json"))) == 3
    report = (out / "tune.md").read_text()
    assert "| default | (the shipped defaults) |" in report and "configs/search_space/mopo.yaml" in report
    assert "best by the simulator objective (3 trials)" in report and "best by the offline objective (3 trials)" in report
    assert len(list(csv.DictReader(open(out / "trials.csv")))) == len(trials)
    # a rerun replays the seeded search from its cached trials: nothing is trained again
    stamps = {k: (out / "trials" / k / "result.json").stat().st_mtime for k in trials}
    assert main([*base, "objective=offline"]) == 0
    assert {p.parent.name for p in out.glob("trials/*/result.json")} == set(trials)
    assert all((out / "trials" / k / "result.json").stat().st_mtime == s for k, s in stamps.items())


def test_bad_tune_options_are_refused_in_one_line(capsys, tmp_path):
    for args, message in [(["objective=reward"], "option 'objective': expected 'simulator' or 'offline'"),
                          (["holdout.seed=0"], "holdout.seed: must differ from seed (0)"),
                          (["search=nope"], "search: no search space 'nope' (configs/search_space/nope.yaml); expected one of mobile, mopo"),
                          (["agent=sac"], "sac"),
                          (["trials=0"], "option 'trials': expected a positive integer")]:
        code = main(["tune", *args, f"out={tmp_path / 'x'}"])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x").exists()
    assert main(["tune", "search=mobile", "--cfg", "job"]) == 0 and "search: mobile" in capsys.readouterr().out
