"""Long-horizon stability of imagined rollouts: how far can a held posterior sample be trusted?

For each horizon (5, 50, 200, 1000 by default) the same policy runs from the
same dataset states twice: in the world model, one ensemble member held per
row and cut where the model's uncertainty passes the largest it shows on its own
data, as NEUBAY cuts (``--cut-on``: the elites' disagreement by default, or the
held member's own std), and in the simulator, reset to those states through qpos/qvel. Reported per
horizon: the share of rows the uncertainty rule cut and the step at which it
cut them, rows that turned NaN or inf (these must be 0), the imagined and the
simulator return, and how well the imagined returns rank the rows.

    python -m eval.horizon_stability --dataset hopper-medium-replay --size 100000 \
        --policy medium --rows 200 --out assets/reports/horizon
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from pathlib import Path

import numpy as np
import torch

from agents.neubay import CUTS
from envs.allocator import retain_freed_memory
from envs.atomic_io import write_text
from eval.threads import add_threads_argument, resolve_threads
from envs.policies import load_policy, load_zoo
from worldmodels.rollout import ActorPolicy, SimulatorSource, StartStates, UncertaintyThreshold, rollout

HORIZONS = (5, 50, 200, 1000)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 3 or np.std(a) == 0 or np.std(b) == 0:
        return float("nan")
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


CUT_TEXT = {"disagreement": "the elites' disagreement", "member_std": "the held member's own std"}


def horizon_rows(model, ds, actor, horizons=HORIZONS, rows: int = 200, seed: int = 0,
                 quantile: float = 1.0, cut_on: str = "disagreement") -> list[dict]:
    """One row of figures per horizon; the start states, members and model noise are the same for all.
    ``cut_on`` is NEUBAY's: the elites' disagreement or the held member's own std (``member_std``)."""
    if cut_on not in CUTS:
        raise ValueError(f"cut_on: expected one of {', '.join(CUTS)}, got {cut_on!r}")
    g = torch.Generator().manual_seed(seed)
    obs_all, act_all = torch.from_numpy(ds.observations), torch.from_numpy(ds.actions)
    sample = torch.randperm(len(ds), generator=g)[:10_000]
    held = cut_on == "member_std"
    rule = UncertaintyThreshold.from_dataset(model, obs_all[sample], act_all[sample], quantile,
                                             generator=torch.Generator().manual_seed(seed), held_members=held)
    index = np.sort(torch.randperm(len(ds), generator=g)[:rows].numpy())
    start = StartStates.from_dataset(ds, index)
    member = model.sample_members(rows, g)
    policy = ActorPolicy(actor)
    out = []
    for h in horizons:
        t0 = time.perf_counter()
        imagined = rollout(model, policy, start, h, torch.Generator().manual_seed(seed + 1), truncate=rule,
                           deterministic=True, member=member, **({} if held else {"disagreement": True}))
        t1 = time.perf_counter()
        real = rollout(SimulatorSource(ds.task, rows), policy, start, h, torch.Generator(), deterministic=True)
        cut = imagined.truncated.any(0) & (imagined.lengths() < h) & ~imagined.terminated.any(0)
        cut_step = imagined.lengths()[cut].float()
        ri, rr = imagined.returns().numpy(), real.returns().numpy()
        out.append({
            "horizon": h, "rows": rows, "uncertainty_threshold": rule.threshold,
            "cut_share": float(cut.float().mean()),
            "cut_step_median": float(cut_step.median()) if len(cut_step) else float("nan"),
            "imagined_length_mean": float(imagined.lengths().float().mean()),
            "simulator_length_mean": float(real.lengths().float().mean()),
            "nonfinite_rows": imagined.nonfinite_rows,
            "imagined_return_mean": float(ri.mean()), "simulator_return_mean": float(rr.mean()),
            "return_error_mean": float(np.mean(ri - rr)), "return_abs_error_mean": float(np.mean(np.abs(ri - rr))),
            "rank_correlation": spearman(ri, rr),
            "imagined_transitions_per_second": float(imagined.lengths().sum()) / (t1 - t0)})
    return out


def write_report(rows: list[dict], out: Path, header: str) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    write_text(out / "horizon_stability.csv", buf.getvalue())
    lines = [f"# Long-horizon stability of imagined rollouts", "", header, "",
             "| horizon | cut by uncertainty | median cut step | NaN/inf rows | imagined length | simulator length "
             "| imagined return | simulator return | mean abs error | rank corr. |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['horizon']} | {100 * r['cut_share']:.0f}% | {r['cut_step_median']:.0f} | "
                     f"{r['nonfinite_rows']} | {r['imagined_length_mean']:.0f} | {r['simulator_length_mean']:.0f} | "
                     f"{r['imagined_return_mean']:.1f} | {r['simulator_return_mean']:.1f} | "
                     f"{r['return_abs_error_mean']:.1f} | {r['rank_correlation']:.2f} |")
    write_text(out / "horizon_stability.md", "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    from envs.builtin import cache_dir
    from envs.sources import load_source
    from worldmodels.registry import cached_world_model, fit_took, load_world_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="hopper-medium-replay")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--policy", default="medium", help="a role in the task's zoo (random, medium, expert)")
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--members", type=int, default=20)
    ap.add_argument("--elites", type=int, default=16)
    ap.add_argument("--max-epochs", type=int, default=200)
    ap.add_argument("--model", default=None, help="a saved world model (e.g. a NEUBAY run's world_model.pt) "
                    "instead of fitting one with --members/--elites/--max-epochs")
    ap.add_argument("--horizons", default=",".join(map(str, HORIZONS)))
    ap.add_argument("--cut-on", choices=CUTS, default="disagreement",
                    help="what the cut reads, as NEUBAY's agent.cut_on (default: the elites' disagreement)")
    ap.add_argument("--seed", type=int, default=0)
    add_threads_argument(ap)
    ap.add_argument("--out", default="assets/reports/horizon")
    args = ap.parse_args(argv)
    torch.set_num_threads(resolve_threads(args.threads))
    retain_freed_memory()
    ds = load_source(args.dataset, size=args.size)
    t0 = time.perf_counter()
    if args.model:
        model = load_world_model(args.model, ds)
        args.members, args.elites = model.cfg.members, model.cfg.elites
        print(f"world model: {args.model}", file=sys.stderr)
    else:
        values = {"name": "ensemble", "members": args.members, "elites": args.elites, "layer_norm": True,
                  "max_epochs": args.max_epochs}
        model, metrics, reused = cached_world_model(ds, values, args.seed, cache_dir() / "world_models")
        print(f"world model ({args.members} members, LayerNorm): {fit_took(reused, time.perf_counter() - t0, metrics)}",
              file=sys.stderr)
    actor, _ = load_policy(load_zoo(ds.task).role(args.policy).path)
    rows = horizon_rows(model, ds, actor, tuple(int(h) for h in args.horizons.split(",")), args.rows, args.seed,
                        cut_on=args.cut_on)
    command = "python -m eval.horizon_stability " + " ".join(argv if argv is not None else sys.argv[1:])
    header = (f"Dataset {ds.name} ({len(ds):,} transitions); policy: the zoo's {args.policy} snapshot, acting "
              f"deterministically; {args.rows} start states from the dataset; world model: {args.members}-member "
              f"{'LayerNorm ' if getattr(model.cfg, 'layer_norm', False) else ''}ensemble, one of its {args.elites} elites held per row; cut where "
              f"{CUT_TEXT[args.cut_on]} passes its maximum on the data. Seed {args.seed}. Command: `{command}`")
    write_report(rows, Path(args.out), header)
    print(Path(args.out, "horizon_stability.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
