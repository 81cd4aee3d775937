"""What does a video model's success head on positions read? One policy's real episodes, the head applied to
the simulator's own positions as they are and with one part changed at a time.

The policy runs closed loop in MetaWorld from RESETS resets (seed 20000 on) for 60 steps; printed: the head's
rate of calling an episode successful by step 25 and by step 60 (above 0.5 at some step), real MetaWorld's,
and the head's with the hand and gripper frozen at their first step, with the gripper alone frozen, and with
the object put back where it started.

Usage (repository root): python assets/reports/manipulation/draws/probe_head.py TASK MODEL POLICY [RESETS]
"""
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
from loop_data import real_rollouts
from worldmodels.registry import load_model

task, model_path, policy_path = sys.argv[1:4]
n, H = (int(sys.argv[4]) if len(sys.argv) > 4 else 5), 60
model = load_model(Path(model_path))
name, _, x, _, success = real_rollouts(task, policy_path, list(range(20000, 20000 + n)), H)
X, real = torch.from_numpy(x).transpose(0, 1), success.T              # [n, H, 10], [n, H]


def said(x: torch.Tensor) -> str:
    with torch.no_grad():
        p = model.objects_success(x.reshape(-1, 10)).reshape(n, H)
    return f"{(p[:, :25] > 0.5).any(1).float().mean():4.0%} / {(p > 0.5).any(1).float().mean():4.0%}"


frozen_hand, frozen_grip, object_back = X.clone(), X.clone(), X.clone()
frozen_hand[:, :, :4] = X[:, :1, :4]
frozen_grip[:, :, 3] = X[:, :1, 3]
object_back[:, :, 4:7] = X[:, :1, 4:7]
print(f"{task}, {name}, {n} resets from seed 20000, {H} steps; head of {model_path} "
      f"(success_inputs={model.cfg.success_inputs}); success by step 25 / by step 60")
print(f"  real (MetaWorld)                 {real[:, :25].any(1).mean():4.0%} / {real.any(1).mean():4.0%}")
print(f"  head on the real positions       {said(X)}")
print(f"  hand and gripper frozen          {said(frozen_hand)}")
print(f"  gripper frozen                   {said(frozen_grip)}")
print(f"  object back where it started     {said(object_back)}")
print(f"  handle-to-goal distance at step 60: {(X[:, -1, 4:7] - X[:, -1, 7:10]).norm(dim=1).mean():.3f} m")
