"""Exploration on push only: how noisy is imagined success, and does averaging model samples per reset
(or the model's mean) sharpen the ranking? Real success from runs/manip/rank/push/results.json."""
import json, sys
import numpy as np, torch
torch.set_num_threads(1)
from eval import metrics
from eval.video_evaluate import load_vla_policies, reset_starts
from worldmodels.registry import load_model
from worldmodels.rollout import StartStates, rollout
from worldmodels.video import frames_to_obs
from agents.vla_finetune import VLAEnginePolicy
from pathlib import Path

task = sys.argv[1]
real = {p["policy"]: p["real_score"] / 100 for p in json.load(open(f"runs/manip/rank/{task}/results.json"))["policies"]}
model = load_model(Path(sys.argv[3] if len(sys.argv) > 3 else "runs/manip/loop/video.pt"))
if len(sys.argv) > 4:
    model.cfg.success_on = sys.argv[4]        # latent (the default) or frame
pols = load_vla_policies(["runs/manip/loop/zoo", "runs/manip/loop/vla_bc.pt", "runs/manip/loop/vla_finetuned.pt"])
seeds = list(range(20000, 20050))
f0, s0, texts = reset_starts(f"metaworld-{task}", seeds, 64)
R = np.array([real[n] for n, _, _ in pols])
CONFIGS = {"mean": ("mean", 1, False, 0), "g1": ("sample x1 g1", 1, True, 1), "g2": ("sample x1 g2", 1, True, 2),
           "x4": ("sample x4", 4, True, 0)}
for label, reps, sample, gseed in (CONFIGS[c] for c in (sys.argv[2].split(",") if len(sys.argv) > 2 else CONFIGS)):
    start = StartStates(frames_to_obs(np.repeat(f0, reps, 0), np.repeat(s0, reps, 0)))
    S = []
    for name, _, pol in pols:
        ro = rollout(model, VLAEnginePolicy(pol, [t for t in texts for _ in range(reps)], 64), start, 150,
                     torch.Generator().manual_seed(gseed), deterministic=True, sample_model=sample,
                     judge=lambda o: o.success)
        S.append(((ro.judged > 0.5) & ro.valid).any(0).float().mean().item())
    S = np.array(S)
    print(f"{task} {label:14s} imagined {np.round(S*100).astype(int).tolist()} pearson {metrics.pearson(S, R):.2f} "
          f"spearman {metrics.spearman(S, R):.2f} mmrv {metrics.mmrv(S, R):.3f}", flush=True)
