"""Where would a NEUBAY cell's imagined episodes end under each uncertainty cut, and do they show the fall?

    python assets/reports/bench/draws/neubay_cuts.py CELL [--episodes 200] [--weights checkpoint.pt] [--seed 0]

NEUBAY cuts an imagined episode where the model's uncertainty passes the largest it shows on the data
(agents/neubay.py), read as the elites' disagreement (the largest distance of an elite's mean next state from
theirs; ``agent.cut_on=disagreement``, the default, as the authors' `unc_type: epi_mean`) or as the held member's
own predicted std of the next state (``cut_on=member_std``, the default before session 45). This draw rolls the cell's last policy as its training does
(an anchor's real history read first, one member held per episode) but without a cut, up to the rollout length,
and then asks where each rule, at the cell's quantile of what the model shows on 10,000 of the data's rows, would
have cut each episode: the kept lengths, and how many episodes would still have ended in a fall the model
predicts (a terminal the critics learn from) rather than a cut (bootstrapped from the critics). Prints figures;
writes nothing.
"""

from __future__ import annotations


import numpy as np
import torch

from agents.sequences import SequenceBuffer
from cells import cell_parser, open_cell
from worldmodels.rollout import StartStates, UncertaintyThreshold, rollout


def disagreement(model, obs: torch.Tensor, act: torch.Tensor, batch: int = 20_000) -> torch.Tensor:
    """The elites' disagreement for ``[M]`` state-action pairs: the uncertainty the model's every-member step
    reports (its mean prediction; no member is drawn for the score)."""
    out = [model.step(model.init_state(obs[i:i + batch]), act[i:i + batch], deterministic=True,
                      generator=torch.Generator())[1].uncertainty for i in range(0, len(obs), batch)]
    return torch.cat(out) if out else torch.zeros(0)


def first_above(score: torch.Tensor, valid: torch.Tensor, threshold: float) -> torch.Tensor:
    """``[B]``: each episode's first step whose score passes ``threshold`` (its length where none does): the
    number of steps a cut there keeps."""
    above = (score > threshold) & valid
    length = valid.sum(0)
    return torch.where(above.any(0), above.float().argmax(0), length)


def main() -> None:
    ap = cell_parser(__doc__)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    name, _, loop, ds, model, learner, loaded = open_cell(args)
    if name != "neubay":
        raise SystemExit(f"neubay_cuts.py: {args.cell}: a {name} cell (expected a neubay cell)")
    quantile = 1.0 if loop.truncate_quantile is None else float(loop.truncate_quantile)

    # the thresholds as the trainer measures them (Trainer.make_threshold): the quantile over up to 10,000 data rows
    obs_d, act_d = torch.from_numpy(ds.observations).float(), torch.from_numpy(ds.actions).float()
    held_cut, spread_cut = (UncertaintyThreshold.on_data(model, obs_d, act_d, quantile, seed=loop.seed,
                                                         held_members=held).threshold for held in (True, False))

    g = torch.Generator().manual_seed(args.seed)
    real = SequenceBuffer.from_dataset(ds)
    anchor = real.anchors(args.episodes, g)
    with torch.no_grad():
        warm = learner.warm_up(real, anchor)
        member = model.sample_members(args.episodes, g)
        ro = rollout(model, learner.policy(warm), StartStates(real.data["obs"][anchor]), loop.rollout_length, g,
                     member=member)
        spread = torch.zeros_like(ro.uncertainty)
        spread[ro.valid] = disagreement(model, ro.obs[ro.valid], ro.actions[ro.valid])

    length = ro.valid.sum(0)                                      # uncut: to a fall, the horizon or a NaN guard
    fell = (ro.terminated & ro.valid).any(0)
    print(f"{args.cell} ({loaded}): neubay on {ds.name}, {args.episodes} imagined episodes from the data's states "
          f"(their real history read first), one member held each, no cut, up to {loop.rollout_length} steps")
    print(f"uncut: lengths median {int(length.median())}, mean {length.float().mean():.1f}; {int(fell.sum())} end "
          f"in a fall the model predicts (median step {int(length[fell].median()) if fell.any() else 0}), "
          f"{ro.nonfinite_rows} in NaN/inf")
    print(f"cuts at quantile {quantile} of 10,000 data rows: the held member's std {held_cut:.3f}, "
          f"the elites' disagreement {spread_cut:.3f}; this cell trained with cut_on={learner.cfg.cut_on}")
    print("| cut on | cut rows | kept length: median | mean | episodes still ending in a fall | share of kept steps "
          "past the other rule's cut |")
    print("|---|---:|---:|---:|---:|---:|")
    cuts = {"held member's std (member_std)": first_above(ro.uncertainty, ro.valid, held_cut),
            "elites' disagreement (disagreement)": first_above(spread, ro.valid, spread_cut)}
    for (label, at), other in zip(cuts.items(), reversed(list(cuts.values()))):
        cut = at < length                                          # the step that passes is dropped, as in rollout()
        kept = torch.minimum(at, length)
        still_falls = fell & ~cut
        beyond = (kept - torch.minimum(kept, other)).sum() / kept.sum()
        print(f"| {label} | {int(cut.sum())} | {int(kept.median())} | {kept.float().mean():.1f} | "
              f"{int(still_falls.sum())} of {int(fell.sum())} | {beyond:.2f} |")
    both = np.corrcoef(ro.uncertainty[ro.valid].numpy(), spread[ro.valid].numpy())[0, 1]
    print(f"correlation of the two scores over the {int(ro.valid.sum())} uncut steps: {both:.2f}")


if __name__ == "__main__":
    main()
