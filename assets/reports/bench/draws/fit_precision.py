"""Would a bfloat16 fit change NEUBAY's posterior? The same fit, cut at a few epochs, in both precisions.

    python assets/reports/bench/draws/fit_precision.py [--dataset walker2d-medium-replay] [--epochs 10]

NEUBAY's posterior is a 20-member LayerNorm ensemble (``configs/agent/neubay.yaml``), whose fit is the
longest part of a NEUBAY cell: about 2.6 hours of one core at the fit's cap of 200 epochs. This fits it
from one seed on the dataset (as ``reverie train agent=neubay`` would, ``world_model.fit_precision`` aside)
for ``--epochs`` epochs in float32 and in bfloat16 (the hidden layers under autocast; the output layer,
the loss and the holdout in float32), and prints each fit's seconds and its held-out error, per member
and over the 16 elites; then the same fit in float32 from another seed, the yardstick the precision's
difference must be small beside. Writes nothing.
"""

from __future__ import annotations

import argparse
import time

import torch

from cells import composed
from envs.allocator import retain_freed_memory
from envs.sources import load_source
from worldmodels.registry import fit_world_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="walker2d-medium-replay")
    ap.add_argument("--epochs", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(1)
    retain_freed_memory()                                  # as every `reverie` command runs
    ds = load_source(args.dataset, size=100_000, seed=0)
    values = {**composed("neubay", args.dataset)[1], "max_epochs": args.epochs, "patience": args.epochs}
    fits = {}
    for label, precision, seed in (("float32", "float32", 0), ("bfloat16", "bfloat16", 0),
                                   ("float32, seed 1", "float32", 1)):
        t = time.perf_counter()
        model, metrics = fit_world_model(ds, {**values, "fit_precision": precision}, seed)
        fits[label] = (time.perf_counter() - t, model.holdout_mse.clone(), metrics["holdout_mse_elites"])
        print(f"{label:<16} {fits[label][0]:6.0f} s  held-out MSE: members' mean {fits[label][1].mean():.4f}, "
              f"elites' {fits[label][2]:.4f}", flush=True)
    base = fits["float32"][1]
    print(f"\n{args.dataset}, {values['members']} members with LayerNorm, {args.epochs} epochs, one thread:")
    for label in ("bfloat16", "float32, seed 1"):
        gap = (fits[label][1] - base).abs() / base
        print(f"  {label:<16} against float32 seed 0: held-out MSE per member differs by {gap.mean():.1%} "
              f"(largest {gap.max():.1%}); members' mean {fits[label][1].mean():.4f} against {base.mean():.4f}")
    print(f"fit time, bfloat16 against float32: {fits['float32'][0] / fits['bfloat16'][0]:.2f}x")


if __name__ == "__main__":
    main()
