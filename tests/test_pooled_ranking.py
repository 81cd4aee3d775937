"""Pooling one world model's per-task verdicts: the pooled figures are the metrics on every (policy, task)
pair, the per-task ones are each run's own, and results that cannot be pooled are refused with exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eval import metrics
from eval.pooled_ranking import main


def write_run(path, task, imagined, real, model="runs/m/video.pt"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "task": task, "world_model": model, "labels": {"score": "success rate (%)"},
        "policies": [{"policy": f"p{i}", "real_score": r, "imagined_score": s}
                     for i, (s, r) in enumerate(zip(imagined, real))]}))
    return path


def test_pooled_figures_are_the_metrics_over_every_policy_task_pair(tmp_path, capsys):
    # Within each task the order is partly wrong; between tasks the levels are right.
    a = write_run(tmp_path / "a/results.json", "metaworld-push", [10, 30, 20, 40], [0, 20, 30, 40])
    b = write_run(tmp_path / "b/results.json", "metaworld-door-open", [60, 90, 70, 100], [70, 80, 90, 100])
    out = tmp_path / "report/pooled.md"
    assert main([str(a), str(b), "--out", str(out), "--bootstrap", "300"]) == 0
    got = json.loads(out.with_suffix(".json").read_text())
    s = np.array([10, 30, 20, 40, 60, 90, 70, 100]) / 100
    r = np.array([0, 20, 30, 40, 70, 80, 90, 100]) / 100
    assert got["pooled"]["pearson"]["value"] == pytest.approx(metrics.pearson(s, r))
    assert got["pooled"]["mmrv"]["value"] == pytest.approx(metrics.mmrv(s, r))
    assert got["tasks"]["metaworld-push"]["spearman"]["value"] == pytest.approx(metrics.spearman(s[:4], r[:4]))
    within = np.mean([metrics.pearson(s[:4], r[:4]), metrics.pearson(s[4:], r[4:])])
    assert got["mean_task_pearson"]["value"] == pytest.approx(within)
    # Between-task spread lifts the pooled correlation above what either task shows alone.
    assert got["pooled"]["pearson"]["value"] > 0.9 > within
    for m in (got["pooled"]["pearson"], got["mean_task_pearson"]):
        assert m["low"] <= m["value"] <= m["high"]
    text = out.read_text()
    assert "| pooled (policy, task) pairs | 8 |" in text and "| metaworld-door-open | 4 |" in text
    assert "Command: `python -m eval.pooled_ranking" in text


def test_several_fits_verdicts_are_averaged_per_policy_and_each_fit_is_kept_beside(tmp_path, capsys):
    """Runs of every task from two world models (fits of one recipe): the ranked imagined score of a policy is the
    two models' mean, and each model's own figures are reported too. Runs that rank other resets (real scores that
    differ) are refused."""
    real = {"metaworld-push": [0, 10, 20, 60], "metaworld-door-open": [0, 50, 90, 100]}
    fits = {"fit0.pt": {"metaworld-push": [0, 40, 30, 70], "metaworld-door-open": [0, 60, 80, 100]},
            "fit1.pt": {"metaworld-push": [0, 0, 30, 50], "metaworld-door-open": [10, 40, 100, 90]}}
    paths = [write_run(tmp_path / m / t / "results.json", t, fits[m][t], real[t], m) for t in real for m in fits]
    out = tmp_path / "report/pooled.md"
    assert main([*map(str, paths[::-1]), "--out", str(out), "--bootstrap", "200"]) == 0
    got = json.loads(out.with_suffix(".json").read_text())
    for t in real:
        mean = (np.array(fits["fit0.pt"][t]) + np.array(fits["fit1.pt"][t])) / 200
        assert got["tasks"][t]["pearson"]["value"] == pytest.approx(metrics.pearson(mean, np.array(real[t]) / 100))
        for m in fits:
            assert got["models"][m]["tasks"][t]["mmrv"] == pytest.approx(
                metrics.mmrv(np.array(fits[m][t]) / 100, np.array(real[t]) / 100))
    assert got["world_model"] == "fit0.pt, fit1.pt" and got["pooled"]["policies"] == 8
    assert "mean of 2 models'" in out.read_text() and "| `fit1.pt` |" in out.read_text()

    other = write_run(tmp_path / "fit2.pt/push/results.json", "metaworld-push", [0, 1, 2, 3], [0, 10, 30, 60],
                      "fit2.pt")
    again = tmp_path / "again/pooled.md"
    assert main([str(paths[0]), str(other), "--out", str(again)]) == 2
    assert "rank other policies or other resets of metaworld-push" in capsys.readouterr().err
    assert not again.exists()


def test_policies_the_fits_tie_on_in_sum_tie_in_the_mean(tmp_path):
    """(0.1 + 0.2) / 2 and (0.3 + 0.0) / 2 differ in floating point; the averaged verdict must still call the two
    policies level, as one model scoring both 15% would (MMRV counts the tie against the real order; unrounded,
    the two fits' mean would read 0)."""
    a = write_run(tmp_path / "a.json", "metaworld-push", [10, 30], [50, 0], "fit0.pt")
    b = write_run(tmp_path / "b.json", "metaworld-push", [20, 0], [50, 0], "fit1.pt")
    level = write_run(tmp_path / "level.json", "metaworld-push", [15, 15], [50, 0], "one.pt")
    for runs, name in (([a, b], "mean"), ([level], "one")):
        out = tmp_path / name / "pooled.md"
        assert main([*map(str, runs), "--out", str(out), "--bootstrap", "50"]) == 0
        assert json.loads(out.with_suffix(".json").read_text())["tasks"]["metaworld-push"]["mmrv"]["value"] == 0.25


@pytest.mark.parametrize("case, message", [
    ("missing", "no such file"),
    ("not-json", "not JSON"),
    ("no-policies", "no field 'policies'"),
    ("same-task", "task metaworld-push given more than once"),
    ("two-models", "runs of different world models"),
])
def test_runs_that_cannot_be_pooled_are_refused_in_one_line(tmp_path, capsys, case, message):
    good = write_run(tmp_path / "good/results.json", "metaworld-push", [1, 2], [1, 3])
    other = {"missing": tmp_path / "nowhere.json",
             "not-json": tmp_path / "bad.json",
             "no-policies": tmp_path / "empty.json",
             "same-task": write_run(tmp_path / "again/results.json", "metaworld-push", [1, 2], [2, 1]),
             "two-models": write_run(tmp_path / "m2/results.json", "metaworld-reach", [1, 2], [2, 1], "other.pt")}[case]
    (tmp_path / "bad.json").write_text("{truncated")
    (tmp_path / "empty.json").write_text(json.dumps({"task": "metaworld-reach"}))
    out = tmp_path / "report/pooled.md"
    assert main([str(good), str(other), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not out.exists() and not out.with_suffix(".json").exists()
