"""Is a policy's over-called imagined success in the movers' physics, or in how the policy acts on imagined frames?

The policy runs closed loop in MetaWorld from RESETS resets (seed 20000 on). Its real actions are then replayed
open loop through MODEL's hand mover and object mover alone (positions only: no frames, so the policy cannot react
to the model), from the real state after the first step, the goal where it is and the positions kept in the
data's box, as ``VideoWorldModel.step`` keeps them. Printed at a few steps, averaged over the resets: the object's
distance from the goal, real and replayed; how far the replayed hand and object are from the real ones; and
success so far (real: MetaWorld's; replayed: the model's success head on the replayed positions).

If the replay over-calls success as the closed-loop ranking does, the movers carry the object where the real one
does not go; if it does not, the gap is in the policy's reaction to the imagined frames.

Usage (repository root): python assets/reports/manipulation/draws/replay_movers.py TASK MODEL POLICY [RESETS]
"""
import sys

import torch

torch.set_num_threads(1)
from loop_data import probe_args, real_rollouts
from worldmodels.video import PROPRIO

task, model_path, model, policy_path, seeds = probe_args(
    sys.argv[1:], "a model with hand_mover=true and object_mover=true",
    lambda m: m.cfg.hand_mover and m.cfg.object_mover)
n, H, checks = len(seeds), 150, (10, 25, 50, 75, 100, 149)
name, _, x_real, actions, success = real_rollouts(task, policy_path, seeds, H)
X, A = torch.from_numpy(x_real), torch.from_numpy(actions)
print(f"{task}, {name}, {n} resets from seed 20000, {H} steps, the real actions replayed through {model_path}'s "
      "hand and object movers")
print(" step | obj-goal real/replayed | replayed-real hand / obj | success real / replayed (any step so far)")
with torch.no_grad():
    x, hit = X[0].clone(), torch.zeros(n, dtype=torch.bool)
    for t in range(1, H):
        hand = x[:, :PROPRIO] + model.hand_move(x, A[t])
        obj = x[:, PROPRIO:PROPRIO + 3] + model.object_move(x, A[t], hand[:, :3] - x[:, :3])
        x = torch.cat([hand, obj, x[:, PROPRIO + 3:]], 1).clamp(model.x_low, model.x_high)
        hit |= model.objects_success(x) > 0.5
        if t in checks:
            real_goal = (X[t, :, 4:7] - X[t, :, 7:10]).norm(dim=1).mean()
            goal = (x[:, 4:7] - x[:, 7:10]).norm(dim=1).mean()
            d_hand = (x[:, :3] - X[t, :, :3]).norm(dim=1).mean()
            d_obj = (x[:, 4:7] - X[t, :, 4:7]).norm(dim=1).mean()
            print(f"  {t:3d} | {real_goal:.3f} / {goal:.3f} | {d_hand:.3f} / {d_obj:.3f} | "
                  f"{success[:t + 1].any(0).mean() * 100:3.0f}% / {hit.float().mean() * 100:3.0f}%", flush=True)
