"""Updates per second with glibc's default malloc settings and with ``envs.allocator.retain_freed_memory``
(prints figures; not a test).

    python tests/bench/bench_allocator.py [--updates 60] [--rounds 3] [--only mobile,neubay]

Each learner's update runs in a child process per block (malloc settings belong to the process), the two
settings alternating block by block and the best block of each kept, so a shared machine's noise falls on
both alike. One torch thread, batch 256, the grid's networks: SAC (what MOPO updates), MOBILE (2 next-state
draws from each of 7 members through the critics, as the grid runs it), TD3+BC, IQL, RAVL (10 critics of
3x256, EDAC's term) and NEUBAY (8 windows of 32 steps, GRU 128, 10 REDQ heads); hopper dimensions. Then
the world models' fits, gradient steps per second: the 7-member ensemble of 4x200 on batches of 256, and
the video model's frame autoencoder (64x64 frames beside their reference frame, 32 channels, latent 64,
batches of 32, as ``eval.manipulation_loop`` fits it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from bench_learners import ACT, BATCH, OBS, batches, rate     # the same batches and timing as bench_learners

LEARNERS = ("sac", "mobile", "td3bc", "iql", "ravl", "neubay", "fit", "video")


def make(name: str):
    import torch

    from agents.iql import IQL, IQLConfig
    from agents.mobile import MOBILE, MOBILEConfig
    from agents.neubay import NEUBAY, NEUBAYConfig
    from agents.ravl import RAVL, RAVLConfig
    from agents.sac import SAC, SACConfig
    from agents.sequences import SequenceBuffer
    from agents.td3bc import TD3BC, TD3BCConfig
    from worldmodels.ensemble import EnsembleConfig, GaussianEnsemble

    g = torch.Generator().manual_seed(0)
    if name == "fit":
        return EnsembleFitStep(GaussianEnsemble(OBS, ACT, EnsembleConfig())), [torch.randn(BATCH, OBS + ACT)], g
    if name == "video":
        from worldmodels.video import FrameAutoencoder
        return AutoencoderStep(FrameAutoencoder(64, 64, 32, reference=True)), [torch.rand(2, 32, 3, 64, 64,
                                                                                         generator=g)], g
    if name == "neubay":
        agent, n = NEUBAY(OBS, ACT, NEUBAYConfig()), 20_000
        buf = SequenceBuffer(OBS, ACT, n)
        buf.add_episodes({"obs": torch.randn(n, OBS, generator=g), "actions": torch.rand(n, ACT, generator=g) * 2 - 1,
                          "rewards": torch.randn(n, generator=g), "next_obs": torch.randn(n, OBS, generator=g),
                          "terminated": torch.zeros(n, dtype=torch.bool)}, torch.arange(n) // 500)
        data = [buf.windows(buf.anchors(BATCH // 32, g), 32, 16) for _ in range(16)]
        return agent, data, g
    agent = {"sac": lambda: SAC(OBS, ACT, SACConfig()),
             "mobile": lambda: MOBILE(OBS, ACT, MOBILEConfig(num_samples=2),
                                      model=GaussianEnsemble(OBS, ACT, EnsembleConfig())),
             "td3bc": lambda: TD3BC(OBS, ACT, TD3BCConfig()),
             "iql": lambda: IQL(OBS, ACT, IQLConfig()),
             "ravl": lambda: RAVL(OBS, ACT, RAVLConfig(hidden=(256, 256, 256)))}[name]()
    return agent, batches(16, g), g


class EnsembleFitStep:
    """One gradient step of the ensemble's fit (``GaussianEnsemble.fit``'s loss on a batch per member)."""

    def __init__(self, model):
        import torch
        self.model, self.opt = model, torch.optim.AdamW(model.parameters(), lr=1e-3)

    def update(self, x, g) -> None:
        mean, logvar = self.model._trunk(x)
        loss = ((mean - 0.1).pow(2) * logvar.neg().exp() + logvar).mean(dim=(1, 2)).sum()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


class AutoencoderStep:
    """One gradient step of the video model's autoencoder (``VideoWorldModel.fit_episodes``' first stage)."""

    def __init__(self, ae):
        import torch
        self.ae, self.opt = ae, torch.optim.Adam(ae.parameters(), lr=1e-3)

    def update(self, frames, g) -> None:
        x, ref = frames
        loss = (self.ae.decode(self.ae.encode(x, ref), ref) - x).pow(2).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


def child(name: str, retain: bool, updates: int) -> None:
    if retain:
        from envs.allocator import retain_freed_memory
        assert retain_freed_memory(), "glibc did not take the malloc settings"
    import torch
    torch.set_num_threads(1)
    agent, data, g = make(name)
    rate(agent, data, 5, g)                                             # warm-up
    print(rate(agent, data, updates, g))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--updates", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=",".join(LEARNERS))
    ap.add_argument("--child", nargs=2, metavar=("LEARNER", "RETAIN"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child[0], args.child[1] == "1", args.updates)
    root = Path(__file__).resolve().parents[2]
    print(f"updates/s, one thread, batch {BATCH}, hopper dimensions, best of {args.rounds} blocks of "
          f"{args.updates} (a child process each):")
    print(f"  {'learner':<8} {'glibc default':>14} {'retained':>10} {'ratio':>7}")
    for name in args.only.split(","):
        best = {"0": 0.0, "1": 0.0}
        for _ in range(args.rounds):
            for retain in best:
                out = subprocess.run([sys.executable, __file__, "--updates", str(args.updates), "--child", name,
                                      retain], cwd=root, check=True, capture_output=True, text=True).stdout
                best[retain] = max(best[retain], float(out.split()[-1]))
        print(f"  {name:<8} {best['0']:>14.1f} {best['1']:>10.1f} {best['1'] / best['0']:>6.2f}x", flush=True)


if __name__ == "__main__":
    main()
