"""``SuccessJudge``: a success classifier that reads frames only, trained on real frames.

The video model's first judge was a head on its latent state and the proprioception. On real
frames it called nearly every failed push a success: the hand's position (proprioception) already
says "at the goal" when the gripper gets there without the puck. This judge sees no
proprioception. It reads two frames, the episode's first (where the object and the goal marker
start, sharp, since an imagined episode starts from a real frame) and the current one, and it
learns from real episodes of every quality level, so the arm moving with purpose and missing
(the ``poor`` and ``misdirected`` levels) is among its negatives. Positives are rare (a few frames
at the end of successful episodes), so each batch is drawn half from positive frames, and the
probabilities are corrected back to the data's odds (``prior_logit``).

Imagined frames are the autoencoder's decodings, smoother than real ones; ``fit_judge`` can show
the judge each frame through ``view`` (e.g. the model's reconstruction) half the time, so it reads
both. ``judge_rates`` gives the true and false positive rates on held-out episodes, per frame and per
episode. An episode counts as a success when the judge holds past the threshold for ``hold``
consecutive frames (``held``): in these tasks success lasts once reached (the puck stays on the goal,
the drawer open), while a judge's slip on one odd frame does not, so a longer hold trades a little
recall on late successes for fewer false verdicts. The fit picks the hold that separates the
held-out episodes best (``choose_hold``) and the judge keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn


class SuccessJudge(nn.Module):
    """``(first frame, frame) -> success``; frames ``[N, 3, S, S]`` in [0, 1]."""

    def __init__(self, size: int, channels: int = 32):
        super().__init__()
        c, s8 = channels, size // 8
        # the log prior odds of a successful frame in the training data: batches are half successful frames,
        # so the net's logit is the balanced one, and ``probability`` adds this back (calibrated odds)
        self.register_buffer("prior_logit", torch.zeros(()))
        # frames in a row past the threshold that make an episode a success (chosen at fit: ``choose_hold``)
        self.register_buffer("hold", torch.ones((), dtype=torch.long))
        self.net = nn.Sequential(nn.Conv2d(6, c, 4, 2, 1), nn.SiLU(), nn.Conv2d(c, 2 * c, 4, 2, 1), nn.SiLU(),
                                 nn.Conv2d(2 * c, 2 * c, 4, 2, 1), nn.SiLU(), nn.Flatten(),
                                 nn.Linear(2 * c * s8 * s8, 256), nn.SiLU(), nn.Linear(256, 1))

    def forward(self, first: Tensor, frame: Tensor) -> Tensor:
        """The balanced logit (as trained: even odds a priori)."""
        return self.net(torch.cat([first, frame], 1)).squeeze(1)

    @torch.no_grad()
    def probability(self, first: Tensor, frame: Tensor, batch: int = 1024) -> Tensor:
        """The calibrated probability that ``frame`` shows success, ``[N]``."""
        return torch.cat([torch.sigmoid(self(first[i:i + batch], frame[i:i + batch]) + self.prior_logit)
                          for i in range(0, len(frame), batch)])


def chw(images: np.ndarray | Tensor) -> Tensor:
    """uint8 frames ``[N, S, S, 3]`` -> float ``[N, 3, S, S]`` in [0, 1]."""
    return torch.as_tensor(images).permute(0, 3, 1, 2).float() / 255.0


def first_frame_index(episodes: Sequence) -> Tensor:
    """For the frames of ``episodes`` laid end to end, the index of each one's episode's first frame."""
    starts = np.cumsum([0] + [len(e.images) for e in episodes])[:-1]
    return torch.cat([torch.full((len(e.images),), int(s)) for e, s in zip(episodes, starts)])


HOLDS = (1, 3, 5, 10, 20)


def run_lengths(hit: np.ndarray | Tensor) -> np.ndarray:
    """``hit [T, ...]`` -> ``[T, ...]``: how many hits in a row end at each step."""
    hit = np.asarray(hit, dtype=bool)
    runs, run = np.zeros(hit.shape, int), np.zeros(hit.shape[1:], int)
    for t, h in enumerate(hit):
        run = runs[t] = np.where(h, run + 1, 0)
    return runs


def held(hit: np.ndarray | Tensor, hold: int) -> np.ndarray:
    """``hit [T, ...]`` (a frame past the threshold) -> ``[...]``: some run of ``hold`` hits in a row."""
    return (run_lengths(hit) >= hold).any(0)


def episode_key(rate: str, suffix: str, hold: int) -> str:
    """``judge_rates``' name of an episode rate (``tpr``/``fpr``) for frames ``suffix`` and a hold."""
    return f"episode_{rate}{suffix}" + ("" if hold == 1 else f"_hold{hold}")


def choose_hold(rates: dict[str, float], suffix: str = "") -> int:
    """The hold whose episode verdicts separate held-out successes from failures best (true minus false
    positive rate, Youden's J; the shorter hold on a tie), from ``judge_rates(..., holds=HOLDS)``."""
    scores = {k: rates[episode_key("tpr", suffix, k)] - rates[episode_key("fpr", suffix, k)] for k in HOLDS
              if episode_key("tpr", suffix, k) in rates}
    scores = {k: v for k, v in scores.items() if np.isfinite(v)}
    return min(scores, key=lambda k: (-round(scores[k], 9), k)) if scores else 1


def split_episodes(episodes: Sequence, holdout_ratio: float, generator: torch.Generator) -> tuple[list, list]:
    """(held-out, training) episodes: whole episodes held out, at least one where there are two or more."""
    order = torch.randperm(len(episodes), generator=generator).tolist()
    n_hold = max(1, int(round(len(episodes) * holdout_ratio))) if len(episodes) > 1 else 0
    return [episodes[i] for i in order[:n_hold]], [episodes[i] for i in order[n_hold:]]


def fit_judge(judge: SuccessJudge, train: Sequence, generator: torch.Generator, steps: int = 3000,
              batch: int = 64, lr: float = 1e-3, view: Callable[[Tensor, Tensor], Tensor] | None = None,
              progress=None) -> None:
    """Train ``judge`` on real episodes (``envs.manipulation_data.Episode``: frame ``t + 1`` is labelled with
    ``success[t]``, the first frame never a success), each batch half successful frames; with ``view``, half
    the rows are seen through it (``view(frames, first frames)``, e.g. the world model's reconstruction)."""
    images = torch.cat([torch.from_numpy(e.images) for e in train])                # uint8 [N, S, S, 3]
    first = first_frame_index(train)
    label = torch.cat([torch.cat([torch.zeros(1), torch.from_numpy(e.success).float()]) for e in train])
    pos, neg = torch.nonzero(label > 0).squeeze(1), torch.nonzero(label == 0).squeeze(1)
    if len(pos) == 0 or len(neg) == 0:
        raise ValueError("success judge: the episodes need both successful and unsuccessful frames")

    rate = len(pos) / len(label)
    judge.prior_logit.fill_(float(np.log(rate / (1 - rate))))
    opt = torch.optim.Adam(judge.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    half = batch // 2
    for step in range(1, steps + 1):
        rows = torch.cat([pos[torch.randint(len(pos), (half,), generator=generator)],
                          neg[torch.randint(len(neg), (batch - half,), generator=generator)]])
        f0, f = chw(images[first[rows]]), chw(images[rows])
        if view is not None:                         # half the rows seen as the model would show them
            shown = torch.rand(len(rows), generator=generator) < 0.5
            if shown.any():
                f = f.clone()
                f[shown] = view(f[shown], f0[shown])
        loss = F.binary_cross_entropy_with_logits(judge(f0, f), label[rows])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        schedule.step()
        if progress and (step % 500 == 0 or step == steps):
            progress("success judge", step, loss.item())


@torch.no_grad()
def judge_rates(judge: SuccessJudge, episodes: Sequence, threshold: float = 0.5,
                view: Callable[[Tensor, Tensor], Tensor] | None = None,
                holds: Sequence[int] = ()) -> dict[str, float]:
    """True and false positive rates per frame and per episode (success: some frame past ``threshold``);
    with ``view``, also on the viewed frames (``*_shown``); for each of ``holds``, the episode rates when a
    success needs that many frames in a row (``episode_tpr_hold5``, ``episode_fpr_shown_hold5``, ...)."""
    out: dict[str, float] = {"holdout_episodes": float(len(episodes))}
    for suffix, fn in [("", None)] + ([("_shown", view)] if view is not None else []):
        frame_hit, frame_lab, ep_run, ep_lab = [], [], [], []
        for e in episodes:
            f = chw(e.images)
            first = chw(e.images[:1]).expand(len(f), -1, -1, -1)
            if fn is not None:
                f = torch.cat([fn(f[i:i + 512], first[i:i + 512]) for i in range(0, len(f), 512)])
            p = judge.probability(first, f)[1:]
            frame_hit.append(p > threshold)
            frame_lab.append(torch.from_numpy(e.success))
            ep_run.append(int(run_lengths(frame_hit[-1].numpy()).max(initial=0)))   # its longest run of hits
            ep_lab.append(bool(e.success.any()))
        hit, lab = torch.cat(frame_hit), torch.cat(frame_lab)
        el = np.array(ep_lab)
        out.update({f"frame_tpr{suffix}": float(hit[lab].float().mean()) if lab.any() else float("nan"),
                    f"frame_fpr{suffix}": float(hit[~lab].float().mean()) if (~lab).any() else float("nan")})
        for k in sorted({1, *holds}):
            eh = np.array(ep_run) >= k
            out[episode_key("tpr", suffix, k)] = float(eh[el].mean()) if el.any() else float("nan")
            out[episode_key("fpr", suffix, k)] = float(eh[~el].mean()) if (~el).any() else float("nan")
    return out
