"""D4RL's HDF5 layout, read and written with h5py (no ``d4rl`` import).

Layout: top-level datasets ``observations``, ``actions``, ``rewards``,
``next_observations``, ``terminals``, ``timeouts``, and simulator states under
``infos/qpos`` and ``infos/qvel``; metadata as ``metadata/*`` datasets and
file attributes. Reverie reads the stored ``next_observations`` (D4RL's own
``qlearning_dataset`` shifts ``observations`` instead, which is wrong across
timeouts) and refuses a file without them rather than inventing them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import numpy as np

from envs.atomic_io import atomic_path
from envs.dataset import FLAG_FIELDS, FLOAT_FIELDS, OfflineDataset
from envs.errors import DatasetError
from envs.tasks import task_from_name

D4RL_VERSION_SUFFIXES = ("-v0", "-v1", "-v2")


def d4rl_cache_dir() -> Path:
    """D4RL's local dataset folder: ``$D4RL_DATASET_DIR`` or ``~/.d4rl/datasets``."""
    return Path(os.environ.get("D4RL_DATASET_DIR", Path.home() / ".d4rl" / "datasets")).expanduser()


def d4rl_file_for_name(name: str) -> Path:
    """Where D4RL caches the dataset called ``name`` (e.g. ``hopper-medium-replay-v2``
    is stored as ``hopper_medium_replay-v2.hdf5``, the basename of its URL)."""
    stem, _, version = name.rpartition("-")
    folder = d4rl_cache_dir()
    candidates = [folder / f"{stem.replace('-', '_')}-{version}.hdf5", folder / f"{name}.hdf5"]
    for c in candidates:
        if c.is_file():
            return c
    return candidates[0]


def is_d4rl_name(name: str) -> bool:
    return name.endswith(D4RL_VERSION_SUFFIXES) and "/" not in name


def _open(path: Path) -> h5py.File:
    if not path.exists():
        raise DatasetError("file not found", source=str(path))
    if not h5py.is_hdf5(path):
        raise DatasetError("not an HDF5 file (bad signature)", source=str(path))
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise DatasetError(f"cannot open HDF5 file, truncated or corrupt ({exc.args[0] if exc.args else exc})",
                           source=str(path)) from None


def _read(f: h5py.File, key: str, path: Path) -> np.ndarray | None:
    if key not in f:
        return None
    obj = f[key]
    if not isinstance(obj, h5py.Dataset):
        raise DatasetError("expected an HDF5 dataset, found a group", source=str(path), field=key)
    try:
        return obj[()]
    except (OSError, RuntimeError, ValueError) as exc:
        raise DatasetError(f"cannot read, file truncated or corrupt ({exc})", source=str(path), field=key) from None


def read_d4rl(path: str | Path, task: str | None = None) -> OfflineDataset:
    path = Path(path)
    with _open(path) as f:
        arrays = {k: _read(f, k, path) for k in FLOAT_FIELDS + FLAG_FIELDS}
        for k in ("qpos", "qvel"):
            arrays[k] = _read(f, f"infos/{k}", path)
        metadata = {}
        if "reverie" in f.attrs:
            metadata = json.loads(f.attrs["reverie"])
        name = str(f.attrs.get("name", path.stem))
    if arrays["next_observations"] is None and arrays["observations"] is not None:
        raise DatasetError("missing (Reverie never rebuilds it by shifting observations)",
                           source=str(path), field="next_observations")
    if arrays["timeouts"] is None and arrays["terminals"] is not None:
        raise DatasetError("missing (needed to tell time-limit cuts from terminal states)",
                           source=str(path), field="timeouts")
    t = task or metadata.get("task") or (task_from_name(path.stem).name if task_from_name(path.stem) else None)
    return OfflineDataset.from_arrays(arrays, source=str(path), task=t, name=name, metadata=metadata)


def write_d4rl(ds: OfflineDataset, path: str | Path, compression: str | None = "gzip") -> Path:
    """Write ``ds`` as D4RL HDF5, atomically."""
    path = Path(path)
    with atomic_path(path, suffix=".hdf5") as tmp:
        with h5py.File(tmp, "w") as f:
            for key, a in ds.arrays().items():
                target = f"infos/{key}" if key in ("qpos", "qvel") else key
                f.create_dataset(target, data=a, compression=compression,
                                 compression_opts=1 if compression == "gzip" else None)
            f.attrs["name"] = ds.name
            f.attrs["reverie"] = json.dumps({**ds.metadata, "task": ds.task})
    return path
