"""Is the judge or the dynamics to blame? The video model's success head applied to REAL frames.

For each zoo policy, 30 real MetaWorld episodes (seeds 20000..20029, 150 steps, ended at success); every real
frame is encoded and judged by the model's success head as an imagined frame would be. Printed per policy: real
success, the share of episodes the head calls a success on real frames (some step above 0.5), and the share of
failed episodes it calls a success (false positives). If the head is right on real frames, the imagined
verdict's errors come from the dynamics; if it is wrong here too, the judge is to blame.

Usage (repository root): python assets/reports/manipulation/draws/judge.py TASK [MODEL]
"""
import sys
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
from envs.manipulation import ManipulationEnv, instruction
from eval.video_evaluate import load_vla_policies
from worldmodels.registry import load_model

task = sys.argv[1]
model = load_model(Path(sys.argv[2] if len(sys.argv) > 2 else "runs/manip/loop/video.pt"))
seeds = list(range(20000, 20030))
pols = load_vla_policies(["runs/manip/loop/zoo", "runs/manip/loop/vla_bc.pt", "runs/manip/loop/vla_finetuned.pt"])
source = sys.argv[2] if len(sys.argv) > 2 else "video.pt"
print(f"{task}: {len(seeds)} real episodes per policy, success head of {source}")
print(f"{'policy':24s} real  judged  false-pos  head max (failed eps, median)")

env = ManipulationEnv(f"metaworld-{task}", 64)
for name, _, pol in pols:
    wins, judged, peak = [], [], []
    for s in seeds:
        obs = env.reset(s)
        text = instruction(env.task, np.random.default_rng(s), "train")
        pol.reset(s)
        frames, states, ok = [obs["image"]], [obs["state"]], False
        for t in range(150):
            a = pol.select_action({**obs, "instruction": text})[0].numpy()
            obs, _, _, _, info = env.step(a)
            frames.append(obs["image"]); states.append(obs["state"])
            if info["success"]:
                ok = True
                break
        p = model.success_probability(model.encode_images(np.stack(frames)), torch.from_numpy(np.stack(states)))
        wins.append(ok); judged.append(bool((p[1:] > 0.5).any())); peak.append(float(p[1:].max()))
    wins, judged, peak = np.array(wins), np.array(judged), np.array(peak)
    fp = judged[~wins].mean() if (~wins).any() else float("nan")
    print(f"{name:24s} {wins.mean():4.0%}  {judged.mean():6.0%}  {fp:9.0%}  "
          f"{np.median(peak[~wins]) if (~wins).any() else float('nan'):.2f}", flush=True)
env.close()
