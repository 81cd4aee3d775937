"""Make every built-in dataset and tabulate it: size, episodes, normalized score, time.

    python -m eval.builtin_report [--size N] [--tasks hopper halfcheetah walker2d] [--out assets/reports/builtin_datasets.csv]

Each (task, level) cell is one `make_builtin` call; finished cells already in
the CSV are skipped, so an interrupted run resumes. ``--size 0`` means D4RL's
default size for each level. The CSV is rewritten atomically after each cell.
"""

from __future__ import annotations

import argparse
import csv
import shlex
import sys
import time
from pathlib import Path

import torch

from envs.atomic_io import atomic_path
from envs.builtin import make_builtin
from envs.d4rl_format import read_d4rl
from envs.info import dataset_info
from envs.tasks import LEVELS, get_task

FIELDS = ["task", "level", "size", "seed", "episodes", "return_mean", "return_std", "normalized_score",
          "normalized_score_std", "coverage", "seconds", "transitions_per_second", "command"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tasks", nargs="+", default=["hopper", "halfcheetah", "walker2d"])
    p.add_argument("--levels", nargs="+", default=list(LEVELS))
    p.add_argument("--out", type=Path, default=Path("assets/reports/builtin_datasets.csv"))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    command = "python -m eval.builtin_report " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    rows = []
    if args.out.is_file():
        with args.out.open() as f:
            rows = list(csv.DictReader(f))
    done = {(r["task"], r["level"], r["size"], r["seed"]) for r in rows}
    for task in args.tasks:
        for level in args.levels:
            size = args.size or get_task(task).default_size(level)
            if (task, level, str(size), str(args.seed)) in done:
                continue
            started = time.perf_counter()
            path, manifest = make_builtin(task, level, size=size, seed=args.seed)
            seconds = manifest.get("seconds", time.perf_counter() - started)
            info = dataset_info(read_d4rl(path))
            row = {"task": task, "level": level, "size": size, "seed": args.seed,
                   "episodes": info["episodes"], "return_mean": round(info["return_mean"], 1),
                   "return_std": round(info["return_std"], 1),
                   "normalized_score": round(info["normalized_score"], 1),
                   "normalized_score_std": round(info["normalized_score_std"], 1),
                   "coverage": round(info["coverage"], 3), "seconds": round(seconds, 1),
                   "transitions_per_second": round(manifest["transitions_per_second"]), "command": command}
            rows.append(row)
            with atomic_path(args.out, suffix=".csv") as tmp, tmp.open("w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=FIELDS)
                w.writeheader()
                w.writerows(rows)
            print(f"{task:<12} {level:<14} {size:>9,} transitions  {row['episodes']:>5} episodes  "
                  f"normalized {row['normalized_score']:6.1f} ± {row['normalized_score_std']:5.1f}  "
                  f"{row['seconds']:7.1f} s  {row['transitions_per_second']:>7,} tr/s", flush=True)


if __name__ == "__main__":
    main()
