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
import torch.nn.functional as F

torch.set_num_threads(1)
from loop_data import expert_steps, loop_episodes
from worldmodels.ensemble import Normalizer
from worldmodels.registry import load_model
from worldmodels.video import PROPRIO, _mlp

model = load_model(sys.argv[1])
tasks = ["drawer-open", "door-open", "push", "pick-place"]
data = {t: [(e, model.episode_extra(e)) for e in loop_episodes(f"metaworld-{t}")] for t in tasks}


def inputs(x, last, a, momentum: bool):       # the hand mover's inputs, and with momentum the last change too
    return torch.cat([model.hand_input(x, a)] + ([last] if momentum else []), 1)


def last_changes(x):          # the proprioception's change into each step (none into the first)
    d = x[1:, :PROPRIO] - x[:-1, :PROPRIO]
    return torch.cat([torch.zeros_like(d[:1]), d])


for momentum in (False, True):
    torch.manual_seed(0)                 # the net's initial weights: a rerun prints the same figures
    inp = torch.cat([inputs(x[:-1], last_changes(x)[:-1], torch.from_numpy(e.actions).float(), momentum)
                     for t in tasks for e, x in data[t]])
    out = torch.cat([x[1:, :PROPRIO] - x[:-1, :PROPRIO] for t in tasks for _, x in data[t]])
    net, n_in, n_out = _mlp(inp.shape[1], PROPRIO), Normalizer(inp.shape[1]), Normalizer(PROPRIO)
    n_in.fit(inp)
    n_out.fit(out)
    with torch.enable_grad():
        mse = model._train_head(net, n_in(inp), n_out(out), F.mse_loss, torch.Generator().manual_seed(0))
    print(f"hand mover {'with' if momentum else 'without'} the last change: one-step error {mse:.3f}")
    for t in tasks:
        chosen, X, A, marks = expert_steps(model, [e for e, _ in data[t]])
        with torch.no_grad():
            hand, last, err = X[0, :, :PROPRIO].clone(), torch.zeros(len(chosen), PROPRIO), []
            for s in range(marks[-1]):
                d = n_out.inverse(net(n_in(inputs(torch.cat([hand, X[s, :, PROPRIO:]], 1), last, A[s], momentum))))
                hand, last = hand + d, d
                err.append((hand[:, :3] - X[s + 1, :, :3]).norm(dim=1).mean().item())
        print(f"  {t}: hand error (m) at steps {marks}: " + " ".join(f"{err[m - 1]:.3f}" for m in marks), flush=True)
