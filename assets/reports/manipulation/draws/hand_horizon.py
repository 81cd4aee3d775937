"""Does training the hand mover on open-loop unrolls, rather than single steps, make fits agree?

The loop's ranking turns on the fit: three fits of the same recipe rank push at Pearson 0.59-0.91, and swapping
parts traced it to the hand mover (ranking.md, session 23). A mover fitted one step at a time is never shown its
own errors fed back, so where fits differ one step, they part over a 150-step rollout.

For each seed, hand movers of ``VideoWorldModel.hand_move``'s form (optionally also reading the proprioception's
last change, "momentum") are fitted on the loop's real episodes of the four ranked tasks: first one step at a time
(as ``fit_hand``), then, for H > 1, fine-tuned on unrolls of H steps of their own predictions, the objects at their
real positions, the loss the hand's error in units of one step's spread, averaged over the unroll. Each then drives
the hand open loop through 16 episodes of every level (expert, medium, poor, misdirected) per task, with their own
actions. Printed per variant: the one-step error, the hand's error at the end (m, the mean over levels, per task)
for each seed, and the seeds' disagreement: the mean distance between two seeds' hands at the end, over every pair.

Usage (repository root): python assets/reports/manipulation/draws/hand_horizon.py MODEL [H ...]
(default H: 1 16; each H is run without and with momentum)
"""
import itertools
import sys
import time

import torch

torch.set_num_threads(1)
from loop_data import LOOP_LEVELS, fit_hand_net, last_changes, loop_episodes
from worldmodels.registry import load_model
from worldmodels.video import PROPRIO

SEEDS = (0, 1, 2)
FINE_TUNE_UPDATES = 1000
model = load_model(sys.argv[1])
horizons = [int(h) for h in sys.argv[2:]] or [1, 16]
tasks = ["drawer-open", "door-open", "push", "pick-place"]
data = {t: [(e, model.episode_extra(e)) for e in loop_episodes(f"metaworld-{t}")] for t in tasks}


def unroll(step, X, L, A, steps):
    """The hand driven by ``step`` from ``X[0]`` (``[T+1, n, extra]``) with the actions ``A``, the objects real;
    returns the hand ``[steps, n, PROPRIO]`` after each step."""
    hand, last, out = X[0, :, :PROPRIO], L[0], []
    for s in range(steps):
        d = step(torch.cat([hand, X[s, :, PROPRIO:]], 1), last, A[s])
        hand, last = hand + d, d
        out.append(hand)
    return torch.stack(out)


def windows(H):
    """Every H-step window of every episode: x ``[H+1, N, extra]``, last changes ``[H, N, PROPRIO]``, actions."""
    xs, ls, acts = [], [], []
    for t in tasks:
        for e, x in data[t]:
            a, last = torch.from_numpy(e.actions).float(), last_changes(x)
            for s in range(len(a) - H + 1):
                xs.append(x[s:s + H + 1])
                ls.append(last[s:s + H])
                acts.append(a[s:s + H])
    return torch.stack(xs, 1), torch.stack(ls, 1), torch.stack(acts, 1)


def fit(seed, H, momentum):
    net, step, n_out, mse, gen = fit_hand_net(model, [p for t in tasks for p in data[t]], momentum, seed)
    if H > 1:
        X, L, A = windows(H)
        opt = torch.optim.Adam(net.parameters(), lr=3e-4)
        with torch.enable_grad():
            for _ in range(FINE_TUNE_UPDATES):
                idx = torch.randint(X.shape[1], (256,), generator=gen)
                hand = unroll(step, X[:, idx], L[:, idx], A[:, idx], H)
                loss = ((hand - X[1:, idx, :PROPRIO]) / n_out.std).pow(2).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        inp_steps = [(e, x) for t in tasks for e, x in data[t]]
        with torch.no_grad():
            mse = float(torch.cat([(step(x[:-1], last_changes(x)[:-1], torch.from_numpy(e.actions).float())
                                    - (x[1:, :PROPRIO] - x[:-1, :PROPRIO])) / n_out.std
                                   for e, x in inp_steps]).pow(2).mean())
    return step, mse


def test_sets():
    """Per task, per level: 16 episodes cut to the shortest of them (at most 150 steps)."""
    sets = {}
    for t in tasks:
        eps = data[t]
        start = 0
        for level, n, _ in LOOP_LEVELS:
            chosen = eps[start:start + 16]
            start += n
            T = min(150, min(len(e) for e, _ in chosen))
            X = torch.stack([x[:T + 1] for _, x in chosen], 1)
            L = torch.stack([last_changes(x)[:T] for _, x in chosen], 1)
            A = torch.stack([torch.from_numpy(e.actions[:T]).float() for e, _ in chosen], 1)
            sets[t, level] = (X, L, A, T)
    return sets


sets = test_sets()
for H, momentum in itertools.product(horizons, (False, True)):
    t0 = time.perf_counter()
    ends = {}
    for seed in SEEDS:
        step, mse = fit(seed, H, momentum)
        errs = {}
        with torch.no_grad():
            for (t, level), (X, L, A, T) in sets.items():
                hand = unroll(step, X, L, A, T)
                ends[seed, t, level] = hand[-1, :, :3]
                errs.setdefault(t, []).append((hand[-1, :, :3] - X[T, :, :3]).norm(dim=1).mean().item())
        print(f"H={H} {'momentum' if momentum else 'no momentum'} seed {seed}: one-step error {mse:.3f}; "
              "hand error at the end (m): " + " ".join(f"{t} {sum(v) / len(v):.3f}" for t, v in errs.items()),
              flush=True)
    agree = {t: sum((ends[a, t, lv] - ends[b, t, lv]).norm(dim=1).mean().item()
                    for a, b in itertools.combinations(SEEDS, 2) for lv, _, _ in LOOP_LEVELS)
             / (3 * len(LOOP_LEVELS)) for t in tasks}
    print(f"H={H} {'momentum' if momentum else 'no momentum'}: seeds' disagreement at the end (m): "
          + " ".join(f"{t} {v:.3f}" for t, v in agree.items()) + f"  [{time.perf_counter() - t0:.0f} s]", flush=True)
