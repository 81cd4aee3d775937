"""How large is MOBILE's penalty under each definition, on a finished MOBILE cell's own critic, policy and model?

    python assets/reports/bench/draws/mobile_penalty.py RUN_DIR DATASET [--rows 2000] [--size 100000]

RUN_DIR: a finished `reverie train agent=mobile` run (its ``learner.pt``, ``config.yaml``, ``world_model.pt``);
DATASET: its source (``walker2d-medium``). For dataset states with the trained policy's actions (what the
imagined rows are), every member draws K next states; the Bellman backup min_j Q_target_j(s', pi(s')) is
then summarised two ways:

- *all draws*: the std over all K x E backups at once (what ``agents/mobile.py`` computed before 2026-12-01),
  which counts each member's own sampling noise as disagreement;
- *per member* (the paper's operator T^i Q and the authors' ``compute_lcb``): each member's K backups
  averaged, then the std across members (what it computes now).

Printed for K = 2 (the bench grid's ``agent.num_samples``) and K = 10 (the paper's). Writes nothing.
"""

from __future__ import annotations

import argparse

import torch

from agents.registry import load_learner
from envs.sources import load_source
from worldmodels.registry import load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("dataset")
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--size", type=int, default=100_000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    ds = load_source(args.dataset, size=args.size, seed=0)
    _, agent = load_learner(args.run_dir, ds.obs_dim, ds.act_dim)
    model = load_model(f"{args.run_dir}/world_model.pt")
    g = torch.Generator().manual_seed(0)
    obs = torch.from_numpy(ds.observations)[torch.randint(0, len(ds), (args.rows,), generator=g)]
    print(f"{args.run_dir}: {args.rows} states of {ds.name}, the trained policy's actions, "
          f"{model.spec.members} members")
    with torch.no_grad():
        act, _ = agent.actor(obs, generator=g)
        mean, std = model.predict(obs, act)
        E, B, _ = mean.shape
        for K in (2, 10):
            draws = (mean + std * torch.randn((K, *mean.shape), generator=g))[..., :-1].reshape(K * E * B, -1)
            next_act, _ = agent.actor(draws, generator=g)
            q = agent.critic_target(draws, next_act).min(dim=0).values.view(K, E, B)
            every, per_member = q.view(K * E, B).std(0), q.mean(0).std(0)
            print(f"  K={K:>2}: all draws mean {every.mean():.2f} (median {every.median():.2f}); per member mean "
                  f"{per_member.mean():.2f} (median {per_member.median():.2f}); ratio {every.mean() / per_member.mean():.2f}")


if __name__ == "__main__":
    main()
