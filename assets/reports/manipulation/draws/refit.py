"""Refit the loop's video model's latent dynamics and heads (same frame encoder) on episodes with more varied
actions: the expert and medium demonstrations plus 25 episodes per task of each extra level (default `poor`,
action noise 1.0), then 10-step unrolled training.

    python assets/reports/manipulation/draws/refit.py runs/manip/loop/video.pt runs/manip/loop/video_poor.pt
    python assets/reports/manipulation/draws/refit.py runs/manip/loop/video.pt runs/manip/loop/video_missed.pt \
        poor,misdirected
"""
import dataclasses, json, sys, time
from pathlib import Path
import torch
torch.set_num_threads(1)
from envs.builtin import cache_dir
from envs.manipulation import TASKS
from envs.manipulation_data import make_manipulation, read_manipulation
from eval.video_evaluate import open_loop_frames
from worldmodels.registry import load_model
from worldmodels.video import VideoWorldModel

src, dst = sys.argv[1], sys.argv[2]
extra = sys.argv[3].split(",") if len(sys.argv) > 3 else ["poor"]
SEEDS = {"poor": 2, "misdirected": 3}
old = load_model(Path(src))
t0 = time.perf_counter()
data = {lv: {t: read_manipulation(make_manipulation(t, lv, n, seed, cache_dir())[0]).episodes for t in TASKS}
        for lv, n, seed in (("expert", 50, 0), ("medium", 25, 1), *((lv, 25, SEEDS[lv]) for lv in extra))}
made = time.perf_counter() - t0
cfg = dataclasses.replace(old.cfg, unroll_steps=10, unroll_epochs=3, unroll_lr=3e-4)
model = VideoWorldModel(old.spec.obs_dim, old.spec.act_dim, cfg, task=old.spec.task)
model.ae.load_state_dict(old.ae.state_dict())
episodes = [e for lv in data for t in TASKS for e in data[lv][t]]
t0 = time.perf_counter()
metrics = model.fit_latent(episodes, torch.Generator().manual_seed(0),
                           progress=lambda s, e, v: print(f"  {s} epoch {e}: {v:.4f}", flush=True))
fit = time.perf_counter() - t0
model.save(Path(dst))
drift = {t: {r[0]: r[1] for r in open_loop_frames(model, data["expert"][t], 100, 200, 0)[1]}
         for t in ("metaworld-push", "metaworld-pick-place", "metaworld-reach")}
print(json.dumps({"episodes": len(episodes), "make_seconds": made, "fit_seconds": fit, **metrics, "drift": drift},
                 indent=1))
