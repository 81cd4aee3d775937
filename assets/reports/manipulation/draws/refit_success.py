"""Issue 7: the success head on positions of a video model with objects, fitted again on what MetaWorld's success
measures (``success_inputs=relation``: the object's offset from the goal, its length, the goal), the rest of the
model unchanged.

The carry model's head read the proprioception as well, and on drawer-open it called a closed gripper near the
handle a success with the drawer shut (the BC snapshots at 100 and 250 updates: real 0%, imagined 76-78%). The
head is refitted on the same real episodes (expert, medium, poor, misdirected of TASKS), a fifth held out.

Usage (repository root): python assets/reports/manipulation/draws/refit_success.py MODEL OUT TASK ...
"""
import sys

import torch

torch.set_num_threads(1)
from loop_data import amend_model

amend_model(sys.argv[1:], lambda model, episodes, g: model.refit_object_success(episodes, g, success_inputs="relation"))
