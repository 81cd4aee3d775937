"""The hand mover and an object mover driven together, open loop, on expert episodes with their own actions: how
far from the real hand and object do they end? Over MODEL (with objects and an object mover), the hand mover is
fitted (``add_hand_mover``) on the loop's real episodes of the four ranked tasks; then each object mover form in
FORMS (default: the model's own, and matrix, fitted by ``add_object_mover`` on the same episodes) moves the object
by the hand mover's predicted change. 16 expert episodes per task, to the end of the shortest (at most 100 steps);
the goal stays where it is, and the positions are kept in the data's box, as ``VideoWorldModel.step`` keeps them.

Usage (repository root): [FORMS="own matrix"] python assets/reports/manipulation/draws/coupled_movers.py MODEL
"""
import os
import sys

import torch

torch.set_num_threads(1)
from loop_data import expert_steps, loop_episodes
from worldmodels.registry import load_model
from worldmodels.video import PROPRIO

tasks = ["drawer-open", "door-open", "push", "pick-place"]
episodes = {t: loop_episodes(f"metaworld-{t}") for t in tasks}
every = [e for t in tasks for e in episodes[t]]
for form in os.environ.get("FORMS", "own matrix").split():
    model = load_model(sys.argv[1])
    torch.manual_seed(0)                 # the new nets' initial weights: each form starts from the same draw
    g = torch.Generator().manual_seed(0)
    hand_mse = model.add_hand_mover(every, g)
    mover_mse = model.fit_mover(every, g) if form == "own" else model.add_object_mover(every, g, form)
    print(f"object mover {model.cfg.mover} ({form}): fit error {mover_mse:.4f}; hand mover {hand_mse:.4f}")
    for t in tasks:
        _, X, A, marks = expert_steps(model, episodes[t])
        T = marks[-1]
        with torch.no_grad():
            x = X[0].clone()
            for s in range(T):
                change = model.hand_move(x, A[s])
                obj = x[:, PROPRIO:PROPRIO + 3] + model.object_move(x, A[s], change[:, :3])
                x = torch.cat([x[:, :PROPRIO] + change, obj, x[:, PROPRIO + 3:]], 1).clamp(model.x_low, model.x_high)
        end = X[T]

        def dist(a, b):
            return (a - b).norm(dim=1).mean().item()

        print(f"  {t} ({T} steps): hand error {dist(x[:, :3], end[:, :3]):.3f} m, object error "
              f"{dist(x[:, PROPRIO:PROPRIO + 3], end[:, PROPRIO:PROPRIO + 3]):.3f} m; object to goal "
              f"{dist(x[:, PROPRIO:PROPRIO + 3], x[:, PROPRIO + 3:]):.3f} m imagined, "
              f"{dist(end[:, PROPRIO:PROPRIO + 3], end[:, PROPRIO + 3:]):.3f} m real", flush=True)
