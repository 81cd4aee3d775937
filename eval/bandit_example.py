"""Why Bayesian: a two-armed bandit whose good arm the data seldom tried.

The behaviour pulled arm 0 (mean 0.5) almost always and arm 1 (mean 0.9) a
handful of times. One world model (an ensemble) is fitted to those data; on
it, a conservative learner (MOPO, penalising the ensemble's disagreement) and
the Bayesian learner (NEUBAY: one member held per imagined episode, a
history-dependent agent, no penalty) are trained with the same budget, then
both play the true bandit. Conservatism sees arm 1's uncertainty as risk and
stays with the well-covered arm; acting over the posterior, NEUBAY finds the
better one.

    python -m eval.bandit_example [--seeds 0,1,2] [--steps 3000] [--out assets/reports/bandit]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from agents.mopo import MOPO, MOPOConfig
from agents.neubay import NEUBAY, NEUBAYConfig
from agents.training import LearnerPolicy, TrainConfig, Trainer
from envs.atomic_io import write_text
from eval.threads import add_threads_argument, resolve_threads
from envs.bandit import BanditSpec, bandit_dataset, play
from worldmodels.ensemble import EnsembleConfig, GaussianEnsemble

SPEC = BanditSpec()


def fit_model(ds, spec: BanditSpec, seed: int) -> GaussianEnsemble:
    torch.manual_seed(seed)
    model = GaussianEnsemble(1, 1, EnsembleConfig(members=7, elites=5, hidden=(64, 64), weight_decay=(1e-5,) * 3,
                                                  batch_size=64, patience=10), terminated=spec.terminated)
    t = torch.from_numpy
    model.fit(t(ds.observations), t(ds.actions), t(ds.next_observations), t(ds.rewards),
              torch.Generator().manual_seed(seed))
    return model


def train(learner, ds, model, spec: BanditSpec, steps: int, seed: int, real_ratio: float) -> None:
    cfg = TrainConfig(steps=steps, batch_size=256, rollout_length=spec.horizon, rollout_batch=1000,
                      rollout_every=250, model_retain=4, real_ratio=real_ratio, eval_every=10**9,
                      checkpoint_every=10**9, log_every=10**9, seed=seed)
    getattr(learner, "trainer_class", Trainer)(learner, ds, cfg, model=model).run()


def run_seed(seed: int, steps: int, spec: BanditSpec = SPEC, penalty_coef: float = 3.0) -> dict[str, dict]:
    ds = bandit_dataset(spec, seed=seed)
    model = fit_model(ds, spec, seed)
    torch.manual_seed(seed)
    mopo = MOPO(1, 1, MOPOConfig(hidden=(64, 64), penalty="disagreement", penalty_coef=penalty_coef,
                                 actor_lr=3e-4), model=model)
    train(mopo, ds, model, spec, steps, seed, real_ratio=0.05)
    torch.manual_seed(seed)
    neubay = NEUBAY(1, 1, NEUBAYConfig(hidden=(64, 64), rnn_hidden=32, window=spec.horizon, burn_in=0, warmup=0),
                    model=model)
    train(neubay, ds, model, spec, steps, seed, real_ratio=0.05)
    behaviour = {"reward_per_pull": float(ds.rewards.mean()), "good_arm_share": float((ds.actions >= 0).mean())}
    return {"behaviour (data)": behaviour,
            "MOPO (conservative)": play(LearnerPolicy(mopo), spec, seed=1000 + seed),
            "NEUBAY (Bayesian)": play(neubay.policy(), spec, seed=1000 + seed)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=3000)
    add_threads_argument(ap)
    ap.add_argument("--out", default=None, help="write bandit.md here (e.g. assets/reports/bandit)")
    args = ap.parse_args(argv)
    torch.set_num_threads(resolve_threads(args.threads))
    seeds = [int(s) for s in args.seeds.split(",")]
    t0 = time.perf_counter()
    results = {s: run_seed(s, args.steps) for s in seeds}
    names = list(results[seeds[0]])
    lines = ["# Two-armed bandit: conservative against Bayesian", "",
             f"Arm means {SPEC.means}, reward noise {SPEC.noise}, {SPEC.horizon} pulls per episode; data: 200 "
             f"episodes, arm 1 pulled with probability 0.005. Each learner: {args.steps:,} updates on a 7-member "
             f"ensemble fitted to the data; played over 200 episodes of the true bandit. Seeds {args.seeds}. "
             f"Command: `python -m eval.bandit_example --seeds {args.seeds} --steps {args.steps}` "
             f"({time.perf_counter() - t0:.0f} s).", "",
             "| seed | " + " | ".join(f"{n}: reward/pull, arm-1 share" for n in names) + " |",
             "|---:|" + "---:|" * len(names)]
    for s in seeds:
        lines.append(f"| {s} | " + " | ".join(f"{results[s][n]['reward_per_pull']:.2f}, "
                                              f"{100 * results[s][n]['good_arm_share']:.0f}%" for n in names) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        write_text(Path(args.out) / "bandit.md", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
