"""Imagined-rollout and learner-update speed, measured in one run (prints figures; not a test).

    python tests/bench/bench_rollout.py [--threads 2] [--batch 50000] [--repeats 5]

Figures, all on this machine in this run:
  * fp32 matmul peak (a 2048^3 GEMM), the yardstick;
  * one all-member GaussianEnsemble step (hopper: 11 obs + 3 act, 7 members of 4 x 200,
    batch 50,000): transitions/s and % of that peak, for a plain eager per-member loop
    (the baseline), the batched path with and without row chunking, bf16 autocast and
    torch.compile;
  * the one-member-per-row path (``predict_member``) and its speed-up over all members, and a whole
    step that draws an elite per row and runs it alone (``drawn_only``, the learners' rounds where
    neither a penalty nor the uncertainty cut reads every member);
  * the library's defaults: fp32 in blocks of 1024 rows, and ``inference_dtype=bfloat16``;
  * MOPO updates/s (256 x 256, batch 256, with its rollouts and penalty amortised as in
    training) beside a plain SAC update.
"""

from __future__ import annotations

import argparse
import time

import torch
from _timing import best_of
from torch import nn

from agents.mopo import MOPO, MOPOConfig
from agents.sac import SAC
from agents.training import TrainConfig, Trainer
from envs.dataset import OfflineDataset
from worldmodels.ensemble import EnsembleConfig, GaussianEnsemble

OBS, ACT, E, HIDDEN = 11, 3, 7, (200, 200, 200, 200)


def matmul_peak(repeats: int) -> float:
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    return 2 * 2048**3 / best_of(lambda: a @ b, repeats) / 1e9


def flops_per_transition() -> float:
    dims = (OBS + ACT, *HIDDEN, 2 * (OBS + 1))
    return 2 * E * sum(a * b for a, b in zip(dims[:-1], dims[1:]))


class PerMemberLoop(nn.Module):
    """The straightforward way: E separate nn.Sequential MLPs called one after another."""

    def __init__(self):
        super().__init__()
        dims = (OBS + ACT, *HIDDEN)
        self.members = nn.ModuleList(
            nn.Sequential(*[m for a, b in zip(dims[:-1], dims[1:]) for m in (nn.Linear(a, b), nn.SiLU())],
                          nn.Linear(dims[-1], 2 * (OBS + 1))) for _ in range(E))

    @torch.no_grad()
    def forward(self, x):
        return torch.stack([m(x) for m in self.members])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--updates", type=int, default=300)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B = args.batch
    peak = matmul_peak(args.repeats)
    fpt = flops_per_transition()
    print(f"threads {args.threads}; fp32 matmul peak {peak:.1f} GFLOP/s; all-member step {fpt / 1e6:.2f} MFLOP per "
          f"transition, so 60% of peak is {0.6 * peak * 1e9 / fpt:,.0f} transitions/s")

    model = GaussianEnsemble(OBS, ACT, EnsembleConfig(members=E, hidden=HIDDEN), task="hopper")
    obs, act = torch.randn(B, OBS), torch.rand(B, ACT) * 2 - 1
    g = torch.Generator().manual_seed(0)
    state = model.init_state(obs, g)

    def rate(seconds: float) -> str:
        tps = B / seconds
        return f"{tps:>10,.0f} transitions/s  {100 * tps * fpt / (peak * 1e9):5.1f}% of peak"

    rows = {}
    loop = PerMemberLoop()
    x = torch.randn(B, OBS + ACT)
    rows["eager per-member loop (baseline)"] = best_of(lambda: loop(x), args.repeats)
    for chunk in (None, 8192, 1024):
        model.chunk_rows = chunk
        rows[f"batched step, chunk_rows={chunk}"] = best_of(lambda: model.step(state, act, generator=g), args.repeats)
    try:
        model.chunk_rows = None
        compiled = torch.compile(model.predict, dynamic=False)
        rows["batched predict, torch.compile"] = best_of(lambda: compiled(obs, act), args.repeats)
    except Exception as exc:  # a missing compiler is a finding, not a crash
        print(f"torch.compile unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
    model.chunk_rows = model.default_chunk_rows()
    all_member = best_of(lambda: model.step(state, act, generator=g), args.repeats)
    rows[f"library default: fp32, chunk_rows={model.chunk_rows}"] = all_member
    half = GaussianEnsemble(OBS, ACT, EnsembleConfig(members=E, hidden=HIDDEN, inference_dtype="bfloat16"),
                            task="hopper")
    half.load_state_dict(model.state_dict())
    rows[f"inference_dtype=bfloat16, chunk_rows={half.chunk_rows}"] = best_of(
        lambda: half.step(state, act, generator=g), args.repeats)
    member = torch.randint(0, E, (B,), generator=g)
    one = best_of(lambda: model.predict_member(obs, act, member), args.repeats)
    base = rows["eager per-member loop (baseline)"]
    print(f"\nall-member step, hopper dims, {E} members of {len(HIDDEN)}x{HIDDEN[0]}, batch {B:,}:")
    for name, sec in rows.items():
        print(f"  {name:<40} {rate(sec)}  ({base / sec:4.2f}x baseline)")
    drawn_state = model.init_state(obs, g, drawn_only=True)
    drawn = best_of(lambda: model.step(drawn_state, act, generator=g), args.repeats)
    print(f"\none member per row (predict_member): {B / one:,.0f} transitions/s, "
          f"{all_member / one:.1f}x the library's all-member step")
    print(f"an elite drawn per row each step, run alone (drawn_only: RAVL's and MOBILE's rounds): "
          f"{B / drawn:,.0f} transitions/s, {all_member / drawn:.1f}x the all-member step")

    # learner updates: MOPO inside its training loop (rollouts and penalty included) vs a bare SAC update
    n = 20_000
    data = OfflineDataset.from_arrays({
        "observations": torch.randn(n, OBS).numpy(), "actions": (torch.rand(n, ACT) * 2 - 1).numpy(),
        "rewards": torch.randn(n).numpy(), "next_observations": torch.randn(n, OBS).numpy(),
        "terminals": torch.zeros(n, dtype=torch.bool).numpy(), "timeouts": torch.zeros(n, dtype=torch.bool).numpy()},
        name="synthetic")
    batch = {"obs": torch.randn(256, OBS), "actions": torch.rand(256, ACT) * 2 - 1, "rewards": torch.randn(256),
             "next_obs": torch.randn(256, OBS), "terminated": torch.zeros(256, dtype=torch.bool)}
    sac = SAC(OBS, ACT)
    sac_sec = best_of(lambda: [sac.update(batch, g) for _ in range(args.updates)], 1) / args.updates
    cfg = TrainConfig(steps=10**9, batch_size=256, rollout_batch=50_000, rollout_every=1000, rollout_length=5,
                      eval_every=10**9, checkpoint_every=10**9, log_every=10**9)
    steps = max(args.updates, 1000)
    line = f"\nupdates, 256x256, batch 256: plain SAC {1 / sac_sec:,.0f}/s"
    for label, wm in (("fp32", model), ("bf16", half)):
        torch.manual_seed(0)
        trainer = Trainer(MOPO(OBS, ACT, MOPOConfig(penalty_coef=1.0), model=wm), data, cfg, model=wm)
        trainer.run(stop_after=1)      # the first rollout round, outside the timing
        t = time.perf_counter()
        trainer.run(stop_after=steps)  # includes one full rollout round (50,000 x 5) and its penalty
        mopo_sec = (time.perf_counter() - t) / steps
        line += f"; MOPO in its loop, {label} model {1 / mopo_sec:,.0f}/s ({sac_sec / mopo_sec:.2f}x SAC)"
    print(line + "\n(MOPO's loop: a rollout round of 50,000 starts x 5 steps every 1000 updates, penalty included)")


if __name__ == "__main__":
    main()
