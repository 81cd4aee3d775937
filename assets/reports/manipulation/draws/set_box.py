"""Give a video model fitted before the data's box existed its box (``x_low``/``x_high``: the per-dimension range of
proprioception and, with ``objects``, positions over the episodes it was fitted on), as ``fit_latent`` now sets it.

Usage (repository root): python assets/reports/manipulation/draws/set_box.py MODEL OUT TASK ...
"""
import sys
from pathlib import Path

import torch

from loop_data import loop_episodes
from worldmodels.registry import load_model

model, out, tasks = load_model(Path(sys.argv[1])), Path(sys.argv[2]), sys.argv[3:]
x = torch.cat([model.episode_extra(e) for task in tasks for e in loop_episodes(f"metaworld-{task}")])
model.x_low.copy_(x.min(0).values)
model.x_high.copy_(x.max(0).values)
out.parent.mkdir(parents=True, exist_ok=True)
model.save(out)
print("box low ", [round(v, 3) for v in model.x_low.tolist()])
print("box high", [round(v, 3) for v in model.x_high.tolist()])
