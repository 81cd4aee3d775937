"""Issue 7: a video model with objects given an object mover of another form (``MOVER=matrix`` by default, or
``carry``, ``free``) in place of its own, fitted on the real episodes of TASKS (expert, medium, poor,
misdirected); the rest of the model unchanged (``VideoWorldModel.add_object_mover``, seconds).

Why: with the hand mover's hand and the carry mover's handle, door-open's imagined door falls behind. A gate per
axis can only scale the hand's move, while a door's handle turns along the hinge's arc. Open loop on expert
episodes, with the hand mover driving the hand, a 3x3 map (``matrix``) read off the handle's offset from the goal
ended 8-13 cm from the real handle against the carry mover's 14-18 cm over four fits (``coupled_movers.py``,
log ``coupled-movers-carry.log``).

Usage (repository root): [MOVER=matrix] python assets/reports/manipulation/draws/add_mover.py MODEL OUT TASK ...
"""
import os
import sys

import torch

torch.set_num_threads(1)
from loop_data import amend_model

form = os.environ.get("MOVER", "matrix")
amend_model(sys.argv[1:], lambda model, episodes, g: {"object_mover_mse": model.add_object_mover(episodes, g, form),
                                                      "mover": form})
