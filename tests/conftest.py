"""Shared fixtures. Every test runs against a private cache so nothing touches ~/.cache."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REVERIE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("D4RL_DATASET_DIR", str(tmp_path / "d4rl"))
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    torch.set_num_threads(1)


def make_zoo(root, task_name: str = "hopper", n: int = 4, episodes: int = 2):
    """A small real zoo: untrained actors of different seeds, their returns measured."""
    from agents.networks import TanhActor
    from envs.policies import evaluate_actor, save_policy
    from envs.tasks import get_task

    task = get_task(task_name)
    folder = root / task.name
    records = []
    for k in range(n):
        torch.manual_seed(k)
        actor = TanhActor(task.obs_dim, task.act_dim, (32, 32))
        r = evaluate_actor(task, actor, episodes, seed=10 + k)
        save_policy(folder / f"step_{k:07d}.pt", actor, task.name, {"step": k})
        records.append({"name": f"step_{k:07d}", "file": f"step_{k:07d}.pt", "step": k * 1000,
                        "return_mean": float(r.mean()), "return_std": float(r.std()), "episodes": episodes,
                        "roles": []})
    records[0]["roles"].append("random")
    records[1]["roles"].append("medium")
    records[-1]["roles"].append("expert")
    (folder / "zoo.json").write_text(json.dumps({"task": task.name, "policies": records}))
    return root


@pytest.fixture
def tiny_zoo(tmp_path):
    return make_zoo(tmp_path / "zoo")


def transitions(n: int = 10, obs_dim: int = 3, act_dim: int = 2, ends=(3, 7), terminal_at=(3,), seed=0) -> dict:
    """Hand-made, continuous transitions: episodes end after rows in `ends`; those in
    `terminal_at` by a terminal, the rest by a timeout."""
    rng = np.random.default_rng(seed)
    states = rng.standard_normal((n + 1, obs_dim)).astype(np.float32)
    obs, nxt = states[:-1].copy(), states[1:].copy()
    terminals, timeouts = np.zeros(n, bool), np.zeros(n, bool)
    for e in ends:
        (terminals if e in terminal_at else timeouts)[e] = True
    return {"observations": obs, "actions": rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
            "rewards": np.arange(n, dtype=np.float32), "next_observations": nxt,
            "terminals": terminals, "timeouts": timeouts}
