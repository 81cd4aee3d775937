"""Does a SAC-family cell's critic ensemble tell the data's actions from the policy's and from random ones?

    python assets/reports/bench/draws/q_spread.py CELL [--weights learner.pt|checkpoint.pt] [--states 2000]

For ``--states`` dataset states: every critic's Q for the data's action, the policy's deterministic action and
a uniform action in the box; the mean over critics, the spread across them (std) and the minimum the target
takes. Then the world model's view of the same three actions: its predicted reward (the elites' mean, as
the rollouts draw an elite per row) and its uncertainty (the aleatoric score MOPO penalises, over every
member, as MOPO's judge takes it), averaged over the same states. RAVL's pessimism only works where the
critics disagree more off the data than on it; a policy that finds high-Q, low-spread actions the data never
took is exploiting the critics, and one whose actions the model also rewards is exploiting the model.
Prints figures; writes nothing.
"""

from __future__ import annotations


import torch

from agents.mopo import uncertainty
from cells import cell_parser, open_cell


def main() -> None:
    ap = cell_parser(__doc__)
    ap.add_argument("--states", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    name, _, _, ds, model, learner, loaded = open_cell(args)
    if not hasattr(learner, "critic"):
        raise SystemExit(f"q_spread.py: {args.cell}: {name} has no critic ensemble")
    if hasattr(learner, "policy"):
        raise SystemExit(f"q_spread.py: {args.cell}: {name}'s critics read a history, not a lone state "
                         f"(expected a SAC-family cell: mopo, mobile, ravl)")

    g = torch.Generator().manual_seed(args.seed)
    idx = torch.randperm(len(ds.observations), generator=g)[:args.states]
    obs = torch.as_tensor(ds.observations[idx], dtype=torch.float32)
    actions = {"data": torch.as_tensor(ds.actions[idx], dtype=torch.float32)}
    with torch.no_grad():
        actions["policy"] = learner.act(obs, deterministic=True)
        actions["uniform"] = torch.rand(actions["data"].shape, generator=g) * 2 - 1
        print(f"{args.cell} ({loaded}): {name} on {ds.name}, {len(idx)} dataset states")
        print("| action | Q mean | Q std across critics | Q min (the target's) | model reward | model uncertainty |"
              " |action| mean | share of |a| > 0.99 |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for label, act in actions.items():
            q = learner.critic(obs, act)                                   # [N, B]
            mean, std = model.predict(obs, act)                            # [E, B, obs_dim + 1]
            print(f"| {label} | {q.mean():.1f} | {q.std(dim=0).mean():.2f} | {q.min(dim=0).values.mean():.1f} | "
                  f"{mean[model.elites, :, -1].mean():.2f} | {uncertainty(mean, std, 'aleatoric').mean():.3f} | {act.abs().mean():.2f} | "
                  f"{(act.abs() > 0.99).float().mean():.2f} |")
        print(f"data's own reward per step: {torch.as_tensor(ds.rewards[idx]).float().mean():.2f}")


if __name__ == "__main__":
    main()
