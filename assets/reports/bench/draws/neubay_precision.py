"""Would bfloat16 updates change what NEUBAY learns? Three copies of one agent, trained on the same windows.

    python assets/reports/bench/draws/neubay_precision.py [--dataset walker2d-medium-replay] [--updates 1500]

NEUBAY's critics are 10 heads of 256 x 256, which ``train.precision=bfloat16`` runs in bfloat16 (the GRUs and
every output layer stay float32, ``agents/neubay.py``). From one initialisation, on the same real windows of
the dataset (its ``configs/agent/neubay.yaml`` settings), this trains

  * A: float32, noise seed 0 (the actor's samples, REDQ's subsets);
  * B: bfloat16, noise seed 0 -- against A, the cost of the precision;
  * C: float32, noise seed 1 -- against A, the spread the training's own noise makes, the yardstick;

then compares the three on held-out windows: the critics' mean Q and the actor's deterministic action, and
each copy's last TD losses; last, each precision's update rate (one thread). Prints figures; writes nothing.
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from agents.data import TransitionSampler
from agents.networks import update_precision
from agents.neubay import NEUBAY
from agents.sequences import SequenceBuffer
from cells import composed
from envs.sources import load_source


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="walker2d-medium-replay")
    ap.add_argument("--updates", type=int, default=1500)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ds = load_source(args.dataset, size=100_000, seed=0)
    cfg = composed("neubay", args.dataset)[0]
    base = NEUBAY(ds.obs_dim, ds.act_dim, cfg, obs_stats=TransitionSampler(ds).obs_stats())
    real = SequenceBuffer.from_dataset(ds)
    g = torch.Generator().manual_seed(0)
    n = 256 // cfg.window
    windows = [real.windows(real.anchors(n, g), cfg.window, cfg.burn_in) for _ in range(args.updates)]
    held = real.windows(real.anchors(64, g), cfg.window, cfg.burn_in)

    runs = {"A float32": ("float32", 0), "B bfloat16": ("bfloat16", 0), "C float32, other noise": ("float32", 1)}
    agents, losses, rates = {}, {}, {}
    for label, (precision, seed) in runs.items():
        agent = copy.deepcopy(base)
        noise = torch.Generator().manual_seed(seed)
        t, last = time.perf_counter(), []
        for i, w in enumerate(windows):
            with update_precision(precision):
                m = agent.update(w, noise)
            if i >= len(windows) - 100:
                last.append(m["critic_loss"])
        rates[label] = len(windows) / (time.perf_counter() - t)
        agents[label], losses[label] = agent, sum(last) / len(last)
        print(f"{label:<24} {rates[label]:5.1f} updates/s; TD loss over the last 100 updates {losses[label]:.4f}",
              flush=True)

    def read(agent: NEUBAY) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            x = agent.inputs(held)
            trained = held["train"].flatten()
            steps = lambda t: t.flatten(0, 1)[trained]                 # noqa: E731
            q = agent.q(agent.critic, steps(agent.critic_encoder(x)[0][:-1]), steps(held["obs"]),
                        steps(held["actions"])).mean(0)
            h = steps(agent.actor_encoder(x)[0][:-1])
            a, _ = agent.actor(torch.cat([h, agent.norm(steps(held["obs"]))], -1), deterministic=True)
        return q, a

    qa, aa = read(agents["A float32"])
    print(f"\n{args.dataset}, {args.updates} updates on real windows from one initialisation; "
          f"{len(qa)} held-out steps, mean |Q| {qa.abs().mean():.3f}:")
    for label in ("B bfloat16", "C float32, other noise"):
        q, a = read(agents[label])
        print(f"  {label:<24} against A: mean |dQ| {(q - qa).abs().mean():.4f} "
              f"({(q - qa).abs().mean() / qa.abs().mean():.2%} of |Q|), mean |d action| {(a - aa).abs().mean():.4f}")
    print(f"update rate, bfloat16 against float32: {rates['B bfloat16'] / rates['A float32']:.2f}x")


if __name__ == "__main__":
    main()
