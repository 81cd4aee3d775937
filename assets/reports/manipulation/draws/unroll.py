"""Issue 7: a video model's latent dynamics trained further on their own STEPS-step predictions
(``VideoWorldModel.train_unrolled``, every member side by side, the error of each predicted latent and position
against the real one backpropagated through the unroll), on the expert, medium, poor and misdirected episodes of
TASKS; everything else in the model unchanged.

Why: on drawer-open, driven open loop by the real actions of a policy that opens the drawer, the carry model's
hand falls behind the real one while it pulls (8 resets, hand-to-goal distance at step 75: real 0.11 m,
imagined 0.16 m), so the handle it carries never reaches the goal.

Usage (repository root): python assets/reports/manipulation/draws/unroll.py MODEL OUT STEPS EPOCHS TASK ...
"""
import json
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
from loop_data import loop_episodes
from worldmodels.registry import load_model

base, out, steps, epochs, tasks = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
    sys.argv[5:]
model = load_model(base)
episodes = [e for task in tasks for e in loop_episodes(f"metaworld-{task}")]
t0 = time.perf_counter()
metrics = model.train_unrolled(episodes, steps, epochs, torch.Generator().manual_seed(0), lr=model.cfg.unroll_lr,
                               progress=lambda stage, i, v: print(f"  {stage} {i}: {v:.4f}", flush=True))
metrics["seconds"] = time.perf_counter() - t0
out.parent.mkdir(parents=True, exist_ok=True)
model.save(out)
(out.parent / "metrics.json").write_text(json.dumps(metrics, indent=1))
print(json.dumps(metrics, indent=1))
