"""Exploration on push only (the selection task): imagined side of the video evaluation at several cuts,
against the real success already measured on the same resets (runs/manip/rank/push/results.json)."""
import json, sys
import numpy as np, torch
torch.set_num_threads(1)
from envs.manipulation_data import read_manipulation
from eval import metrics
from eval.video_evaluate import load_vla_policies, reset_starts, dataset_uncertainty, trusted_steps
from worldmodels.registry import load_model
from worldmodels.rollout import StartStates, rollout
from worldmodels.video import frames_to_obs
from agents.vla_finetune import VLAEnginePolicy
from pathlib import Path

task = sys.argv[1]
real = {p["policy"]: p["real_score"] / 100 for p in json.load(open(f"runs/manip/rank/{task}/results.json"))["policies"]}
model = load_model(Path("runs/manip/loop/video.pt"))
eps = read_manipulation(Path.home() / f".cache/reverie/datasets/metaworld-{task}-expert-50ep-64px-corner-seed0.hdf5").episodes
pols = load_vla_policies(["runs/manip/loop/zoo", "runs/manip/loop/vla_bc.pt", "runs/manip/loop/vla_finetuned.pt"])
seeds = list(range(20000, 20050))
f0, s0, texts = reset_starts(f"metaworld-{task}", seeds, 64)
start = StartStates(frames_to_obs(f0, s0))
qs = (None, 1.0, 0.99, 0.95, 0.9, 0.75, 0.5)
for signal in ("inverse_dynamics", "disagreement"):
    model.cfg.uncertainty = signal
    unc_d = dataset_uncertainty(model, eps, torch.Generator().manual_seed(0))
    cuts = {q: (None if q is None else float(np.quantile(unc_d, q))) for q in qs}
    res = {q: [] for q in qs}; lens = {q: [] for q in qs}
    for name, _, pol in pols:
        ro = rollout(model, VLAEnginePolicy(pol, texts, 64), start, 150, torch.Generator().manual_seed(0),
                     deterministic=True, judge=lambda o: o.success)
        hit = ((ro.judged > 0.5) & ro.valid).numpy(); unc = ro.uncertainty.numpy()
        for q in qs:
            tr = trusted_steps(unc, cuts[q])
            res[q].append((hit & (np.arange(len(hit))[:, None] < tr[None])).any(0).mean()); lens[q].append(tr.mean())
    R = np.array([real[n] for n, _, _ in pols])
    for q in qs:
        S = np.array(res[q])
        print(f"{task} {signal:17s} q={q} cut={cuts[q]} imagined {np.round(S*100).astype(int).tolist()} "
              f"trusted {np.round(lens[q]).astype(int).tolist()} pearson {metrics.pearson(S, R):.2f} "
              f"spearman {metrics.spearman(S, R):.2f} mmrv {metrics.mmrv(S, R):.3f}", flush=True)
print("real", np.round(R*100).astype(int).tolist())
