"""Issue 7: the success head on positions of a video model with objects, fitted again on what MetaWorld's success
measures (``success_inputs=relation``: the object's offset from the goal, its length, the goal), the rest of the
model unchanged.

The carry model's head read the proprioception as well, and on drawer-open it called a closed gripper near the
handle a success with the drawer shut (the BC snapshots at 100 and 250 updates: real 0%, imagined 76-78%). The
head is refitted on the same real episodes (expert, medium, poor, misdirected of TASKS), a fifth held out.

Usage (repository root): python assets/reports/manipulation/draws/refit_success.py MODEL OUT TASK ...
"""
import json
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
from loop_data import loop_episodes
from worldmodels.registry import load_model

base, out, tasks = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
model = load_model(base)
episodes = [e for task in tasks for e in loop_episodes(f"metaworld-{task}")]
t0 = time.perf_counter()
metrics = model.refit_object_success(episodes, torch.Generator().manual_seed(0), success_inputs="relation")
metrics["seconds"] = time.perf_counter() - t0
out.parent.mkdir(parents=True, exist_ok=True)
model.save(out)
(out.parent / "metrics.json").write_text(json.dumps(metrics, indent=1))
print(json.dumps(metrics, indent=1))
