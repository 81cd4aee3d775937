"""The diffusion world model's sampling cost against the ensemble's, measured in one run
(prints figures; not a test).

    python tests/bench/bench_diffusion.py [--threads 2] [--batch 50000] [--repeats 3]

Hopper dimensions (11 obs + 3 act); untrained weights (speed does not depend on them):
  * the ensemble's all-member step (7 members of 4 x 200), the yardstick;
  * the diffusion model in step mode (5 denoisers, residual MLP 256 x 2 blocks) at 1, 3 and
    10 DDIM steps, and with the Euler and DPM-Solver samplers at 3 steps;
  * segment mode (H = 8, temporal convs 256 channels), driven by a deterministic policy so
    segments are served step by step, per imagined transition, at 1 and 3 steps;
all at the same batch, as imagined transitions per second and as a multiple of the
ensemble's time. The target: step mode at 3 steps within 10x of the ensemble.
"""

from __future__ import annotations

import argparse

import torch
from _timing import best_of

from agents.networks import TanhActor
from worldmodels.diffusion import DiffusionConfig, DiffusionWorldModel
from worldmodels.ensemble import EnsembleConfig, GaussianEnsemble
from worldmodels.rollout import ActorPolicy, StartStates, rollout

OBS, ACT = 11, 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--segment-rows", type=int, default=5_000, help="batch of the segment-mode rollouts")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B = args.batch
    obs, act = torch.randn(B, OBS), torch.rand(B, ACT) * 2 - 1
    g = torch.Generator().manual_seed(0)

    ens = GaussianEnsemble(OBS, ACT, EnsembleConfig(weight_decay=(0.0,) * 5), task="hopper")
    state = ens.init_state(obs, g)
    base = best_of(lambda: ens.step(state, act, generator=g), args.repeats)
    rows = [("ensemble, all 7 members (yardstick)", B / base, 1.0)]

    def step_rate(**cfg) -> float:
        model = DiffusionWorldModel(OBS, ACT, DiffusionConfig(**cfg), task="hopper")
        s = model.init_state(obs, g)
        return B / best_of(lambda: model.step(s, act, generator=g), args.repeats)

    for steps in (1, 3, 10):
        r = step_rate(sample_steps=steps)
        rows.append((f"diffusion step mode, DDIM {steps} step{'s' if steps > 1 else ''}", r, (B / base) / r))
    for sampler in ("euler", "dpm"):
        r = step_rate(sample_steps=3, sampler=sampler)
        rows.append((f"diffusion step mode, {sampler} 3 steps", r, (B / base) / r))

    n = args.segment_rows
    policy = ActorPolicy(TanhActor(OBS, ACT, (256, 256)))
    start = StartStates(obs[:n])
    ens_roll = best_of(lambda: rollout(ens, policy, start, 16, g, deterministic=True), 1)
    ens_rate = 16 * n / ens_roll
    rows.append((f"ensemble rollout, batch {n:,}, 16 steps (segment yardstick)", ens_rate, 1.0))
    for steps in (1, 3):
        model = DiffusionWorldModel(OBS, ACT, DiffusionConfig(mode="segment", sample_steps=steps), task="hopper")
        t = best_of(lambda: rollout(model, policy, start, 16, g, deterministic=True), 1)
        rows.append((f"diffusion segment mode (H=8, 1 planning pass), DDIM {steps}", 16 * n / t,
                     ens_rate / (16 * n / t)))

    print(f"imagined transitions per second, batch {B:,} (segment rows: {n:,}), {args.threads} threads:")
    for label, rate, slower in rows:
        print(f"  {label:<62} {rate:>11,.0f}/s   {slower:5.1f}x the ensemble's time")


if __name__ == "__main__":
    main()
