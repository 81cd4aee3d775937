"""Does a video model's hand follow the real one under the same actions? One policy runs closed loop in
MetaWorld from RESETS resets (seed 20000 on) for 120 steps; its recorded actions then drive each MODEL open loop
from the same start frames, at its mean. Printed: the hand's distance to the goal at a few steps, averaged over
the resets, real first, then each model's.

Usage (repository root): python assets/reports/manipulation/draws/open_loop_hand.py TASK POLICY MODEL ... [RESETS=8]
"""
import os
import sys
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
from loop_data import real_rollouts
from worldmodels.registry import load_model
from worldmodels.video import frames_to_obs

task, policy_path, model_paths = sys.argv[1], sys.argv[2], sys.argv[3:]
n, H = int(os.environ.get("RESETS", 8)), 120
seeds = list(range(20000, 20000 + n))
name, (frames0, states0, _), X, A, _ = real_rollouts(task, policy_path, seeds, H)
goal = X[0, :, 7:10]
hands = []
for path in model_paths:
    model = load_model(Path(path))
    L, g = model.cfg.latent, torch.Generator().manual_seed(0)
    state = model.init_state(frames_to_obs(frames0, states0), g)
    hand = np.zeros((H, n, 3), np.float32)
    for t in range(H):
        state, _ = model.step(state, torch.from_numpy(A[t]), generator=g, deterministic=True)
        hand[t] = state["latent"][:, 2 * L:2 * L + 3].numpy()
    hands.append(hand)
print(f"{task}, {name}, {n} resets from seed 20000: hand-to-goal distance (m), real, then open loop in "
      + ", ".join(model_paths))
for c in (10, 25, 50, 75, 100, 120):
    t = c - 1
    print(f" {c:4d} | {np.linalg.norm(X[t, :, :3] - goal, axis=1).mean():.3f} | "
          + " | ".join(f"{np.linalg.norm(h[t] - goal, axis=1).mean():.3f}" for h in hands))
