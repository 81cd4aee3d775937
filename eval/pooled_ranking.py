"""One world model's verdicts on several tasks' zoos, ranked together and task by task; or several models'
verdicts, averaged.

Each ``reverie evaluate`` run ranks one task's policies (its ``results.json``). Papers on
video world models as policy evaluators (WorldGym's r = 0.78, SC3-Eval) report one
correlation over (policy, task) pairs; this pools the runs the same way and keeps the
stricter per-task figures beside it. Pooling mixes two questions: does the model tell an
easy task from a hard one (between tasks), and does it order one task's policies (within a
task, what choosing a checkpoint needs). The table says both: the pooled row, and the mean of
the per-task correlations.

Intervals: 95% percentile bootstrap over policies, resampled within each task, so every
resample keeps each task's count of policies. Scores are on the results' own scale (the
success rate, 0 to 1, for manipulation; MMRV and error on that scale).

Several fits: given runs of every task from each of several world models (fits of one recipe with other
seeds), a policy's imagined score is the mean of the models' (their real scores, from the same resets, must
agree). Two fits alike in held-out error can call a task's weak policies apart; their mean is the verdict of
the recipe rather than of one fit, and each model's own figures are kept beside it.

    python -m eval.pooled_ranking runs/manip/rank-ref2/*/results.json --out assets/reports/manipulation/pooled.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from envs.atomic_io import write_json, write_text
from envs.errors import ReverieError
from eval import metrics

METRICS = {"pearson": metrics.pearson, "spearman": metrics.spearman, "mmrv": metrics.mmrv,
           "abs_error": metrics.abs_error}


def read_run(path: Path) -> dict:
    """One evaluate run's task, world model, score scale and (imagined, real) score per policy."""
    try:
        blob = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReverieError(f"{path}: no such file (expected a reverie evaluate results.json)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReverieError(f"{path}: not JSON ({exc.__class__.__name__}); expected a reverie evaluate "
                           "results.json") from None
    for key in ("task", "policies"):
        if not isinstance(blob, dict) or key not in blob:
            raise ReverieError(f"{path}: no field '{key}'; expected a reverie evaluate results.json")
    scored = [p for p in blob["policies"] if "real_score" in p and "imagined_score" in p]
    if len(scored) < 2 or len(scored) != len(blob["policies"]):
        raise ReverieError(f"{path}: field 'policies': expected at least 2 policies, each with real_score and "
                           f"imagined_score; {len(scored)} of {len(blob['policies'])} have both")
    percent = blob.get("labels", {}).get("score", "").endswith("(%)")
    scale = 100.0 if percent else 1.0                  # the ranking's own scale: video runs rank the 0-1 rate
    return {"path": str(path), "task": blob["task"], "world_model": blob.get("world_model"),
            "unit": "success rate" if percent else "normalized score", "names": [p.get("policy") for p in scored],
            "imagined": np.array([p["imagined_score"] for p in scored], dtype=np.float64) / scale,
            "real": np.array([p["real_score"] for p in scored], dtype=np.float64) / scale}


def pool(runs: list[dict], samples: int = 2000, seed: int = 0) -> dict:
    """Per task and pooled: Pearson, Spearman, MMRV and mean absolute error with intervals. Several world models'
    runs of every task: each policy's imagined score is their mean (``models``: each one's own figures)."""
    units = {r["unit"] for r in runs}
    if len(units) > 1:
        raise ReverieError(f"results: scores on different scales ({', '.join(sorted(units))})")
    by_task: dict[str, list[dict]] = {}
    for r in runs:
        by_task.setdefault(r["task"], []).append(r)
    for task, group in by_task.items():
        if len({r["world_model"] for r in group}) < len(group):
            raise ReverieError(f"results: task {task} given more than once for one world model (one run per task "
                               "and model)")
        first = group[0]
        for r in group[1:]:
            if r["names"] != first["names"] or not np.array_equal(r["real"], first["real"]):
                raise ReverieError(f"results: {r['path']} and {first['path']} rank other policies or other resets "
                                   f"of {task} (their policies or real scores differ); average runs of one zoo")
    model_sets = {tuple(sorted(map(str, (r["world_model"] for r in group)))) for group in by_task.values()}
    if len(model_sets) > 1:
        models = sorted({str(r["world_model"]) for r in runs})
        raise ReverieError(f"results: runs of different world models ({', '.join(models)}); pool one model's "
                           "verdicts, or every task's from the same models")
    if len(by_task) < len(runs):            # several models: one averaged run per task
        runs_by_model = {m: [r for r in runs if str(r["world_model"]) == m] for m in next(iter(model_sets))}
        # rounded: policies the models tie on in sum must tie in the mean too (MMRV counts a tie as a violation)
        runs = [group[0] | {"imagined": np.mean([r["imagined"] for r in group], 0).round(12),
                            "world_model": ", ".join(sorted(str(r["world_model"]) for r in group)),
                            "path": ", ".join(r["path"] for r in group)} for group in by_task.values()]
        result = pool(runs, samples, seed)
        result["models"] = {m: alone(group) for m, group in runs_by_model.items()}
        return result
    tasks = [r["task"] for r in runs]
    per_task = {r["task"]: {name: metrics.bootstrap(f, r["imagined"], r["real"], samples, seed=seed)
                            for name, f in METRICS.items()} | {"policies": len(r["real"])} for r in runs}
    s = np.concatenate([r["imagined"] for r in runs])
    r_ = np.concatenate([r["real"] for r in runs])
    strata = np.concatenate([[r["task"]] * len(r["real"]) for r in runs])
    pooled = {name: metrics.bootstrap(f, s, r_, samples, seed=seed, strata=strata) for name, f in METRICS.items()}

    # The runs' policies lie task by task, and a stratified resample keeps each task's positions, so the
    # labels of any resample are these.
    def mean_task_pearson(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.mean([metrics.pearson(a[strata == t], b[strata == t]) for t in tasks]))

    return {"tasks": per_task, "pooled": pooled | {"policies": len(s)},
            "mean_task_pearson": metrics.bootstrap(mean_task_pearson, s, r_, samples, seed=seed, strata=strata),
            "world_model": runs[0]["world_model"], "unit": runs[0]["unit"], "runs": [r["path"] for r in runs]}


def alone(runs: list[dict]) -> dict:
    """One model's figures, without intervals: Pearson and MMRV per task and pooled, the mean per-task Pearson."""
    s = np.concatenate([r["imagined"] for r in runs])
    r_ = np.concatenate([r["real"] for r in runs])
    tasks = {r["task"]: {"pearson": metrics.pearson(r["imagined"], r["real"]), "mmrv": metrics.mmrv(r["imagined"],
                                                                                                      r["real"])}
             for r in runs}
    return {"tasks": tasks, "pooled": {"pearson": metrics.pearson(s, r_), "mmrv": metrics.mmrv(s, r_)},
            "mean_task_pearson": float(np.mean([t["pearson"] for t in tasks.values()]))}


def table(result: dict, command: str) -> str:
    def cell(m: dict, bold_if=None) -> str:
        text = f"{m['value']:.2f} [{m['low']:.2f}, {m['high']:.2f}]"
        return f"**{text}**" if bold_if is not None and bold_if(m["value"]) else text

    lines = [f"Command: `{command}`", "",
             f"World model: `{result['world_model']}`; scores: {result['unit']}. Target: Pearson >= 0.8 and "
             "MMRV <= 0.15 (bold where met).", "",
             "| | policies | Pearson [95%] | Spearman [95%] | MMRV [95%] | mean abs. error |",
             "|---|---:|---:|---:|---:|---:|"]
    for task, m in result["tasks"].items():
        lines.append(f"| {task} | {m['policies']} | {cell(m['pearson'], lambda v: v >= 0.8)} | "
                     f"{cell(m['spearman'])} | {cell(m['mmrv'], lambda v: v <= 0.15)} | {m['abs_error']['value']:.2f} |")
    p = result["pooled"]
    lines.append(f"| pooled (policy, task) pairs | {p['policies']} | {cell(p['pearson'], lambda v: v >= 0.8)} | "
                 f"{cell(p['spearman'])} | {cell(p['mmrv'], lambda v: v <= 0.15)} | {p['abs_error']['value']:.2f} |")
    lines += ["", f"Mean of the per-task Pearson correlations: {cell(result['mean_task_pearson'])}."]
    if "models" in result:
        tasks = list(result["tasks"])
        lines += ["", f"The imagined scores above are the mean of {len(result['models'])} models'. Each alone "
                  "(Pearson / MMRV, no intervals):", "",
                  "| model | " + " | ".join(tasks) + " | pooled | mean per-task Pearson |",
                  "|---|" + "---:|" * (len(tasks) + 2)]
        for model, m in result["models"].items():
            lines.append(f"| `{model}` | " + " | ".join(
                f"{m['tasks'][t]['pearson']:.2f} / {m['tasks'][t]['mmrv']:.2f}" for t in tasks)
                + f" | {m['pooled']['pearson']:.2f} / {m['pooled']['mmrv']:.2f} | {m['mean_task_pearson']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", type=Path, help="results.json of reverie evaluate runs, one per task")
    ap.add_argument("--out", type=Path, required=True, help="the markdown table (a .json beside it holds the figures)")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        if args.out.suffix != ".md":
            raise ReverieError(f"--out: expected a .md path, got '{args.out}'")
        result = pool([read_run(p) for p in args.results], args.bootstrap, args.seed)
    except ReverieError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    command = "python -m eval.pooled_ranking " + " ".join(argv if argv is not None else sys.argv[1:])
    text = table(result, command)
    write_json(args.out.with_suffix(".json"), result | {"command": command})
    write_text(args.out, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
