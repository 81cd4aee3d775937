"""Can an ensemble world model rank a task's policy zoo? The issue's target study.

For each task and each dataset the model is fitted on (random, medium, medium-replay),
``reverie evaluate`` runs the task's shipped zoo in the simulator and in the model
from the same simulator resets. One folder per (task, level) under ``--out``; a
finished one (``results.json``) is skipped, so the study resumes. The models are the
ones ``reverie train ... seed=0`` fits (the same cache key), so the benchmark grid
and this study fit each only once.

The table: Spearman and MMRV with 95% bootstrap intervals over policies, regret@1,
and the closed-loop median state error at step 1 and step 100; then, across the
(model, data) pairs, how well each error predicts rank quality (Spearman of -error
with the pair's Spearman).

    python -m eval.zoo_ranking --out runs/evaluate/zoo --report assets/reports/evaluate
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

import numpy as np

from envs.atomic_io import write_text
from eval.metrics import bootstrap, spearman

TASKS = ("hopper", "halfcheetah", "walker2d")
LEVELS = ("random", "medium", "medium-replay")


def cell_args(task: str, level: str, out: Path, args) -> list[str]:
    return ["evaluate", f"task={task}", f"dataset={task}-{level}", f"size={args.size}", "seed=0",
            f"rows={args.rows}", f"horizon={args.horizon}", f"bootstrap={args.bootstrap}",
            f"threads={args.threads}", f"max_state_std={args.max_state_std}", f"run_dir={out / f'{task}-{level}'}"]


def summarize(out: Path, command: str, max_state_std: float = 20.0) -> tuple[list[dict], list[str]]:
    rows = []
    for task in TASKS:
        for level in LEVELS:
            f = out / f"{task}-{level}" / "results.json"
            if not f.is_file():
                continue
            r = json.loads(f.read_text())
            rk, cl = r["ranking"], r["closed_loop"]["median_error_at"]
            rows.append({"task": task, "data": level, "policies": len(r["policies"]),
                         **{f"{m}{suffix}": rk[m][key] for m in ("spearman", "mmrv", "kendall", "pearson", "regret@1")
                            for suffix, key in (("", "value"), ("_low", "low"), ("_high", "high"))},
                         "error_step1": cl["1"]["value"], "error_step100": cl.get("100", {}).get("value", float("nan")),
                         "calibration": r["closed_loop"]["calibration"],
                         "diverged_rows": sum(p.get("diverged_rows", 0) for p in r["policies"]),
                         "command": r["command"]})
    lines = ["# Ranking the policy zoo in an ensemble world model", "",
             "Each row: a 7-member ensemble (configs/world_model/ensemble.yaml, the model `reverie train` fits) "
             "on 100,000 transitions of the dataset; the task's 12 zoo policies, each from the same 20 "
             "simulator resets for 1,000 steps, in the simulator and in the model (an elite drawn each step, "
             f"sampled; a row whose state leaves the model's data mean ± {max_state_std:g} std is cut as diverged, "
             "as NaN rows are). 95% bootstrap intervals over policies. MMRV and regret on the normalized return "
             "(D4RL score / 100). Error: closed-loop median state error (mean |Δ| in data-std units) at "
             "steps 1 and 100. Target: Spearman ≥ 0.9 and MMRV ≤ 0.1.", "", f"Command: `{command}`", "",
             "| task | model data | Spearman [95%] | MMRV [95%] | regret@1 | error @1 | error @100 | diverged rows "
             "| target met |", "|---|---|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in rows:
        met = r["spearman"] >= 0.9 and r["mmrv"] <= 0.1
        lines.append(f"| {r['task']} | {r['data']} | {r['spearman']:.2f} [{r['spearman_low']:.2f}, "
                     f"{r['spearman_high']:.2f}] | {r['mmrv']:.3f} [{r['mmrv_low']:.3f}, {r['mmrv_high']:.3f}] | "
                     f"{r['regret@1']:.3f} | {r['error_step1']:.4f} | {r['error_step100']:.3f} | {r['diverged_rows']} | "
                     f"{'yes' if met else 'no'} |")
    if len(rows) >= 4:
        rho = np.array([r["spearman"] for r in rows])
        lines += ["", "## Which error predicts rank quality?", "",
                  f"Across the {len(rows)} (model, data) pairs: Spearman of −error with the pair's rank "
                  "correlation (higher: lower error goes with better ranking), 95% bootstrap over pairs.", "",
                  "| error | Spearman with rank quality [95%] |", "|---|---:|"]
        for key, label in (("error_step1", "one-step (step 1)"), ("error_step100", "long horizon (step 100)")):
            e = -np.array([r[key] for r in rows])
            ok = np.isfinite(e) & np.isfinite(rho)
            b = bootstrap(spearman, e[ok], rho[ok], 2000)
            lines.append(f"| {label} | {b['value']:.2f} [{b['low']:.2f}, {b['high']:.2f}] |")
    missing = [f"{t}-{lv}" for t in TASKS for lv in LEVELS if not (out / f"{t}-{lv}" / "results.json").is_file()]
    lines += ["", "Not yet run: " + (", ".join(missing) if missing else "none")]
    return rows, lines


def main(argv: list[str] | None = None) -> int:
    from eval.cli import main as reverie

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/evaluate/zoo")
    ap.add_argument("--report", default="assets/reports/evaluate")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--levels", default=",".join(LEVELS))
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--rows", type=int, default=20)
    ap.add_argument("--horizon", type=int, default=1000)
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--max-state-std", type=float, default=20.0, help="the diverged-row guard (reverie evaluate "
                    "max_state_std)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--collect-only", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if not args.collect_only:
        for task in args.tasks.split(","):
            for level in args.levels.split(","):
                if (out / f"{task}-{level}" / "results.json").is_file():
                    continue
                print(f"== {task}-{level}", flush=True)
                code = reverie(cell_args(task, level, out, args))
                if code:
                    return code
    root = str(Path(__file__).resolve().parents[1]) + "/"     # paths inside the checkout, as a user types them
    command = "python -m eval.zoo_ranking " + " ".join(a.replace(root, "")
                                                       for a in (argv if argv is not None else sys.argv[1:]))
    rows, lines = summarize(out, command, args.max_state_std)
    if rows:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        write_text(Path(args.report) / "zoo_ranking.csv", buf.getvalue())
    write_text(Path(args.report) / "zoo_ranking.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
