"""Do a cell's critics value its policy at what the simulator pays it? Q along real episodes against the return.

    python assets/reports/bench/draws/value_bias.py CELL [--resets 10] [--weights checkpoint.pt]

From ``--resets`` simulator resets (the evaluation's seeds, 10000 on) the policy acts deterministically, as the
evaluation runs it (a history-dependent policy reads its history from an empty one, cells.acting). At every step
of those episodes the critics score the state and the action taken (NEUBAY's read the same history through their
own encoder), beside the discounted return the episode went on to earn from there, at the learner's γ. Printed
per step (about ten rows, or every ``--every``th step): the critics' mean over heads and their minimum (what a
target takes), the return, and how many episodes are still going. Then, over the steps whose return is known
(every step of an episode that ended in a fall; of one cut by the time limit, the steps at least 460 before the
cut, where the missing tail weighs under 1% at γ = 0.99), the mean Q, the mean return and
mean(Q − return) / |mean return|: REDQ's normalized bias (unsteady where the mean return is near 0). The critics are soft: their Q also holds the entropy
bonus the stochastic policy earns, which the line with α bounds. Prints figures; writes nothing.
"""

from __future__ import annotations


import numpy as np
import torch

from cells import cell_parser, open_cell, record_episodes
from envs.tasks import get_task


def discounted_returns(rewards: np.ndarray, gamma: float) -> np.ndarray:
    """``[T, n]`` rewards (0 after an episode ends) -> the discounted return from each step on."""
    out, acc = np.zeros_like(rewards), np.zeros(rewards.shape[1])
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + gamma * acc
        out[t] = acc
    return out


def critic_values(learner, obs: torch.Tensor, act: torch.Tensor, rew: torch.Tensor) -> torch.Tensor:
    """``[heads, T, n]``: every critic head's Q for ``[T, n]`` steps of ``n`` episodes. A history-dependent learner's
    critics read (s_t, a_{t-1}, r_{t-1}) through their encoder, from the empty history the policy starts with."""
    T, n = obs.shape[:2]
    if not hasattr(learner, "critic_encoder"):
        return learner.critic(obs.flatten(0, 1), act.flatten(0, 1)).reshape(-1, T, n)
    prev_act = torch.cat([torch.zeros_like(act[:1]), act[:-1]])
    prev_rew = torch.cat([torch.zeros_like(rew[:1]), rew[:-1]])
    h, _ = learner.critic_encoder(torch.cat([learner.norm(obs), prev_act, prev_rew[..., None]], dim=-1))
    return learner.q(learner.critic, h.flatten(0, 1), obs.flatten(0, 1), act.flatten(0, 1)).reshape(-1, T, n)


def main() -> None:
    ap = cell_parser(__doc__)
    ap.add_argument("--resets", type=int, default=10)
    ap.add_argument("--every", type=int, default=None, help="print every this many steps (default: about ten rows)")
    args = ap.parse_args()
    name, _, _, ds, model, learner, loaded = open_cell(args)
    if not hasattr(learner, "critic"):
        raise SystemExit(f"value_bias.py: {args.cell}: {name} has no critics (expected a SAC-family cell or neubay)")
    gamma = float(learner.cfg.gamma)
    task, n = get_task(ds.task), args.resets

    ep = record_episodes(learner, task, n)
    running, terminated, rewards = ep["running"], ep["terminated"], ep["rewards"]           # [T, n], [n], [T, n]
    with torch.no_grad():
        q = critic_values(learner, ep["obs"], ep["actions"], torch.from_numpy(rewards).float()).numpy()  # [heads, T, n]
    returns = discounted_returns(rewards, gamma)
    q_mean, q_min = q.mean(0), q.min(0)

    lengths = running.sum(0)
    to_end = lengths[None] - np.arange(len(running))[:, None]                  # steps left in each episode
    known = running & (terminated[None] | (gamma ** to_end < 0.01))
    alpha = float(learner.alpha) if hasattr(learner, "alpha") else float("nan")
    print(f"{args.cell} ({loaded}): {name} on {ds.name}, {n} resets, γ = {gamma}, α = {alpha:.3g}")
    print(f"episode lengths {sorted(lengths.tolist())}, {int(terminated.sum())} of {n} ended in a fall")
    print("| step | Q, mean over heads | Q, min over heads | discounted return | episodes going |")
    print("|---:|---:|---:|---:|---:|")
    for t in range(0, len(running), args.every or max(1, -(-len(running) // 10))):
        on = running[t]
        print(f"| {t} | {q_mean[t, on].mean():.1f} | {q_min[t, on].mean():.1f} | {returns[t, on].mean():.1f} | "
              f"{int(on.sum())} |")
    if known.any():
        scale = abs(returns[known].mean())
        print(f"over the {int(known.sum())} steps whose return is known: mean Q {q_mean[known].mean():.1f} "
              f"(min over heads {q_min[known].mean():.1f}) against a mean return of {returns[known].mean():.1f}; "
              f"normalized bias {(q_mean[known] - returns[known]).mean() / scale:+.2f} "
              f"(min over heads {(q_min[known] - returns[known]).mean() / scale:+.2f})")
    else:
        print("no step's return is known (every episode was cut by the time limit within 460 steps of it)")
    print(f"the entropy bonus a soft Q also holds is at most about α·|entropy|/(1 − γ) = {alpha:.3g}·|H|·"
          f"{1 / (1 - gamma):.0f} (the training log's train/entropy gives H)")


if __name__ == "__main__":
    main()
