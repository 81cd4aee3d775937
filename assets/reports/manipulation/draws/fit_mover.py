"""Issue 7: give an objects model (``objects=true``) an object mover (``object_mover=true``): the object's change
predicted only from the hand relative to the object, the gripper and the action, fitted on real transitions of
TASKS; everything else is the model's own.

Usage (repository root): python assets/reports/manipulation/draws/fit_mover.py MODEL OUT TASK ...
"""
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
from loop_data import loop_episodes
from worldmodels.registry import load_model

base, out, tasks = load_model(Path(sys.argv[1])), Path(sys.argv[2]), sys.argv[3:]
model = base.over_encoder(object_mover=True)
missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
assert all(k.startswith("mover") for k in missing) and not unexpected, (missing, unexpected)
episodes = [e for task in tasks for e in loop_episodes(f"metaworld-{task}")]
t0 = time.perf_counter()
mse = model.fit_mover(episodes, torch.Generator().manual_seed(0))
out.parent.mkdir(parents=True, exist_ok=True)
model.save(out)
print(f"object mover: normalised MSE {mse:.4f} on {sum(len(e) for e in episodes)} transitions, "
      f"{time.perf_counter() - t0:.0f} s")
