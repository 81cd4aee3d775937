"""The Gaussian ensemble's fit step on the CPU, measured in one run (prints figures; not a test).

    python tests/bench/bench_fit.py [--threads 1] [--steps 60] [--rounds 3]

One step of ``GaussianEnsemble.fit`` as the grid runs it (walker2d dimensions, 7 members of 4 x 200, batches
of 256 rows per member, the Gaussian NLL and its log-variance bounds, decoupled weight decay): the forward
pass, the backward pass and the optimiser's step. torch's default AdamW on the CPU (a loop of elementwise ops
over each parameter tensor) against ``agents.networks.FusedAdamW`` (its fused kernel), in alternating blocks,
the best block of each kept, so a shared machine's noise falls on both alike. A fit of 100,000 transitions
is about 350 steps an epoch and up to 200 epochs (``configs/world_model/ensemble.yaml``); the last column
projects the minutes of such a fit. Freed memory stays in the process, as in every ``reverie`` command
(``envs.allocator.retain_freed_memory``).
"""

from __future__ import annotations

import argparse
import time

import torch

from agents.networks import FusedAdamW
from envs.allocator import retain_freed_memory
from worldmodels.ensemble import EnsembleConfig, GaussianEnsemble

OBS, ACT, BATCH = 17, 6, 256


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    retain_freed_memory()
    g = torch.Generator().manual_seed(0)
    cfg = EnsembleConfig()
    x = torch.randn(cfg.members, BATCH, OBS + ACT, generator=g)
    y = torch.randn(cfg.members, BATCH, OBS + 1, generator=g)

    def block(model: GaussianEnsemble, opt) -> float:
        t = time.perf_counter()
        for _ in range(args.steps):
            mean, logvar = model._trunk(x)
            loss = ((mean - y).pow(2) * torch.exp(-logvar) + logvar).mean(dim=(1, 2)).sum()
            loss = loss + 0.01 * (model.max_logvar.sum() - model.min_logvar.sum())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return args.steps / (time.perf_counter() - t)

    def groups(model: GaussianEnsemble) -> list[dict]:
        decayed = [{"params": layer.parameters(), "weight_decay": wd}
                   for layer, wd in zip([*model.layers, model.head], cfg.weight_decay)]
        return decayed + [{"params": [model.max_logvar, model.min_logvar], "weight_decay": 0.0}]

    runs = {}
    for label, make in (("torch AdamW", lambda m: torch.optim.AdamW(groups(m), lr=cfg.lr)),
                        ("FusedAdamW", lambda m: FusedAdamW(groups(m), lr=cfg.lr))):
        torch.manual_seed(0)
        model = GaussianEnsemble(OBS, ACT, cfg)
        runs[label] = (model, make(model))
        block(*runs[label])                                   # warm up
    best = dict.fromkeys(runs, 0.0)
    for _ in range(args.rounds):
        for label, run in runs.items():
            best[label] = max(best[label], block(*run))
    print(f"ensemble fit steps/s, {cfg.members} members of 4x{cfg.hidden[0]}, walker2d dimensions, batches of "
          f"{BATCH}, {args.threads} thread(s), best of {args.rounds} blocks of {args.steps}:")
    for label, rate in best.items():
        print(f"  {label:<12} {rate:7.1f} steps/s   a 200-epoch fit of 100,000 transitions: "
              f"{200 * 350 / rate / 60:5.0f} min")
    print(f"  ratio {best['FusedAdamW'] / best['torch AdamW']:.2f}x")


if __name__ == "__main__":
    main()
