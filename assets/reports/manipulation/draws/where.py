"""Where does an imagined episode go wrong? One policy, both sides, positions step by step.

The policy runs from RESETS simulator resets (seed 20000 on) in MetaWorld and in a video model with the objects'
positions in its latent state (``objects=true``), the model at its mean. Printed at a few steps, averaged over
the resets: the hand's and the object's distance from the goal, real and imagined, how far the imagined hand
and object are from the real ones, how often the imagined hand is at the edge of the box the model's data fill
(``x_low``/``x_high``, where the model clamps it; logs before session 20 counted beyond 3 spreads of the head's
normaliser instead), and the
success signal (real: MetaWorld's; imagined: the model's head; and the head on the real positions).

Usage (repository root): python assets/reports/manipulation/draws/where.py TASK MODEL POLICY [RESETS]
"""
import sys

import numpy as np
import torch

torch.set_num_threads(1)
from agents.vla_finetune import VLAEnginePolicy
from eval.video_evaluate import load_vla_policies
from loop_data import probe_args, real_rollouts
from worldmodels.video import frames_to_obs

task, model_path, model, policy_path, seeds = probe_args(sys.argv[1:], "a model with objects=true",
                                                        lambda m: m.cfg.objects)
n, H, checks = len(seeds), 150, (10, 25, 50, 75, 100, 150)
# real side: the policy closed loop in MetaWorld, positions recorded
name, (frames0, states0, texts), real_x, _, real_s = real_rollouts(task, policy_path, seeds, H)

# imagined side
_, _, vla = load_vla_policies([policy_path])[0]
L = model.cfg.latent
g = torch.Generator().manual_seed(0)
policy = VLAEnginePolicy(vla, texts, 64)
policy.initial_state(n)
obs = frames_to_obs(frames0, states0)
state = model.init_state(obs, g)
imag_x, imag_s = np.zeros((H, n, 10), np.float32), np.zeros((H, n))
for t in range(H):
    _, a = policy.act(None, obs, None, deterministic=True)
    state, out = model.step(state, a, generator=g, deterministic=True)
    obs = out.obs
    imag_x[t] = state["latent"][:, 2 * L:].numpy()
    imag_s[t] = out.success.numpy()
with torch.no_grad():
    head_real = model.objects_success(torch.from_numpy(real_x.reshape(-1, 10))).reshape(H, n).numpy()
lo, hi = model.x_low, model.x_high               # the box the model's data fill (imagined x is clamped to it)

def goal_dist(x, part):
    return np.linalg.norm((x[..., :3] if part == "hand" else x[..., 4:7]) - x[..., 7:10], axis=-1)

print(f"{task}, {name}, {n} resets from seed 20000, {H} steps, model {model_path} at its mean")
print(" step | hand-goal real/imag | obj-goal real/imag | imag-real hand / obj | hand at the data box's edge | "
      "success real / head(real x) / imagined (any step so far)")
for c in checks:
    t = c - 1
    out_box = ((imag_x[t, :, :3] <= lo[:3].numpy()) | (imag_x[t, :, :3] >= hi[:3].numpy())).any(1).mean()
    print(f" {c:4d} | {goal_dist(real_x[t], 'hand').mean():.3f} / {goal_dist(imag_x[t], 'hand').mean():.3f} | "
          f"{goal_dist(real_x[t], 'obj').mean():.3f} / {goal_dist(imag_x[t], 'obj').mean():.3f} | "
          f"{np.linalg.norm(imag_x[t, :, :3] - real_x[t, :, :3], axis=1).mean():.3f} / "
          f"{np.linalg.norm(imag_x[t, :, 4:7] - real_x[t, :, 4:7], axis=1).mean():.3f} | {out_box:4.0%} | "
          f"{real_s[:c].any(0).mean():4.0%} / {(head_real[:c] > 0.5).any(0).mean():4.0%} / "
          f"{(imag_s[:c] > 0.5).any(0).mean():4.0%}")
