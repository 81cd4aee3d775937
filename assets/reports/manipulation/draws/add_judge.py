"""Give an existing video world model the frame success judge (``worldmodels/judge.py``) and make it the model's
success signal (``success_on=judge``); the autoencoder and dynamics stay as they are.

The judge learns from real episodes of all four levels of every task (expert 50, medium 25, poor 25, misdirected
25, seeds 0-3, the loop's cached files), a fifth of the episodes held out (the split ``fit_judge`` of a fresh
model makes); printed: held-out true/false positive rates per task, per frame and per episode, on real frames and
on frames as the model shows them (its reconstruction).

Usage (repository root): python assets/reports/manipulation/draws/add_judge.py MODEL OUT [STEPS]
"""
import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
from envs.manipulation import TASKS
from loop_data import judge_episodes
from worldmodels.judge import fit_judge, judge_rates
from worldmodels.registry import load_model

model = load_model(Path(sys.argv[1]))
out = Path(sys.argv[2])
model.cfg.judge_steps = int(sys.argv[3]) if len(sys.argv) > 3 else model.cfg.judge_steps
model.cfg.success_on = "judge"
g = torch.Generator().manual_seed(0)
torch.manual_seed(0)
model.judge.apply(lambda m: m.reset_parameters() if hasattr(m, "reset_parameters") else None)
hold, train, task_of = judge_episodes(g)
print(f"{len(train)} training and {len(hold)} held-out episodes, {model.cfg.judge_steps} updates", flush=True)
fit_judge(model.judge, train, g, steps=model.cfg.judge_steps, view=model.reconstruct,
          progress=lambda s, i, v: print(f"  {s} step {i}: loss {v:.4f}", flush=True))
model.save(out)
print(f"saved {out}\n\nheld-out rates: frame TPR / FPR, episode TPR / FPR; real frames | as the model shows them")
rows = {}
for t in list(TASKS) + ["all"]:
    eps = [e for e in hold if t == "all" or task_of[id(e)] == t]
    r = rows[t] = judge_rates(model.judge, eps, view=model.reconstruct)
    print(f"{t:32s} {r['holdout_episodes']:3.0f} eps  {r['frame_tpr']:.2f} {r['frame_fpr']:.3f} {r['episode_tpr']:.2f} "
          f"{r['episode_fpr']:.2f} | {r['frame_tpr_shown']:.2f} {r['frame_fpr_shown']:.3f} "
          f"{r['episode_tpr_shown']:.2f} {r['episode_fpr_shown']:.2f}", flush=True)
(out.parent / (out.stem + "_judge.json")).write_text(json.dumps(rows, indent=1))
