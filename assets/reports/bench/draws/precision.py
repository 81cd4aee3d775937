"""Would bfloat16 updates change MOBILE's penalty? Measured on a grid cell's own critic, model and data.

    python assets/reports/bench/draws/precision.py runs/bench/grid/cells/mobile/<dataset>/seed<S> [--rows 2048]

MOBILE penalises an imagined pair by the spread of the Bellman backup over every member's next-state
proposals (``agents/mobile.py: bellman_inconsistency``). Under ``train.precision=bfloat16`` the model's and
the critics' hidden layers run in bfloat16, whose rounding differs from proposal to proposal and could add
spread of its own. This loads the cell's checkpoint (critic, actor) and world model, takes imagined pairs
as the cell makes them (dataset states, the actor's actions), and compares on the same noise draws:

  * float32 against bfloat16 (the cost of the precision), and
  * float32 against float32 with other noise draws (the penalty's own sampling spread, num_samples draws
    per member), the yardstick the first must be small beside;

then the update's rate in each precision, one thread. Prints figures; writes nothing.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from agents.networks import update_precision
from agents.training import LOOP_KEYS
from cells import load_cell


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cell", type=Path)
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--updates", type=int, default=40)
    args = ap.parse_args()
    torch.set_num_threads(1)
    name, values, tcfg, ds, model, learner = load_cell(args.cell)
    loop = {k: getattr(tcfg, k) for k in LOOP_KEYS}
    blob = torch.load(args.cell / "checkpoint.pt", map_location="cpu", weights_only=False)
    learner.load_state_dict(blob["learner"])
    print(f"{args.cell}: {name} at {blob['step']:,} updates, {values.get('num_samples')} draws per member, "
          f"{model.spec.members} members ({loop})")

    g = torch.Generator().manual_seed(0)
    idx = torch.randint(len(ds), (args.rows,), generator=g)
    obs = torch.as_tensor(ds.observations[idx.numpy()])
    with torch.no_grad():
        act, _ = learner.actor(obs, generator=g)

    def penalty(seed: int, bf16: bool) -> torch.Tensor:
        with update_precision("bfloat16" if bf16 else "float32"):
            return learner.bellman_inconsistency(obs, act, torch.Generator().manual_seed(seed)).float()

    p32, p16, p32b = penalty(1, False), penalty(1, True), penalty(2, False)

    def gap(a: torch.Tensor, b: torch.Tensor) -> str:
        rel = ((a - b).abs() / a.abs().clamp_min(1e-6)).median().item()
        r = np.corrcoef(a.numpy(), b.numpy())[0, 1]
        return f"mean {b.mean():.4f} (float32 {a.mean():.4f}), median relative gap {rel:.3f}, Pearson {r:.3f}"

    print(f"penalty over {args.rows:,} imagined pairs (std of the backup, before the coefficient):")
    print(f"  bfloat16, same draws:      {gap(p32, p16)}")
    print(f"  float32, other draws:      {gap(p32, p32b)}")

    batch = {"obs": obs[:256], "actions": act[:256], "rewards": torch.zeros(256),
             "next_obs": obs[:256], "terminated": torch.zeros(256, dtype=torch.bool),
             "from_model": torch.arange(256) >= int(256 * loop["real_ratio"])}
    rates = {"float32": 0.0, "bfloat16": 0.0}
    state = learner.state_dict()
    for _ in range(2):
        for mode in rates:
            t = time.perf_counter()
            with update_precision(mode):
                for _ in range(args.updates):
                    learner.update(batch, g)
            rates[mode] = max(rates[mode], args.updates / (time.perf_counter() - t))
            learner.load_state_dict(state)
    print(f"updates/s, one thread: float32 {rates['float32']:.1f}, bfloat16 {rates['bfloat16']:.1f} "
          f"({rates['bfloat16'] / rates['float32']:.2f}x)")


if __name__ == "__main__":
    main()
