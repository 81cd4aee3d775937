"""Issue 7, an experiment (not an option of the library yet): a video model with the hand mover, stepped with two
hands. The policy sees the frame and the proprioception the latent dynamics predict, which agree with each other;
the objects move with a second, physical hand that the hand mover drives by the same actions, and success is read
from those positions.

Why: with ``hand_mover=true`` the imagined hand follows a real one that pulls a drawer (open loop), but closed loop
the policy saw the hand mover's proprioception beside a frame from the latent dynamics, and on door-open every
policy that opens the door was imagined failing. Here the step is patched in this process only
(``VideoWorldModel.step``); the script is otherwise ``python -m eval.cli``, so ``rank.sh`` runs it in that one's place:

    LOOP=runs/manip/loop-ref RUN=".venv/bin/python assets/reports/manipulation/draws/rank_two_hands.py" \
        bash assets/reports/manipulation/draws/rank.sh MODEL OUT TASK ...
"""
import sys

import torch

from eval.cli import main
from worldmodels.contract import StepOut, check_batch
from worldmodels.video import PROPRIO, VideoWorldModel

original_init = VideoWorldModel.init_state


def init_state(self, start, generator=None, member=None, context=None):
    state = original_init(self, start, generator, member, context)
    return {**state, "hand": state["latent"][:, 2 * self.cfg.latent:2 * self.cfg.latent + PROPRIO].clone()}


@torch.no_grad()
def step(self, state, action, *, generator=None, deterministic=False):
    assert self.cfg.hand_mover and self.cfg.object_mover and self.cfg.success_on == "objects"
    check_batch("action", action, self.spec.act_dim, state["latent"].shape[0])
    L, lat = self.cfg.latent, state["latent"]
    _, out = self.dynamics.step({"obs": lat, "member": state["member"]}, action, generator=generator,
                                deterministic=deterministic)
    seen = out.obs[:, 2 * L:2 * L + PROPRIO].clamp(self.x_low[:PROPRIO], self.x_high[:PROPRIO])   # what the policy sees
    x_now = lat[:, 2 * L:]
    phys = torch.cat([state["hand"], x_now[:, PROPRIO:]], 1)                  # the physical hand, objects and goal
    hand = (state["hand"] + self.hand_move(phys, action)).clamp(self.x_low[:PROPRIO], self.x_high[:PROPRIO])
    obj = x_now[:, PROPRIO:PROPRIO + 3] + self.object_move(phys, action, hand[:, :3] - phys[:, :3])
    x = torch.cat([seen, obj, x_now[:, PROPRIO + 3:]], 1).clamp(self.x_low, self.x_high)
    z_next = out.obs[:, :L]
    obs = self.decode_obs(z_next, seen, state["first"])
    success = self.objects_success(torch.cat([hand, x[:, PROPRIO:]], 1))
    return {**state, "latent": self._latent_state(z_next, lat[:, :L], x), "hand": hand}, StepOut(
        obs, out.reward, torch.zeros_like(out.reward, dtype=torch.bool), out.uncertainty, members=out.members,
        success=success)


VideoWorldModel.init_state, VideoWorldModel.step = init_state, step
if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
