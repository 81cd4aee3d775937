"""Where does a grid cell's policy fail in the simulator: from the task's start states, or everywhere?

    python assets/reports/bench/draws/start_states.py CELL [--resets 5] [--states 20] [--steps 200] [--weights checkpoint.pt]

CELL: a cell or train run (its ``config.yaml``, ``overrides.yaml``, ``world_model.pt``, and ``learner.pt``, or
``checkpoint.pt`` while it runs). From ``--resets`` simulator resets (the evaluation's seeds, 10000 on), the policy acts
deterministically; its first ``--show`` steps print the torso's height and angle in the simulator and in the world
model (the model's own rollout from the same reset, a random member per step), with the model's reward; then
each simulator episode's length and return. Then from ``--states`` mid-episode dataset states (reset through qpos/qvel), how
many of ``--steps`` steps the policy survives and its reward per step, beside the data's. Prints figures;
writes nothing. For tasks whose first two observation entries are the torso's height and angle (hopper,
walker2d). A history-dependent policy (NEUBAY's) carries its history along each path, from an empty one at the
reset or the dataset state, as the evaluation starts it.
"""

from __future__ import annotations


import numpy as np
import torch

from cells import acting, cell_parser, open_cell
from envs.simulator import SimulatorBatch
from envs.tasks import get_task


def main() -> None:
    ap = cell_parser(__doc__)
    ap.add_argument("--resets", type=int, default=5)
    ap.add_argument("--states", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--show", type=int, default=10, help="steps printed from the resets")
    args = ap.parse_args()
    name, values, _, ds, model, learner, loaded = open_cell(args)
    task = get_task(ds.task)
    print(f"{args.cell} ({loaded}): {name} on {ds.name} ({', '.join(f'{k}={v}' for k, v in values.items() if 'penalty' in k)})")

    n = args.resets
    sim = SimulatorBatch(task, n)
    real = sim.reset(10_000 + np.arange(n))
    imagined = torch.from_numpy(real).float()
    alive, returns, g = np.ones(n, bool), np.zeros(n), torch.Generator().manual_seed(0)
    lengths = np.zeros(n, int)
    policy_real, policy_model = acting(learner, n), acting(learner, n)
    fmt = lambda x: " ".join(f"{v:5.2f}" for v in np.asarray(x))   # noqa: E731
    print(f"from {n} resets: step | simulator height, angle | model height, angle, reward")
    for t in range(task.max_episode_steps):
        act_real = policy_real(torch.from_numpy(real).float())
        act_model = policy_model(imagined)
        mean, _ = model.predict(imagined, act_model)
        nxt = mean[torch.randint(model.spec.members, (n,), generator=g), torch.arange(n)]
        if t < args.show:
            print(f"  {t:3d} | {fmt(real[:, 0])} | {fmt(real[:, 1])} || {fmt(imagined[:, 0])} | {fmt(imagined[:, 1])} "
                  f"| {fmt(nxt[:, -1])}")
        real, rew, term, trunc = sim.step(act_real.numpy())
        policy_real.observe(rew)
        policy_model.observe(nxt[:, -1])
        returns += rew * alive
        lengths += alive
        alive &= ~(term | trunc)
        imagined = nxt[:, :-1]
        if not alive.any():
            break
    print(f"  simulator episodes: lengths {lengths.tolist()}, returns {fmt(returns)}")
    sim.close()

    ends = np.asarray(ds.terminals | ds.timeouts, bool)
    firsts = np.concatenate([[True], ends[:-1]])                   # an episode's first row follows an end
    idx = np.random.default_rng(0).choice(np.flatnonzero(~(ends | firsts)), args.states, replace=False)
    sim = SimulatorBatch(task, args.states)
    obs = sim.reset_to(ds.qpos[idx], ds.qvel[idx])
    alive, total, steps = np.ones(args.states, bool), 0.0, np.zeros(args.states, int)
    policy = acting(learner, args.states)
    for _ in range(args.steps):
        obs, rew, term, trunc = sim.step(policy(torch.from_numpy(obs).float()).numpy())
        policy.observe(rew)
        total += float((rew * alive).sum())
        steps += alive
        alive &= ~(term | trunc)
    sim.close()
    print(f"from {args.states} mid-episode dataset states, {args.steps} steps: survived {np.sort(steps).tolist()} "
          f"(median {int(np.median(steps))}); reward per step {total / steps.sum():.2f} (the data's "
          f"{float(ds.rewards.mean()):.2f})")


if __name__ == "__main__":
    main()
