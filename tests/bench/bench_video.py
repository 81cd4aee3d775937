"""The video world model's frame autoencoder and latent dynamics fitted in float32 and in bfloat16
(``world_model.precision``): each fit's seconds, the autoencoder's frames per second, and what each holds out
and reconstructs (prints figures; not a test).

    python tests/bench/bench_video.py [--data FILE ...] [--test FILE ...] [--epochs 1] [--dynamics-epochs 5]
                                      [--rounds 2]

``VideoWorldModel.fit_autoencoder`` and then ``fit_latent`` themselves run, in a child process per fit (one thread, freed memory retained)
with the same seed, the two precisions alternating round by round and the fastest of each kept, so a shared
machine's noise falls on both alike. ``--data``: manipulation datasets (``reverie dataset make``) to fit on;
without, 8 expert push episodes are made here (a minute). ``--test``: datasets whose frames both fits then
reconstruct, with the error on all pixels and on those that move (more than 0.05 from the episode's first frame:
the arm, the objects), where a coarser arithmetic would show first. ``--frames N`` projects the fit's hours for
N frames at the default 8 epochs (the manipulation loop's world model sees about 100,000).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

PRECISIONS = ("float32", "bfloat16")


def episodes_of(files: list[str]):
    from envs.manipulation_data import read_manipulation
    return [e for f in files for e in read_manipulation(f).episodes]


def child(args) -> None:
    from envs.allocator import retain_freed_memory
    retain_freed_memory()
    import time

    import torch

    from worldmodels.judge import chw, first_frame_index
    from worldmodels.video import VideoConfig, VideoWorldModel

    torch.set_num_threads(1)
    episodes = episodes_of(args.data)
    size = episodes[0].images.shape[1]
    cfg = VideoConfig(ae_epochs=args.epochs, max_epochs=args.dynamics_epochs, patience=args.dynamics_epochs,
                      head_epochs=1, precision=args.child)
    model = VideoWorldModel(3 * size * size + 4, 4, cfg)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    t = time.perf_counter()
    recon = model.fit_autoencoder(episodes, g)
    seconds = time.perf_counter() - t
    out = {"seconds": seconds, "frames": sum(len(e.images) for e in episodes) * 0.95 * args.epochs,
           "held_out": recon}
    if args.dynamics_epochs:
        t = time.perf_counter()
        fit = model.fit_latent(episodes, g)
        out.update(dynamics_seconds=time.perf_counter() - t, dynamics_held_out=fit["holdout_mse_mean"])
    if args.test:
        test = episodes_of(args.test)
        frames = torch.cat([chw(torch.from_numpy(e.images)) for e in test])
        first = frames[first_frame_index(test)]
        shown = torch.cat([model.reconstruct(frames[i:i + 512], first[i:i + 512]) for i in range(0, len(frames), 512)])
        err = (shown - frames).pow(2)
        moving = ((frames - first).abs().amax(1, keepdim=True) > 0.05).expand_as(err)
        out.update(test=err.mean().item(), moving=err[moving].mean().item())
    print(json.dumps(out))


def dynamics_updates_per_second(precision: str, updates: int = 100) -> float:
    """Updates a second of the video model's latent dynamics alone (5 members of 3x256 over two 64-d latents and the
    proprioception, batches of 256), the loss ``GaussianEnsemble.fit`` takes, with ``_trunk``'s ``precision``."""
    import time

    import torch

    from worldmodels.video import VideoConfig, VideoWorldModel

    torch.set_num_threads(1)
    model = VideoWorldModel(3 * 64 * 64 + 4, 4, VideoConfig()).dynamics
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(model.cfg.members, 256, model.spec.obs_dim + model.spec.act_dim, generator=g)
    y = torch.randn(model.cfg.members, 256, model.out_dim, generator=g)

    def update():
        mean, logvar = model._trunk(x, precision)
        loss = ((mean - y).pow(2) * torch.exp(-logvar) + logvar).mean(dim=(1, 2)).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(10):
        update()
    t = time.perf_counter()
    for _ in range(updates):
        update()
    return updates / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", nargs="+", default=[])
    ap.add_argument("--test", nargs="+", default=[])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--dynamics-epochs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--child", choices=PRECISIONS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from agents.networks import native_bfloat16

    with tempfile.TemporaryDirectory() as tmp:
        if not args.data:
            from envs.manipulation_data import make_manipulation
            args.data = [str(make_manipulation("metaworld-push", "expert", 8, 0, Path(tmp))[0])]
        best: dict[str, dict] = {}
        for _ in range(args.rounds):
            for precision in PRECISIONS:
                cmd = [sys.executable, __file__, "--child", precision, "--epochs", str(args.epochs),
                       "--dynamics-epochs", str(args.dynamics_epochs), "--data",
                       *args.data, *(["--test", *args.test] if args.test else [])]
                run = json.loads(subprocess.run(cmd, cwd=root, check=True, capture_output=True,
                                                text=True).stdout.splitlines()[-1])
                if precision not in best or run["seconds"] < best[precision]["seconds"]:
                    best[precision] = run
    print(f"frame autoencoder (64 latents, 32 channels, batches of 32), {args.epochs} epoch(s) over "
          f"{best['float32']['frames'] / args.epochs:,.0f} frames, one thread, fastest of {args.rounds} "
          f"(this CPU {'has' if native_bfloat16() else 'lacks'} native bfloat16):")
    print(f"  {'precision':<10} {'seconds':>8} {'frames/s':>9} {'8 epochs of ' + format(args.frames, ',') + ' (h)':>24}"
          f" {'held-out MSE':>13}" + (f" {'test MSE':>9} {'moving px':>10}" if args.test else ""))
    for precision, run in best.items():
        rate = run["frames"] / run["seconds"]
        line = (f"  {precision:<10} {run['seconds']:>8.0f} {rate:>9.0f} {8 * args.frames / rate / 3600:>24.2f}"
                f" {run['held_out']:>13.6f}")
        if args.test:
            line += f" {run['test']:>9.6f} {run['moving']:>10.5f}"
        print(line)
    print(f"  bfloat16 / float32 speed: {best['float32']['seconds'] / best['bfloat16']['seconds']:.2f}x")
    if args.dynamics_epochs:
        print(f"then the latent dynamics (5 members of 3x256 over two latents and the proprioception, the data and a "
              f"noised copy), {args.dynamics_epochs} epochs, and the inverse and success heads one epoch:")
        print(f"  {'precision':<10} {'seconds':>8} {'held-out MSE':>13}")
        for precision, run in best.items():
            print(f"  {precision:<10} {run['dynamics_seconds']:>8.0f} {run['dynamics_held_out']:>13.4f}")
        print(f"  bfloat16 / float32 speed: "
              f"{best['float32']['dynamics_seconds'] / best['bfloat16']['dynamics_seconds']:.2f}x")
    rates = {p: max(dynamics_updates_per_second(p) for _ in range(args.rounds)) for p in PRECISIONS}
    print(f"the latent dynamics' update alone (batches of 256), updates/s: float32 {rates['float32']:.1f}, bfloat16 "
          f"{rates['bfloat16']:.1f} ({rates['bfloat16'] / rates['float32']:.2f}x)")


if __name__ == "__main__":
    main()
