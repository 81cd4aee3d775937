"""Dataset-making throughput: transitions per second by simulator batch size.

    python tests/bench/bench_dataset_make.py [--transitions 20000] [--tasks hopper halfcheetah]

Rolls each task's shipped "medium" policy (noise 0.1, as `dataset make` does)
through `envs.builtin.collect` with 1, 4 and 16 simulators side by side, and
prints transitions/s with the ratio to one simulator (ratios, measured in one
run, are what to compare on a shared machine). The last column is the raw
MuJoCo step rate of the same task with random actions: the ceiling.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from envs.builtin import collect
from envs.policies import load_policy, load_zoo
from envs.simulator import SimulatorBatch
from envs.tasks import get_task


def raw_step_rate(task, steps: int = 5000) -> float:
    sim = SimulatorBatch(task, 1)
    sim.reset(0)
    acts = np.random.default_rng(0).uniform(-1, 1, (steps, 1, task.act_dim))
    start = time.perf_counter()
    for a in acts:
        _, _, term, trunc = sim.step(a)
        if term[0] or trunc[0]:
            sim.reset(1)
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transitions", type=int, default=20000)
    parser.add_argument("--tasks", nargs="+", default=["hopper", "halfcheetah"])
    parser.add_argument("--envs", nargs="+", type=int, default=[1, 4, 16])
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{'task':<12} {'envs':>5} {'transitions/s':>14} {'vs 1 env':>9} {'raw mujoco steps/s':>19}")
    for name in args.tasks:
        task = get_task(name)
        actor, _ = load_policy(load_zoo(task).role("medium").path)
        raw = raw_step_rate(task)
        base = None
        for n in args.envs:
            start = time.perf_counter()
            collect(task, actor, args.transitions, 0.1, seed=0, num_envs=n)
            rate = args.transitions / (time.perf_counter() - start)
            base = base or rate
            print(f"{name:<12} {n:>5} {rate:>14,.0f} {rate / base:>8.2f}x {raw:>19,.0f}")


if __name__ == "__main__":
    main()
