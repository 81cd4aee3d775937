"""Where does the imagined hand go wrong? For each TASK, on the loop's real episodes of that task (loop_data):

1. the real hand: how much of its change the step's action explains, and how much the last step's change
   (R^2 of a least-squares fit; MetaWorld's hand follows a mocap target with a lag, so it carries momentum);
2. the model, one step ahead from real states: its predicted hand change with the real action, and with the
   action's xyz set to zero (the share of its prediction that the action explains);
3. the model open loop from 16 expert episodes' first frames, driven by their own actions at its mean (one elite
   per row): the hand's error against the real hand at a quarter, half, three quarters and the end of the
   shortest episode (at most 100 steps), with the model's own latents and positions (free), and with the real
   frames' latents put in at every step (real z).

Usage (repository root): python assets/reports/manipulation/draws/hand_drift.py MODEL TASK ...
"""
import sys

import numpy as np
import torch

torch.set_num_threads(1)
from loop_data import expert_steps, loop_episodes
from worldmodels.registry import load_model
from worldmodels.video import PROPRIO, frames_to_obs

model = load_model(sys.argv[1])
L = model.cfg.latent


def r2(X: np.ndarray, y: np.ndarray) -> float:
    X = np.c_[X, np.ones(len(X))]
    w, *_ = np.linalg.lstsq(X, y, rcond=None)
    return float(1 - ((y - X @ w) ** 2).sum() / ((y - y.mean(0)) ** 2).sum())


for task in sys.argv[2:]:
    episodes = loop_episodes(f"metaworld-{task}")
    dh = [np.diff(e.states[:, :3], axis=0) for e in episodes]
    y, a, prev = (np.concatenate(v) for v in ([d[1:] for d in dh], [e.actions[1:, :3] for e in episodes],
                                              [d[:-1] for d in dh]))
    print(f"{task}: real hand change R^2 on the action {r2(a, y):.2f}, on the last change {r2(prev, y):.2f}, "
          f"on both {r2(np.c_[a, prev], y):.2f}")

    with torch.no_grad():
        moved, still = [], []
        for e in episodes:
            z, x = model.encode_images(e.images), model.episode_extra(e)
            lat = model._latent_state(z[:-1], torch.cat([z[:1], z[:-2]]), x[:-1])
            act = torch.from_numpy(e.actions).float()
            act0 = act.clone()
            act0[:, :3] = 0
            for acts, store in ((act, moved), (act0, still)):
                mean = model.dynamics.predict(lat, acts)[0][model.elites].mean(0)
                store.append(mean[:, 2 * L:2 * L + 3] - x[:-1, :3])
        p, p0 = torch.cat(moved), torch.cat(still)
        print(f"  one step: predicted |change| {p.norm(dim=1).mean() * 1000:.2f} mm, with the action's xyz zeroed "
              f"{p0.norm(dim=1).mean() * 1000:.2f} mm; share the action explains "
              f"{float(((p - p0) * p).sum() / (p * p).sum()):.2f}")

        chosen, X, A, marks = expert_steps(model, episodes)
        T = marks[-1]
        Z = torch.stack([model.encode_images(e.images[:T + 1]) for e in chosen], 1)
        start = frames_to_obs(torch.stack([torch.from_numpy(e.images[0]) for e in chosen]), X[0, :, :PROPRIO])
        member = model.elites[torch.arange(len(chosen)) % len(model.elites)]
        for mode in ("free", "real z"):
            state, err = model.init_state(start, member=member), []
            for t in range(T):
                state, _ = model.step(state, A[t], deterministic=True)
                lat = state["latent"]
                if mode == "real z":
                    lat = torch.cat([Z[t + 1], Z[t], lat[:, 2 * L:]], 1)
                state = {**state, "latent": lat}
                err.append((lat[:, 2 * L:2 * L + 3] - X[t + 1, :, :3]).norm(dim=1).mean().item())
            print(f"  open loop, {mode:6s}: hand error (m) at steps {marks}: "
                  + " ".join(f"{err[m - 1]:.3f}" for m in marks), flush=True)
