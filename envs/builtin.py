"""Built-in D4RL-style datasets, made on this machine from the shipped behaviour policies.

``make_builtin("hopper", "medium-replay")`` rolls the policies of
``assets/policies/hopper`` in a batch of simulators and writes a D4RL HDF5
file (with ``infos/qpos``/``infos/qvel``) into the cache, beside a manifest
(sha256, task, level, policies, seed, Reverie and MuJoCo versions). A second
call with the same arguments reuses the file once its sha256 checks out.
Making is deterministic for a (seed, num_envs) pair.

How each level is made (our choices, after D4RL's):

- ``random``: the untrained network of the training run (D4RL's "random" is a
  randomly initialised policy too), with Gaussian action noise sigma=0.3.
- ``medium``: the zoo's "medium" snapshot, about a third of the expert's return
  as in D4RL, with noise sigma=0.1.
- ``expert``: the best snapshot, noise sigma=0.1.
- ``medium-replay``: D4RL keeps the replay buffer of training up to the
  medium policy. We emulate it with equal shares from every zoo snapshot up to
  and including "medium", with training's exploration noise sigma=0.1.
- ``medium-expert``: half "medium", half "expert" data, as D4RL concatenates them.

Default sizes are D4RL's (1M transitions; medium-replay 402k/202k/302k for
hopper/halfcheetah/walker2d; medium-expert 2M). Episodes end at the task's
terminal or at the 1000-step limit (``timeouts``); the one episode cut to fit
the size ends in a timeout too.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from importlib import metadata as _metadata
from pathlib import Path
from typing import NamedTuple

import mujoco
import numpy as np
import torch

from envs.atomic_io import write_json
from envs.d4rl_format import read_d4rl, write_d4rl
from envs.dataset import OfflineDataset
from envs.errors import ReverieError
from envs.policies import Zoo, ZooEntry, load_policy, load_zoo
from envs.simulator import SimulatorBatch
from envs.tasks import LEVELS, TASKS, Task, get_task

DATASET_FORMAT = "reverie.dataset/1"


def reverie_version() -> str:
    try:
        return _metadata.version("reverie")
    except _metadata.PackageNotFoundError:
        return "0+unknown"


def cache_dir() -> Path:
    """Reverie's cache: ``$REVERIE_CACHE`` or ``~/.cache/reverie``."""
    return Path(os.environ.get("REVERIE_CACHE", Path.home() / ".cache" / "reverie")).expanduser()


def parse_builtin_name(name: str) -> tuple[str, str] | None:
    """``hopper-medium-replay`` -> ("hopper", "medium-replay"); None if not a built-in name."""
    task, _, level = str(name).partition("-")
    if task in TASKS and level in LEVELS:
        return task, level
    return None


def check_level(level: str) -> str:
    if level not in LEVELS:
        raise ReverieError(f"unknown level '{level}': expected one of {', '.join(LEVELS)}")
    return level


@dataclass(frozen=True)
class Share:
    entry: ZooEntry
    transitions: int
    noise_std: float


def recipe(zoo: Zoo, level: str, size: int) -> list[Share]:
    """Which policies make ``size`` transitions of ``level``, and how much each."""
    check_level(level)

    def split(entries: list[ZooEntry], noise: float) -> list[Share]:
        base, extra = divmod(size, len(entries))
        return [Share(e, base + (i < extra), noise) for i, e in enumerate(entries)]

    if level == "random":
        return split([zoo.role("random")], 0.3)
    if level == "medium":
        return split([zoo.role("medium")], 0.1)
    if level == "expert":
        return split([zoo.role("expert")], 0.1)
    if level == "medium-expert":
        return split([zoo.role("medium"), zoo.role("expert")], 0.1)
    return split(zoo.up_to(zoo.role("medium").step), 0.1)  # medium-replay


@torch.no_grad()
def collect(task: Task, actor, transitions: int, noise_std: float, seed: int, num_envs: int = 16) -> OfflineDataset:
    """Roll ``actor`` (plus Gaussian noise) in ``num_envs`` simulators until complete
    episodes hold ``transitions`` rows; the last episode is cut to fit (a timeout)."""
    sim = SimulatorBatch(task, num_envs)
    rng = np.random.default_rng(seed)
    T = task.max_episode_steps
    buf = {k: np.zeros((num_envs, T, d), dt) for k, d, dt in (
        ("observations", task.obs_dim, np.float32), ("actions", task.act_dim, np.float32),
        ("next_observations", task.obs_dim, np.float32), ("qpos", task.nq, np.float64),
        ("qvel", task.nv, np.float64))}
    rew = np.zeros((num_envs, T), np.float32)
    episodes: list[dict] = []
    next_seed = iter(range(seed * 1_000_003, seed * 1_000_003 + 10**9))
    obs = sim.reset([next(next_seed) for _ in range(num_envs)])
    t = np.zeros(num_envs, dtype=np.int64)
    have = 0
    rows = np.arange(num_envs)
    while have < transitions:
        qpos, qvel = sim.state()
        act = actor(torch.from_numpy(obs)).numpy()
        if noise_std > 0:
            act = np.clip(act + noise_std * rng.standard_normal(act.shape), -1.0, 1.0).astype(np.float32)
        next_obs, r, term, trunc = sim.step(act)
        buf["observations"][rows, t] = obs
        buf["actions"][rows, t] = act
        buf["next_observations"][rows, t] = next_obs
        buf["qpos"][rows, t], buf["qvel"][rows, t] = qpos, qvel
        rew[rows, t] = r
        t += 1
        obs = next_obs
        for i in np.flatnonzero(term | trunc):
            n = int(t[i])
            ep = {k: v[i, :n].copy() for k, v in buf.items()}
            ep["rewards"] = rew[i, :n].copy()
            ep["terminals"] = np.zeros(n, bool)
            ep["timeouts"] = np.zeros(n, bool)
            (ep["terminals"] if term[i] else ep["timeouts"])[-1] = True
            episodes.append(ep)
            have += n
            obs[i] = sim.reset(next(next_seed), index=[i])[0]
            t[i] = 0
            if have >= transitions:
                break
    sim.close()
    arrays = {k: np.concatenate([ep[k] for ep in episodes])[:transitions] for k in episodes[0]}
    if not (arrays["terminals"][-1] or arrays["timeouts"][-1]):
        arrays["timeouts"][-1] = True  # the episode cut to fit the size
    return OfflineDataset(**arrays, task=task.name).validate()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Made(NamedTuple):
    path: Path
    manifest: dict
    reused: bool


def builtin_path(task: str, level: str, size: int, seed: int, root: Path | None = None) -> Path:
    return (root or cache_dir()) / "datasets" / f"{task}-{level}-seed{seed}-n{size}.hdf5"


CHUNK = 100_000  # transitions per independently seeded piece of work


@dataclass(frozen=True)
class Chunk:
    """One piece of a dataset: ``transitions`` rows from one policy, with its own seed.
    The split depends only on the recipe and the size, never on the worker count,
    so a dataset is the same whether one process or several make it."""

    task: str
    policy: str
    transitions: int
    noise_std: float
    seed: int
    num_envs: int


def _collect_chunk(chunk: Chunk) -> OfflineDataset:
    actor, _ = load_policy(chunk.policy)
    return collect(get_task(chunk.task), actor, chunk.transitions, chunk.noise_std, chunk.seed, chunk.num_envs)


def plan_chunks(task: Task, shares: list[Share], seed: int, num_envs: int, chunk: int = CHUNK) -> list[Chunk]:
    chunks = []
    for k, share in enumerate(shares):
        whole, rest = divmod(share.transitions, chunk)
        pieces = [chunk] * whole + ([rest] if rest else [])
        for j, n in enumerate(pieces):
            chunks.append(Chunk(task.name, str(share.entry.path), n, share.noise_std,
                                seed=(seed * 1000 + k) * 1000 + j, num_envs=num_envs))
    return chunks


def make_builtin(task_name: str, level: str, size: int | None = None, seed: int = 0, num_envs: int = 16,
                 force: bool = False, cache_root: Path | None = None, zoo_root: Path | None = None,
                 progress: bool = False, workers: int = 1, chunk: int = CHUNK) -> "Made":
    """Make (or reuse from the cache) a built-in dataset; returns its path, its
    manifest, and whether a cached copy was reused. ``workers`` processes share
    the chunks; the result does not depend on how many there are."""
    task = get_task(task_name)
    check_level(level)
    size = int(size or task.default_size(level))
    if size < 1:
        raise ReverieError(f"option 'size': expected a positive number of transitions, got {size}")
    if num_envs < 1:
        raise ReverieError(f"option 'num_envs': expected a positive integer, got {num_envs}")
    if workers < 1:
        raise ReverieError(f"option 'workers': expected a positive integer, got {workers}")
    zoo = load_zoo(task, zoo_root)
    shares = recipe(zoo, level, size)
    path = builtin_path(task.name, level, size, seed, cache_root)
    manifest_path = path.with_suffix(".json")
    wanted = {
        "format": DATASET_FORMAT, "name": f"{task.name}-{level}", "task": task.name, "level": level,
        "size": size, "seed": seed, "num_envs": num_envs, "chunk": chunk,
        "policies": [{"name": s.entry.name, "step": s.entry.step, "return_mean": s.entry.return_mean,
                      "transitions": s.transitions, "noise_std": s.noise_std,
                      "sha256": _sha256(s.entry.path)} for s in shares],
        "mujoco": mujoco.__version__,
    }
    if not force and path.is_file() and manifest_path.is_file():
        old = json.loads(manifest_path.read_text())
        if all(old.get(k) == v for k, v in wanted.items()) and old.get("sha256") == _sha256(path):
            return Made(path, old, True)

    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=size, desc=f"making {task.name}-{level}", unit="tr", mininterval=1, leave=False)
    started = _dt.datetime.now(_dt.timezone.utc)
    chunks = plan_chunks(task, shares, seed, num_envs, chunk)
    parts = []
    with contextlib.ExitStack() as stack:
        run = map
        if workers > 1 and len(chunks) > 1:
            # One torch thread per worker process: the workers already fill the cores.
            run = stack.enter_context(ProcessPoolExecutor(
                max_workers=min(workers, len(chunks)), mp_context=mp.get_context("spawn"),
                initializer=torch.set_num_threads, initargs=(1,))).map
        for c, part in zip(chunks, run(_collect_chunk, chunks)):
            parts.append(part)
            if bar is not None:
                bar.update(c.transitions)
    if bar is not None:
        bar.close()
    seconds = (_dt.datetime.now(_dt.timezone.utc) - started).total_seconds()
    ds = parts[0] if len(parts) == 1 else OfflineDataset.concatenate(parts, task=task.name)
    ds.name = wanted["name"]
    ds.metadata = {"level": level, "seed": seed}
    write_d4rl(ds, path)
    manifest = {**wanted, "sha256": _sha256(path), "reverie": reverie_version(),
                "created": started.isoformat(timespec="seconds"), "seconds": round(seconds, 2),
                "transitions_per_second": round(size / max(seconds, 1e-9), 1),
                "episodes": int(len(ds.episode_ends())), "file": path.name}
    write_json(manifest_path, manifest)
    return Made(path, manifest, False)


def load_builtin(name: str, size: int | None = None, seed: int = 0, progress: bool = False,
                 workers: int = 1) -> OfflineDataset:
    parsed = parse_builtin_name(name)
    if parsed is None:
        raise ReverieError(f"unknown built-in dataset '{name}': expected TASK-LEVEL with TASK in "
                           f"{', '.join(TASKS)} and LEVEL in {', '.join(LEVELS)}")
    path, manifest, _ = make_builtin(*parsed, size=size, seed=seed, progress=progress, workers=workers)
    ds = read_d4rl(path, task=parsed[0])
    ds.name = name
    ds.metadata = manifest
    return ds
