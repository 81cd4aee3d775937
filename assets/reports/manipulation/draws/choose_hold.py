"""Choose the hold (success frames in a row) for a video model whose judge was fitted before the fit chose one
(``add_judge.py``): the same held-out episodes as that fit (the split of a generator seeded 0 over every task's
four levels), rates at each hold on frames as the model shows them, the best hold (Youden's J) kept in a copy.

Usage (repository root): python assets/reports/manipulation/draws/choose_hold.py MODEL OUT
"""
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
from envs.manipulation import TASKS
from loop_data import judge_episodes
from worldmodels.judge import HOLDS, choose_hold, episode_key, judge_rates
from worldmodels.registry import load_model

model, out = load_model(Path(sys.argv[1])), Path(sys.argv[2])
hold, _, task_of = judge_episodes(torch.Generator().manual_seed(0))
print(f"{len(hold)} held-out episodes; episode TPR / FPR on frames as the model shows them, per hold")
print(f"{'task':32s} " + "  ".join(f"hold {k:>2}" for k in HOLDS))
rows = {}
for t in list(TASKS) + ["all"]:
    eps = [e for e in hold if t == "all" or task_of[id(e)] == t]
    r = rows[t] = judge_rates(model.judge, eps, view=model.reconstruct, holds=HOLDS)
    print(f"{t:32s} " + "  ".join(f"{r[episode_key('tpr', '_shown', k)]:.2f}/{r[episode_key('fpr', '_shown', k)]:.2f}"
                                  for k in HOLDS), flush=True)
model.judge.hold.fill_(choose_hold(rows["all"], "_shown"))
model.save(out)
print(f"chosen hold {int(model.judge.hold)} -> {out}")
