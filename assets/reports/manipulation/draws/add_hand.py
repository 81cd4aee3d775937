"""Issue 7: a video model with objects given the hand mover (``world_model.hand_mover=true``): the
proprioception's change from a net on the action, the gripper, the hand relative to the object and the object
relative to the goal, fitted on the real episodes of TASKS (expert, medium, poor, misdirected); the rest of the
model unchanged (``VideoWorldModel.add_hand_mover``, seconds).

Why: on drawer-open, driven open loop by the real actions of a policy that opens the drawer, the latent
dynamics' hand falls behind the real one while it pulls, and the handle it carries stops short of the goal;
with the real hand put in its place the carried handle reaches the goal (``open_loop_hand.py``).

MEMBERS (default 5, ``world_model.hand_members``): how many hand movers are fitted apart and averaged.
HORIZON (default: MODEL's own, ``world_model.hand_horizon``): the open-loop unrolls they are fine-tuned on (1: none).
SEED (default 0): their initial weights and batch order.

Usage (repository root): [MEMBERS=5] [HORIZON=16] [SEED=0] python assets/reports/manipulation/draws/add_hand.py MODEL OUT TASK ...
"""
import os
import sys

import torch

torch.set_num_threads(1)
from loop_data import amend_model

settings = {"hand_members": int(os.environ.get("MEMBERS", 5))}
if "HORIZON" in os.environ:
    settings["hand_horizon"] = int(os.environ["HORIZON"])
amend_model(sys.argv[1:], lambda model, episodes, g: {"hand_mover_mse": model.add_hand_mover(episodes, g, **settings),
                                                      **settings}, int(os.environ.get("SEED", 0)))
