"""Frames per second of MetaWorld manipulation rendering, measured in one run (prints figures; not a test).

    MUJOCO_GL=egl python tests/bench/bench_render.py [--frames 300] [--size 64] [--task metaworld-push]

  * Reverie's path: a ``mujoco.Renderer`` with shadows, reflections and multisampling off,
    one fixed camera (``envs/manipulation.FrameRenderer``), render only;
  * the same with a simulator step before each frame (what collecting data costs);
  * gymnasium's ``render()`` (``render_mode="rgb_array"``) at the same size, render only.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402


def rate(fn, n: int) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--task", default="metaworld-push")
    args = ap.parse_args()
    import gymnasium as gym

    from envs.manipulation import ManipulationEnv, _patch_metaworld_for_mujoco4

    env = ManipulationEnv(args.task, image_size=args.size)
    env.reset(0)
    fast = rate(lambda: env.render_frame(env._unwrapped.data), args.frames)
    zero = np.zeros(4)
    stepped = rate(lambda: env.step(zero), args.frames)
    env.close()

    _patch_metaworld_for_mujoco4()
    slow_env = gym.make("Meta-World/MT1", env_name=env.task.env_name, render_mode="rgb_array",
                        width=args.size, height=args.size, camera_name="corner", disable_env_checker=True)
    slow_env.reset(seed=0)
    slow = rate(slow_env.render, max(20, args.frames // 10))
    slow_env.close()
    print(f"{args.task}, {args.size}x{args.size} RGB, one process:")
    print(f"  mujoco.Renderer, shadows/reflections/multisampling off   {fast:8.0f} frames/s")
    print(f"  the same with a simulator step per frame                 {stepped:8.0f} steps/s")
    print(f"  gymnasium render() (rgb_array)                           {slow:8.0f} frames/s   "
          f"({fast / slow:.1f}x slower than Reverie's path)")


if __name__ == "__main__":
    main()
