"""Torch threads against other busy processes: why ``threads=auto`` counts only idle cores (prints figures).

    python tests/bench/bench_threads.py [--updates 200] [--rounds 3] [--busy 0 1 2]

MOPO's update (SAC, two 2x256 critics, hopper dimensions, batch 256) at one torch thread and at as many as
the machine has, first as the machine is found, then beside 1, 2, ... busy processes (each a Python loop
that never sleeps, standing in for a grid cell or a simulator). The thread counts run in alternating blocks
and the best block of each is kept, so the machine's own noise falls on both alike.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp

import torch

from agents.sac import SAC, SACConfig
from bench_learners import ACT, BATCH, OBS, batches, rate      # the same batches and timing as the learners' bench
from eval.threads import free_cores, resolve_threads


def spin() -> None:
    while True:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--updates", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 1])
    args = ap.parse_args()
    usable, idle, how = free_cores()
    counts = sorted({1, usable})
    g = torch.Generator().manual_seed(0)
    data = batches(16, g)
    agent = SAC(OBS, ACT, SACConfig())
    rate(agent, data, 10, g)                                               # warm-up
    print(f"MOPO's update (SAC 2x256, batch {BATCH}), updates/s, best of {args.rounds} blocks of {args.updates}; "
          f"{usable} usable cores, {how} when started ({idle} idle)")
    print(f"  {'beside':<22}" + "".join(f"{f'{n} thread(s)':>14}" for n in counts) + f"{'ratio':>8}")
    for busy in args.busy:
        spinners = [mp.Process(target=spin, daemon=True) for _ in range(busy)]
        for p in spinners:
            p.start()
        try:
            best = dict.fromkeys(counts, 0.0)
            for _ in range(args.rounds):
                for n in counts:
                    torch.set_num_threads(n)
                    best[n] = max(best[n], rate(agent, data, args.updates, g))
        finally:
            for p in spinners:
                p.kill()
                p.join()
        label = "the machine as found" if busy == 0 else f"+{busy} busy process(es)"
        print(f"  {label:<22}" + "".join(f"{best[n]:>14.1f}" for n in counts)
              + f"{best[counts[-1]] / best[counts[0]]:>7.2f}x")
    print(f"threads=auto picks {resolve_threads('auto')} here now")


if __name__ == "__main__":
    main()
