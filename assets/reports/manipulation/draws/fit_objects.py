"""Issue 7: the loop-ref video model with the objects' positions in its latent state.

Over loop-ref's frame autoencoder and judge (``VideoWorldModel.over_encoder``), the latent dynamics, the object
reader and the success head on positions (``objects=true, success_on=objects``) are fitted on the expert,
medium, poor and misdirected episodes of TASKS (files remade with positions by ``add_objects.py``).

MOVER=free or MOVER=carry adds the object mover of that form (``object_mover=true, mover=...``). RANKING=1 fits the
loop's ranking model instead (``eval.manipulation_loop.RANKING_MODEL``: positions, the hand mover, the matrix mover),
what its "ranking model" stage fits; SEED (default 0) seeds the new parts' weights and the fit, so that fits of other
seeds show how far a ranking rests on one fit.

The fit is ``eval.manipulation_loop.fit_over_encoder``, the loop's own: it resumes from
``<OUT stem>.fit-checkpoint.pt`` beside OUT when cut short.

Usage (repository root): [MAX_EPOCHS=60] [OBJECTS=1] [MOVER=carry | RANKING=1] [SEED=0] python assets/reports/manipulation/draws/fit_objects.py MODEL OUT TASK ...
"""
import os
import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
from eval.manipulation_loop import RANKING_MODEL, fit_over_encoder
from loop_data import loop_episodes

base, out, tasks = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
episodes = [e for task in tasks for e in loop_episodes(f"metaworld-{task}")]
objects = os.environ.get("OBJECTS", "1") == "1"          # OBJECTS=0: the same fit without positions (the ablation)
mover = {"object_mover": True, "mover": os.environ["MOVER"]} if os.environ.get("MOVER") else {}
settings = {"objects": objects, "success_on": "objects" if objects else "judge", **mover}
if os.environ.get("RANKING") == "1":
    settings = RANKING_MODEL
metrics = fit_over_encoder(base, out, settings, episodes, [f"metaworld-{t}" for t in tasks],
                           int(os.environ.get("SEED", 0)), int(os.environ.get("MAX_EPOCHS", 60)))
(out.parent / "metrics.json").write_text(json.dumps(metrics, indent=1))
print(json.dumps({k: v for k, v in metrics.items() if "member" not in k}, indent=1))
