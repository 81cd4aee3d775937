"""How large is MOPO's penalty beside the reward, on the data itself? For one dataset and its world model.

    python assets/reports/bench/draws/penalty_scale.py DATASET MODEL [--coef 1.0] [--rows 5000] [--size 100000]

DATASET: a source (``halfcheetah-medium-replay``); MODEL: the world model a grid cell used (its
``world_model.pt``, or the cached fit in ``$REVERIE_CACHE/world_models``). For rows drawn from the dataset,
MOPO's aleatoric score
u(s, a) (the largest over members of the norm of the predicted std; ``agents/mopo.py``) on the data's own
actions and on uniform random actions, against the data's reward: where lambda * u on the data's own pairs
is as large as their reward, the penalised reward is negative even where the model is on its data, and
the penalty no longer tells the data's actions from others. Then the same pairs in fifths by their reward:
where the penalised reward r - lambda * u is highest in the fifth near zero reward (standing still), the penalty
pays the policy to stop. Prints figures; writes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from agents.mopo import uncertainty
from envs.sources import load_source
from worldmodels.registry import load_world_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("model", type=Path)
    ap.add_argument("--coef", type=float, default=1.0, help="MOPO's lambda")
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--size", type=int, default=100_000, help="transitions of a built-in dataset (the grid's)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ds = load_source(args.dataset, size=args.size, seed=0)
    model = load_world_model(args.model, ds)
    rng = np.random.default_rng(0)
    idx = rng.choice(len(ds), min(args.rows, len(ds)), replace=False)
    obs, act = torch.as_tensor(ds.observations[idx]), torch.as_tensor(ds.actions[idx])
    uniform = torch.as_tensor(rng.uniform(-1, 1, act.shape), dtype=torch.float32)
    with torch.no_grad():
        u_data = uncertainty(*model.predict(obs, act), "aleatoric").numpy()
        u_unif = uncertainty(*model.predict(obs, uniform), "aleatoric").numpy()
    reward = ds.rewards[idx]
    q = lambda a: "/".join(f"{x:.2f}" for x in np.quantile(a, (0.1, 0.5, 0.9)))   # noqa: E731
    print(f"{ds.name}: reward mean {reward.mean():.2f}; u (10/50/90%) on the data's actions {q(u_data)}, "
          f"on uniform actions {q(u_unif)} (largest {u_unif.max():.2f}); with lambda {args.coef:g}, "
          f"reward - lambda * u < 0 on {np.mean(reward - args.coef * u_data < 0):.0%} of the data's own pairs")
    edges = np.quantile(reward, np.linspace(0, 1, 6))
    print(f"the data's pairs in fifths by reward (lambda {args.coef:g}):")
    print("| reward range | mean reward | mean u | mean reward - lambda * u |")
    print("|---|---:|---:|---:|")
    for k, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        rows = (reward >= lo) & ((reward < hi) if k < 4 else (reward <= hi))
        print(f"| {lo:.2f} to {hi:.2f} | {reward[rows].mean():.2f} | {u_data[rows].mean():.2f} | "
              f"{np.mean(reward[rows] - args.coef * u_data[rows]):.2f} |")


if __name__ == "__main__":
    main()
