"""The same `reverie bench` grid through the joblib launcher and through a local Ray: wall-clock of each.

    python tests/bench/bench_launchers.py [--steps 2000] [--jobs 2]

A small hopper dataset, td3bc and mopo x seeds 0 and 1 (4 cells), `jobs` cells at a time; each
launcher gets fresh output and cache folders, so every cell trains (and MOPO fits its model) in
both. Ray's time includes starting and stopping the local Ray. The results tables must agree.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def grid(out: Path, data: Path, args, launcher: list[str], env: dict) -> float:
    train = ",".join(f"'{o}'" for o in ["world_model.members=5", "world_model.elites=3", "world_model.max_epochs=5",
                                       "train.eval_every=100000", "train.final_eval_episodes=5"])
    cmd = [sys.executable, "-m", "eval.cli", "bench", "agents=[td3bc,mopo]", f"datasets=['{data}']", "seeds=[0,1]",
           "size=null", f"steps={args.steps}", f"jobs={args.jobs}", f"out={out}", f"train_overrides=[{train}]",
           *launcher]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    from tests.test_train import small_dataset

    work = Path(tempfile.mkdtemp(prefix="rv-launch-", dir="/tmp"))
    try:
        data = small_dataset(work / "hopper-small.hdf5", n=20_000)
        times, tables = {}, {}
        for name, launcher in [("joblib", []), ("ray", ["launcher=ray", f"ray.temp_dir={work / 'ray'}"])]:
            env = {**os.environ, "REVERIE_CACHE": str(work / f"cache-{name}"), "HOME": str(work / "home"),
                   "MUJOCO_GL": "egl"}
            times[name] = grid(work / name, data, args, launcher, env)
            tables[name] = sorted((r["agent"], r["seed"], r["normalized_score"])
                                  for r in csv.DictReader(open(work / name / "results.csv")))
        print(f"4 cells (td3bc, mopo x seeds 0, 1) at {args.steps:,} updates, {args.jobs} at a time, "
              f"20,000-transition hopper dataset")
        for name, t in times.items():
            print(f"  {name:<7} {t:7.1f} s   ({t / times['joblib']:.2f}x joblib)")
        print(f"  results tables identical: {tables['joblib'] == tables['ray']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
