"""Should the hand mover read the hand's last change? MetaWorld's hand carries momentum (the last step's change
explains 95% of the next one's variance: hand_drift.py), but a mover that reads it feeds its own errors back.

Two hand movers of the form ``VideoWorldModel.hand_move`` (an MLP on the hand relative to the object, the
gripper, the action and the object relative to the goal), one of them also reading the proprioception's last
change, are fitted on the loop's real episodes of the four ranked tasks (MODEL's ``_train_head``, as
``fit_hand``). Each then drives the hand open loop through 16 expert episodes per task with their own actions,
the objects at their real positions (so only the hand's own error compounds). Printed: the one-step error in
units of the change's spread, and the hand's error (m) at a quarter, half, three quarters and the end of the
shortest episode (at most 100 steps).

Usage (repository root): python assets/reports/manipulation/draws/hand_momentum.py MODEL
"""
import sys

import torch

torch.set_num_threads(1)
from loop_data import expert_steps, fit_hand_net, loop_episodes
from worldmodels.registry import load_model
from worldmodels.video import PROPRIO

model = load_model(sys.argv[1])
tasks = ["drawer-open", "door-open", "push", "pick-place"]
data = {t: [(e, model.episode_extra(e)) for e in loop_episodes(f"metaworld-{t}")] for t in tasks}

for momentum in (False, True):              # seeded: a rerun prints the same figures
    _, step, _, mse, _ = fit_hand_net(model, [p for t in tasks for p in data[t]], momentum, 0)
    print(f"hand mover {'with' if momentum else 'without'} the last change: one-step error {mse:.3f}")
    for t in tasks:
        chosen, X, A, marks = expert_steps(model, [e for e, _ in data[t]])
        with torch.no_grad():
            hand, last, err = X[0, :, :PROPRIO].clone(), torch.zeros(len(chosen), PROPRIO), []
            for s in range(marks[-1]):
                d = step(torch.cat([hand, X[s, :, PROPRIO:]], 1), last, A[s])
                hand, last = hand + d, d
                err.append((hand[:, :3] - X[s + 1, :, :3]).norm(dim=1).mean().item())
        print(f"  {t}: hand error (m) at steps {marks}: " + " ".join(f"{err[m - 1]:.3f}" for m in marks), flush=True)
