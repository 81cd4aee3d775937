"""NeoRL's ``.npz`` layout: ``obs``, ``next_obs``, ``action``, ``reward``, ``done``
and ``index`` (the start row of each trajectory).

``done`` is the task's terminal flag. A trajectory that ends at the next start
index without ``done`` was cut by the time limit, so its last row becomes a
timeout.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from envs.atomic_io import atomic_path
from envs.dataset import OfflineDataset
from envs.errors import DatasetError
from envs.tasks import task_from_name

NEORL_KEYS = ("obs", "next_obs", "action", "reward", "done", "index")


def read_neorl(path: str | Path, task: str | None = None) -> OfflineDataset:
    path = Path(path)
    if not path.is_file():
        raise DatasetError("file not found", source=str(path))
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in NEORL_KEYS if k not in z.files]
            if missing:
                raise DatasetError(f"missing (a NeoRL file holds {', '.join(NEORL_KEYS)})",
                                   source=str(path), field=missing[0])
            raw = {k: z[k] for k in NEORL_KEYS}
    except DatasetError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise DatasetError(f"not a readable .npz file ({type(exc).__name__}: {exc})", source=str(path)) from None
    n = len(raw["obs"])
    starts = np.asarray(raw["index"]).astype(np.int64).ravel()
    if len(starts) == 0 or starts[0] != 0 or (np.diff(starts) <= 0).any() or starts[-1] >= max(n, 1):
        raise DatasetError(f"expected increasing trajectory start rows beginning at 0 and below {n}",
                           source=str(path), field="index")
    done = np.asarray(raw["done"])
    if done.ndim == 2 and done.shape[1] == 1:
        done = done[:, 0]
    if done.shape != (n,):
        raise DatasetError(f"expected shape ({n},), got {np.shape(raw['done'])}", source=str(path), field="done")
    if done.dtype != bool and not (np.issubdtype(done.dtype, np.number) and np.isin(done, (0, 1)).all()):
        raise DatasetError("expected 0/1 terminal flags", source=str(path), field="done")
    terminals = done.astype(bool)
    timeouts = np.zeros(n, dtype=bool)
    ends = np.append(starts[1:], n) - 1
    timeouts[ends] = ~terminals[ends]
    arrays = {"observations": raw["obs"], "actions": raw["action"], "rewards": raw["reward"],
              "next_observations": raw["next_obs"], "terminals": terminals, "timeouts": timeouts}
    t = task_from_name(path.stem)
    return OfflineDataset.from_arrays(arrays, source=str(path), task=task or (t.name if t else None),
                                      name=path.stem)


def write_neorl(ds: OfflineDataset, path: str | Path) -> Path:
    path = Path(path)
    with atomic_path(path, suffix=".npz") as tmp:
        with tmp.open("wb") as f:
            np.savez_compressed(f, obs=ds.observations, next_obs=ds.next_observations, action=ds.actions,
                                reward=ds.rewards[:, None], done=ds.terminals[:, None].astype(np.float32),
                                index=ds.episode_starts())
    return path
