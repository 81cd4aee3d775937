"""Fine-tuning a VLA policy on imagined rollouts in a video world model: filtered behaviour cloning.

Each round, the policy (with Gaussian exploration noise) acts from real start
frames inside the video world model; the model's success signal (its frame judge,
trained on real frames and MetaWorld's success labels) judges every imagined step; episodes it
judges successful (probability above ``threshold`` for the model's hold of steps in a row) are kept up to
a few steps past that point, and the policy is trained by BC on them together
with the real demonstrations (so imagined data adds to, and does not replace,
what was real).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from agents.vla import VLAPolicy, bc_tensors, train_bc
from envs.manipulation_data import Episode
from worldmodels.judge import run_lengths
from worldmodels.rollout import StartStates, rollout
from worldmodels.video import PROPRIO, frames_to_obs


class VLAEnginePolicy:
    """A VLA behind the rollout engine's ``Policy`` contract: observations are flattened frames plus
    proprioception; each row has its instruction."""

    def __init__(self, vla: VLAPolicy, texts: list[str], size: int, noise_std: float = 0.0):
        self.vla, self.texts, self.size, self.noise_std = vla, texts, size, noise_std

    def initial_state(self, batch_size: int) -> None:
        self.vla.reset(seed=0)
        return None

    def act(self, state, obs: Tensor, first, *, deterministic, generator=None, prev_reward=None):
        S = self.size
        frames = obs[:, :-PROPRIO].reshape(-1, S, S, 3)
        a = self.vla.select_action({"image": frames, "state": obs[:, -PROPRIO:], "instruction": self.texts})
        if not deterministic and self.noise_std > 0:
            a = (a + self.noise_std * torch.randn(a.shape, generator=generator)).clamp(-1, 1)
        return state, a


@dataclass
class FinetuneConfig:
    rounds: int = 2
    rollouts: int = 32          # imagined episodes per task per round
    horizon: int = 100
    noise_std: float = 0.2
    threshold: float = 0.5      # success probability that counts as success ...
    hold: int | None = None     # ... for this many steps in a row (None: the model's own, see success_hold)
    tail: int = 5               # steps kept after the first judged success
    bc_steps: int = 1500


@torch.no_grad()
def imagine(vla: VLAPolicy, model, starts: list[Episode], cfg: FinetuneConfig,
            generator: torch.Generator) -> tuple[list[Episode], float]:
    """Imagined episodes from the first frames of ``starts`` (one per row); the ones judged successful,
    and the share judged successful."""
    S = model.size
    obs0 = frames_to_obs(np.stack([e.images[0] for e in starts]), np.stack([e.states[0] for e in starts]))
    texts = [e.instruction for e in starts]
    vla.eval()
    ro = rollout(model, VLAEnginePolicy(vla, texts, S, cfg.noise_std), StartStates(obs0), cfg.horizon, generator,
                 deterministic=False, judge=lambda out: out.success)
    vla.train()
    p = ro.judged                                                                   # [T, B]
    hit = (p > cfg.threshold) & ro.valid
    hold = cfg.hold if cfg.hold is not None else model.success_hold()
    success = torch.from_numpy(run_lengths(hit) >= hold)                           # held long enough
    kept = []
    for b in range(len(starts)):
        steps = success[:, b].nonzero()
        if len(steps) == 0:
            continue
        end = min(int(steps[0]) + cfg.tail + 1, int(ro.lengths()[b]))
        frames = torch.cat([ro.obs[:1, b], ro.next_obs[:end, b]])                    # [end + 1, obs_dim]
        images = (frames[:, :-PROPRIO].reshape(-1, S, S, 3) * 255).round().clamp(0, 255).to(torch.uint8).numpy()
        kept.append(Episode(images, frames[:, -PROPRIO:].numpy().astype(np.float32),
                            ro.actions[:end, b].numpy().astype(np.float32), ro.rewards[:end, b].numpy(),
                            hit[:end, b].numpy(), texts[b], starts[b].seed))
    return kept, float(success.any(0).float().mean())


def finetune(vla: VLAPolicy, model, demos: dict[str, list[Episode]], cfg: FinetuneConfig,
             generator: torch.Generator, log=print) -> list[dict]:
    """``demos``: real episodes per task (their first frames are the start states). Returns per-round stats."""
    rng = np.random.default_rng(int(torch.randint(0, 2**31, (1,), generator=generator)))
    real = [e for eps in demos.values() for e in eps]
    history = []
    for r in range(1, cfg.rounds + 1):
        imagined, rates = [], {}
        for task, eps in demos.items():
            starts = [eps[i] for i in rng.integers(0, len(eps), cfg.rollouts)]
            kept, rate = imagine(vla, model, starts, cfg, generator)
            imagined += kept
            rates[task] = rate
        loss = train_bc(vla, bc_tensors(real + imagined, vla.cfg.chunk), cfg.bc_steps, generator)
        history.append({"round": r, "imagined_kept": len(imagined), "judged_success": rates, "bc_loss": loss})
        log(f"round {r}: kept {len(imagined)} imagined episodes judged successful; BC loss {loss:.4f}; "
            + ", ".join(f"{t.removeprefix('metaworld-')} {100 * v:.0f}%" for t, v in rates.items()))
    return history
