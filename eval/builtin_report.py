"""Make every built-in dataset and tabulate it with the zoo it was made from.

    python -m eval.builtin_report [--size N] [--tasks hopper halfcheetah walker2d] [--out assets/reports/builtin_datasets.csv]

Each (task, level) cell is one `make_builtin` call; finished cells already in
the CSV are skipped, so an interrupted run resumes. ``--size 0`` means D4RL's
default size for each level. The CSV is rewritten atomically after each cell,
and ``README.md`` beside it is rewritten from the CSV and the shipped
``zoo.json`` files at the end.
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import sys
import time
from pathlib import Path

import torch

from envs.atomic_io import atomic_path, write_text
from envs.builtin import make_builtin
from envs.d4rl_format import read_d4rl
from envs.errors import ReverieError
from envs.info import dataset_info
from envs.policies import load_zoo
from envs.tasks import LEVELS, TASKS, get_task

def markdown(folder: Path, tasks: list[str] = list(TASKS)) -> str:
    """Tables for humans: per task, the shipped policies' returns, then its datasets
    (from every report CSV in ``folder``)."""
    rows = []
    for csv_path in sorted(folder.glob("*.csv")):
        with csv_path.open() as f:
            rows += list(csv.DictReader(f))
    commands = sorted({r["command"] for r in rows})
    out = ["# Built-in datasets and the behaviour policies that make them", "",
           "Normalized scores use D4RL's reference returns. Policy returns are means ± std over the stated "
           "episodes (deterministic actions, unseen seeds). Dataset scores are over the dataset's finished "
           "episodes. Made by:", ""] + [f"- `{c}`" for c in commands] + [""]
    for task in tasks:
        try:
            zoo = load_zoo(task)
        except ReverieError:
            continue
        rec = zoo.record
        out += [f"## {task}", "",
                f"TD3, {rec['trained_steps']:,} environment steps, MuJoCo {rec['mujoco']}; "
                f"trained by `{rec.get('train_command', '?')}`, chosen and measured by `{rec['command']}`.", "",
                "| policy | step | return | normalized | role |", "| --- | ---: | ---: | ---: | --- |"]
        for p in rec["policies"]:
            out.append(f"| {p['name']} | {p['step']:,} | {p['return_mean']:.1f} ± {p['return_std']:.1f} "
                       f"({p['episodes']} ep.) | {p['normalized_score']:.1f} | {', '.join(p['roles'])} |")
        mine = sorted((r for r in rows if r["task"] == task), key=lambda r: (int(r["size"]) < 200_000, LEVELS.index(r["level"])))
        if mine:
            out += ["", "| dataset | transitions | episodes | normalized score | coverage | make time |",
                    "| --- | ---: | ---: | ---: | ---: | ---: |"]
            for r in mine:
                out.append(f"| {task}-{r['level']} (seed {r['seed']}) | {int(r['size']):,} | {r['episodes']} | "
                           f"{r['normalized_score']} ± {r['normalized_score_std']} | {r['coverage']} | "
                           f"{r['seconds']} s ({int(float(r['transitions_per_second'])):,}/s) |")
        out.append("")
    return "\n".join(out)


FIELDS = ["task", "level", "size", "seed", "episodes", "return_mean", "return_std", "normalized_score",
          "normalized_score_std", "coverage", "seconds", "transitions_per_second", "command"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tasks", nargs="+", default=["hopper", "halfcheetah", "walker2d"])
    p.add_argument("--levels", nargs="+", default=list(LEVELS))
    p.add_argument("--out", type=Path, default=Path("assets/reports/builtin_datasets.csv"))
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
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
            path, manifest, _ = make_builtin(task, level, size=size, seed=args.seed, workers=args.workers)
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
    write_text(args.out.with_name("README.md"), markdown(args.out.parent))  # every task, not only this run's


if __name__ == "__main__":
    main()
