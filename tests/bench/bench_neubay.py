"""NEUBAY's costs on the CPU, measured in one run (prints figures; not a test).

    python tests/bench/bench_neubay.py [--threads 2] [--batch 1000] [--horizon 1000] [--updates 50]

  * a 1000-step imagined rollout of batch 1,000 with one member held per row (the
    one-member path), driven by NEUBAY's GRU agent, against the same rollout drawing a
    member each step (every member evaluated); hopper dimensions, 20 LayerNorm members
    of 4 x 200; no termination or cut, so every row runs the whole horizon;
  * NEUBAY updates per second at its defaults (8 windows of 32 steps after 16 burn-in,
    GRU 128, 10 REDQ heads of 256 x 256) beside a plain SAC update at batch 256;
  * NEUBAY's update in float32 against ``train.precision=bfloat16`` (autocast on the REDQ heads' hidden
    layers; the GRUs and the output layers float32), in alternating blocks, the best block of each kept.

Freed memory stays in the process, as in every ``reverie`` command (``envs.allocator.retain_freed_memory``).
"""

from __future__ import annotations

import argparse
import time

import torch

from agents.neubay import NEUBAY, NEUBAYConfig
from agents.sac import SAC
from agents.sequences import SequenceBuffer
from agents.networks import native_bfloat16, update_precision
from envs.allocator import retain_freed_memory
from worldmodels.ensemble import EnsembleConfig, GaussianEnsemble
from worldmodels.rollout import StartStates, rollout

OBS, ACT = 11, 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--horizon", type=int, default=1000)
    ap.add_argument("--updates", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3, help="alternating blocks of float32 and bfloat16 updates")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    retain_freed_memory()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = GaussianEnsemble(OBS, ACT, EnsembleConfig(members=20, elites=16, layer_norm=True,
                                                      weight_decay=(0.0,) * 5))
    agent = NEUBAY(OBS, ACT, NEUBAYConfig(), model=model)
    start = StartStates(torch.randn(args.batch, OBS) * 0.1)
    timings = {}
    for label, kwargs in (("one member held per row", {"member": model.sample_members(args.batch, g)}),
                          ("a member drawn each step (all evaluated)", {})):
        t = time.perf_counter()
        ro = rollout(model, agent.policy(), start, args.horizon, g, **kwargs)
        seconds = time.perf_counter() - t
        timings[label] = (int(ro.lengths().sum()), seconds)
    print(f"imagined rollout, batch {args.batch:,} x {args.horizon} steps, 20 LayerNorm members, GRU agent acting:")
    for label, (n, s) in timings.items():
        print(f"  {label:<42} {n / s:>10,.0f} transitions/s  ({n:,} in {s:.1f} s)")

    # updates: NEUBAY on windows from a synthetic episode store, SAC on a flat batch
    n = 20_000
    buf = SequenceBuffer(OBS, ACT, n)
    episode = torch.arange(n) // 500
    buf.add_episodes({"obs": torch.randn(n, OBS), "actions": torch.rand(n, ACT) * 2 - 1, "rewards": torch.randn(n),
                      "next_obs": torch.randn(n, OBS), "terminated": torch.zeros(n, dtype=torch.bool)}, episode)
    cfg = agent.cfg
    windows = [buf.windows(buf.anchors(256 // cfg.window, g), cfg.window, cfg.burn_in) for _ in range(args.updates)]
    agent.update(windows[0], g)

    def update_rate() -> float:
        t = time.perf_counter()
        for w in windows:
            agent.update(w, g)
        return args.updates / (time.perf_counter() - t)

    neubay = update_rate()
    sac = SAC(OBS, ACT)
    batch = {"obs": torch.randn(256, OBS), "actions": torch.rand(256, ACT) * 2 - 1, "rewards": torch.randn(256),
             "next_obs": torch.randn(256, OBS), "terminated": torch.zeros(256, dtype=torch.bool)}
    sac.update(batch, g)
    t = time.perf_counter()
    for _ in range(args.updates * 4):
        sac.update(batch, g)
    sac_rate = args.updates * 4 / (time.perf_counter() - t)
    print(f"updates: NEUBAY {neubay:.1f}/s (256 trained steps, 10 REDQ heads, GRU 128); plain SAC {sac_rate:.0f}/s; "
          f"ratio {neubay / sac_rate:.2f}")

    best = {"float32": 0.0, "bfloat16": 0.0}
    for _ in range(args.rounds):
        for mode in best:
            with update_precision(mode):
                best[mode] = max(best[mode], update_rate())
    print(f"NEUBAY's update, best of {args.rounds} blocks of {args.updates} (this CPU: "
          f"{torch.backends.cpu.get_cpu_capability()}, native bfloat16: {native_bfloat16()}): float32 "
          f"{best['float32']:.1f}/s, bfloat16 {best['bfloat16']:.1f}/s, ratio {best['bfloat16'] / best['float32']:.2f}x")


if __name__ == "__main__":
    main()
