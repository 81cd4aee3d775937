"""Train the loop's video model's latent dynamics on their own k-step predictions (VideoWorldModel.train_unrolled)
and compare open-loop drift before and after, on each task's expert demonstrations.

    python assets/reports/manipulation/draws/refine.py runs/manip/loop/video.pt runs/manip/loop/video_unrolled.pt 10 3
"""
import json, sys, time
from pathlib import Path
import numpy as np, torch
torch.set_num_threads(1)
from envs.builtin import cache_dir
from envs.manipulation import TASKS
from envs.manipulation_data import make_manipulation, read_manipulation
from eval import metrics
from eval.video_evaluate import open_loop_frames
from worldmodels.registry import load_model

src, dst, steps, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lr = float(sys.argv[5]) if len(sys.argv) > 5 else 3e-4
model = load_model(Path(src))
expert = {t: read_manipulation(make_manipulation(t, "expert", 50, 0, cache_dir())[0]).episodes for t in TASKS}
medium = {t: read_manipulation(make_manipulation(t, "medium", 25, 1, cache_dir())[0]).episodes for t in TASKS}
episodes = [e for t in TASKS for e in expert[t] + medium[t]]

def drift(m):
    out = {}
    for t in ("metaworld-push", "metaworld-pick-place", "metaworld-reach"):
        res, rows = open_loop_frames(m, expert[t][:50], 100, 200, 0)
        out[t] = {r[0]: r[1] for r in rows}
    return out

before = drift(model)
t0 = time.perf_counter()
m = model.train_unrolled(episodes, steps, epochs, torch.Generator().manual_seed(0), lr=lr,
                         progress=lambda s, e, v: print(f"  {s} epoch {e}: {v:.4f}", flush=True))
seconds = time.perf_counter() - t0
after = drift(model)
model.save(Path(dst))
print(json.dumps({"steps": steps, "epochs": epochs, "lr": lr, "seconds": seconds, **m, "before": before, "after": after}, indent=1))
