"""Issue 7: the loop-ref video model with the objects' positions in its latent state.

Over loop-ref's frame autoencoder and judge (``VideoWorldModel.over_encoder``), the latent dynamics, the object
reader and the success head on positions (``objects=true, success_on=objects``) are fitted on the expert,
medium, poor and misdirected episodes of TASKS (files remade with positions by ``add_objects.py``).

MOVER=free or MOVER=carry adds the object mover of that form (``object_mover=true, mover=...``). RANKING=1 fits the
loop's ranking model instead (``eval.manipulation_loop.RANKING_MODEL``: positions, the hand mover, the matrix mover),
what its "ranking model" stage fits; SEED (default 0) seeds the new parts' weights and the fit, so that fits of other
seeds show how far a ranking rests on one fit.

The dynamics' fit resumes from ``<OUT stem>.fit-checkpoint.pt`` beside OUT when cut short.

Usage (repository root): [MAX_EPOCHS=60] [OBJECTS=1] [MOVER=carry | RANKING=1] [SEED=0] python assets/reports/manipulation/draws/fit_objects.py MODEL OUT TASK ...
"""
import dataclasses
import os
import json
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
from loop_data import loop_episodes
from worldmodels.registry import load_model

base, out, tasks = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
episodes = [e for task in tasks for e in loop_episodes(f"metaworld-{task}")]
objects = os.environ.get("OBJECTS", "1") == "1"          # OBJECTS=0: the same fit without positions (the ablation)
mover = {"object_mover": True, "mover": os.environ["MOVER"]} if os.environ.get("MOVER") else {}
settings = {"objects": objects, "success_on": "objects" if objects else "judge", **mover}
if os.environ.get("RANKING") == "1":
    from eval.manipulation_loop import RANKING_MODEL
    settings = RANKING_MODEL
seed = int(os.environ.get("SEED", 0))
torch.manual_seed(seed)
model = load_model(base).over_encoder(**settings, max_epochs=int(os.environ.get("MAX_EPOCHS", 60)))
model.spec = dataclasses.replace(model.spec, task=",".join(f"metaworld-{t}" for t in sorted(tasks)))
t0 = time.perf_counter()
# The dynamics' fit writes its progress after every epoch beside OUT: cut short (a session's end), it resumes.
partial = out.parent / f"{out.stem}.fit-checkpoint.pt"
out.parent.mkdir(parents=True, exist_ok=True)
metrics = model.fit_latent(episodes, torch.Generator().manual_seed(seed),
                           progress=lambda stage, i, v: print(f"  {stage} {i}: {v:.4f}", flush=True),
                           checkpoint=partial)
metrics["seconds"] = time.perf_counter() - t0
model.save(out)
partial.unlink(missing_ok=True)
(out.parent / "metrics.json").write_text(json.dumps(metrics, indent=1))
print(json.dumps({k: v for k, v in metrics.items() if "member" not in k}, indent=1))
