"""Learner updates per second on the CPU, measured in one run (prints figures; not a test).

    python tests/bench/bench_learners.py [--threads 1] [--updates 200] [--rounds 3]

Hopper dimensions, batch 256, one torch thread (the bench grid's setting), for SAC (two 2x256 critics, what
MOPO and MOBILE update), RAVL (ten 3x256 critics and EDAC's diversity term, the authors' networks) and
TD3+BC: each learner's update as it is, with the critic frozen in the actor's step
(``agents.networks.frozen``), against the same update computing the critic's weight gradients there too
(what it did before; the next ``zero_grad`` threw them away). The two run in alternating blocks, and the
best block of each is kept, so a shared machine's noise falls on both alike. Then each learner's update
in float32 against ``train.precision=bfloat16`` (autocast; output layers float32), alternating the same way.
Last, in both precisions, each learner on ``agents.networks.FusedAdam`` (torch's fused kernel) against torch's
default Adam on the CPU (a loop of elementwise ops over each parameter tensor), alternating the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch

import agents.sac
import agents.td3bc
from agents.ravl import RAVL, RAVLConfig
from agents.sac import SAC, SACConfig
from agents.td3bc import TD3BC, TD3BCConfig
from agents.networks import FusedAdam, native_bfloat16, update_precision

OBS, ACT, BATCH = 11, 3, 256


def batches(n: int, g: torch.Generator) -> list[dict]:
    return [{"obs": torch.randn(BATCH, OBS, generator=g), "actions": torch.rand(BATCH, ACT, generator=g) * 2 - 1,
             "rewards": torch.randn(BATCH, generator=g), "next_obs": torch.randn(BATCH, OBS, generator=g),
             "terminated": torch.zeros(BATCH, dtype=torch.bool),
             "from_model": torch.arange(BATCH) >= BATCH // 20} for _ in range(n)]   # real_ratio 0.05 (MOBILE)


def rate(agent, data: list[dict], updates: int, g: torch.Generator) -> float:
    t = time.perf_counter()
    for i in range(updates):
        agent.update(data[i % len(data)], g)
    return updates / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--updates", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    data = batches(16, g)
    learners = {"SAC (2 critics, 2x256)": lambda: SAC(OBS, ACT, SACConfig()),
                "RAVL (10 critics, 3x256)": lambda: RAVL(OBS, ACT, RAVLConfig(hidden=(256, 256, 256), actor_lr=3e-4,
                                                                               alpha_lr=3e-4)),
                "TD3+BC (2 critics, 2x256)": lambda: TD3BC(OBS, ACT, TD3BCConfig())}
    frozen = agents.sac.frozen
    print(f"updates/s, hopper dimensions, batch {BATCH}, {args.threads} thread(s), best of {args.rounds} blocks "
          f"of {args.updates}:")
    print(f"  {'learner':<28} {'critic frozen':>14} {'weights graded':>15} {'ratio':>7}")
    for name, make in learners.items():
        best = {"frozen": 0.0, "graded": 0.0}
        agent = make()
        rate(agent, data, 10, g)                                        # warm-up
        for _ in range(args.rounds):
            for mode in ("frozen", "graded"):
                patch = frozen if mode == "frozen" else contextlib.nullcontext
                agents.sac.frozen = agents.td3bc.frozen = patch
                best[mode] = max(best[mode], rate(agent, data, args.updates, g))
        agents.sac.frozen = agents.td3bc.frozen = frozen
        print(f"  {name:<28} {best['frozen']:>14.1f} {best['graded']:>15.1f} {best['frozen'] / best['graded']:>6.2f}x")
    native = native_bfloat16()
    print(f"this CPU: {torch.backends.cpu.get_cpu_capability()}, native bfloat16: {native} "
          f"(train.precision=auto picks {'bfloat16' if native else 'float32'})")
    print(f"  {'learner':<28} {'float32':>14} {'bfloat16':>15} {'ratio':>7}")
    for name, make in learners.items():
        best = {"float32": 0.0, "bfloat16": 0.0}
        agent = make()
        rate(agent, data, 10, g)
        for _ in range(args.rounds):
            for mode in best:
                with update_precision(mode):
                    best[mode] = max(best[mode], rate(agent, data, args.updates, g))
        print(f"  {name:<28} {best['float32']:>14.1f} {best['bfloat16']:>15.1f} "
              f"{best['bfloat16'] / best['float32']:>6.2f}x")
    print(f"  {'learner':<28} {'precision':>10} {'Adam':>8} {'FusedAdam':>10} {'ratio':>7}")
    for name, make in learners.items():
        for precision in ("float32", "bfloat16"):
            made = {}
            for optimizer in ("Adam", "FusedAdam"):
                agents.sac.FusedAdam = agents.td3bc.FusedAdam = torch.optim.Adam if optimizer == "Adam" else FusedAdam
                made[optimizer] = make()
            agents.sac.FusedAdam = agents.td3bc.FusedAdam = FusedAdam
            best = dict.fromkeys(made, 0.0)
            with update_precision(precision):
                for agent in made.values():
                    rate(agent, data, 10, g)
                for _ in range(args.rounds):
                    for optimizer, agent in made.items():
                        best[optimizer] = max(best[optimizer], rate(agent, data, args.updates, g))
            print(f"  {name:<28} {precision:>10} {best['Adam']:>8.1f} {best['FusedAdam']:>10.1f} "
                  f"{best['FusedAdam'] / best['Adam']:>6.2f}x")


if __name__ == "__main__":
    main()
