"""Behaviour policies: the file format, the shipped zoo, and batched evaluation.

A policy file is a ``torch.save`` of a plain dict (loadable with
``weights_only=True``)::

    {"format": "reverie.policy/1", "task": "hopper", "obs_dim": 11, "act_dim": 3,
     "hidden": [256, 256], "state_dict": {...}, "meta": {"step": 120000, ...}}

The zoo of a task is ``assets/policies/<task>/zoo.json`` plus its ``.pt`` files:
snapshots taken along one training run, from the untrained network ("random")
to the best one ("expert"), each with its return measured over many episodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from agents.networks import TanhActor
from assets import ASSETS_DIR
from envs.atomic_io import atomic_path
from envs.errors import ReverieError
from envs.simulator import SimulatorBatch
from envs.tasks import Task, get_task

POLICY_FORMAT = "reverie.policy/1"
ZOO_DIR = ASSETS_DIR / "policies"


def save_policy(path: str | Path, actor: TanhActor, task: str, meta: dict | None = None) -> None:
    blob = {
        "format": POLICY_FORMAT,
        "task": task,
        "obs_dim": actor.obs_dim,
        "act_dim": actor.act_dim,
        "hidden": list(actor.hidden),
        "state_dict": {k: v.detach().cpu().clone() for k, v in actor.state_dict().items()},
        "meta": dict(meta or {}),
    }
    with atomic_path(path, suffix=".pt") as tmp:
        torch.save(blob, tmp)


def load_policy(path: str | Path) -> tuple[TanhActor, dict]:
    """Load a policy file; returns the actor (eval mode, CPU) and its full record."""
    path = Path(path)
    if not path.is_file():
        raise ReverieError(f"{path}: policy file not found")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged file
        raise ReverieError(f"{path}: not a readable policy file ({type(exc).__name__})") from None
    if not isinstance(blob, dict) or blob.get("format") != POLICY_FORMAT:
        raise ReverieError(f"{path}: field 'format': expected '{POLICY_FORMAT}'")
    actor = TanhActor(int(blob["obs_dim"]), int(blob["act_dim"]), tuple(blob["hidden"]))
    actor.load_state_dict(blob["state_dict"])
    actor.eval()
    return actor, blob


@dataclass
class ZooEntry:
    name: str
    path: Path
    step: int
    return_mean: float
    return_std: float
    episodes: int
    roles: list[str] = field(default_factory=list)


@dataclass
class Zoo:
    task: str
    entries: list[ZooEntry]
    record: dict

    def role(self, role: str) -> ZooEntry:
        for e in self.entries:
            if role in e.roles:
                return e
        raise ReverieError(f"zoo of '{self.task}' has no '{role}' policy")

    def up_to(self, step: int) -> list[ZooEntry]:
        return [e for e in self.entries if e.step <= step]


def load_zoo(task: str | Task, root: Path | None = None) -> Zoo:
    t = task if isinstance(task, Task) else get_task(task)
    folder = (root or ZOO_DIR) / t.name
    manifest = folder / "zoo.json"
    if not manifest.is_file():
        raise ReverieError(
            f"{manifest}: no shipped behaviour policies for task '{t.name}' "
            f"(train them with `reverie dataset train-behavior task={t.name}`)")
    record = json.loads(manifest.read_text())
    entries = [
        ZooEntry(p["name"], folder / p["file"], int(p["step"]), float(p["return_mean"]),
                 float(p["return_std"]), int(p["episodes"]), list(p.get("roles", [])))
        for p in record["policies"]
    ]
    entries.sort(key=lambda e: e.step)
    return Zoo(t.name, entries, record)


@torch.no_grad()
def evaluate_actor(task: str | Task, actor: TanhActor, episodes: int, seed: int,
                   noise_std: float = 0.0) -> np.ndarray:
    """Returns of ``episodes`` full episodes, run side by side; deterministic for a seed."""
    t = task if isinstance(task, Task) else get_task(task)
    sim = SimulatorBatch(t, episodes)
    rng = np.random.default_rng(seed)
    obs = sim.reset(seed + np.arange(episodes))
    returns = np.zeros(episodes)
    alive = np.ones(episodes, dtype=bool)
    while alive.any():
        act = actor(torch.from_numpy(obs)).numpy()
        if noise_std > 0:
            act = np.clip(act + noise_std * rng.standard_normal(act.shape), -1.0, 1.0)
        # Finished rows keep stepping (cheap) but stop counting.
        obs, rew, term, trunc = sim.step(act)
        returns += rew * alive
        alive &= ~(term | trunc)
    sim.close()
    return returns
