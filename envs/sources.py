"""One entry point from a user's SOURCE string to an :class:`OfflineDataset`.

SOURCE is a path (a D4RL ``.hdf5``, a NeoRL ``.npz``, a Minari dataset folder)
or a name: a built-in (``hopper-medium-replay``), a D4RL name looked up in
D4RL's local cache (``hopper-medium-replay-v2``), or a Minari id looked up
under ``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets``
(``mujoco/hopper/medium-v0``). Nothing is ever downloaded.
"""

from __future__ import annotations

from pathlib import Path

from envs.builtin import load_builtin, parse_builtin_name
from envs.d4rl_format import d4rl_cache_dir, d4rl_file_for_name, is_d4rl_name, read_d4rl
from envs.dataset import OfflineDataset
from envs.errors import DatasetError, ReverieError
from envs.minari_format import is_minari_folder, minari_root, read_minari, resolve_minari_id
from envs.neorl_format import read_neorl

HDF5_SUFFIXES = (".hdf5", ".h5")


def read_path(path: Path, task: str | None = None) -> OfflineDataset:
    if path.is_dir():
        if is_minari_folder(path):
            return read_minari(path, task=task)
        raise DatasetError("a folder, but not a Minari dataset (no data/main_data.hdf5)", source=str(path))
    suffix = path.suffix.lower()
    if suffix in HDF5_SUFFIXES:
        return read_d4rl(path, task=task)
    if suffix == ".npz":
        return read_neorl(path, task=task)
    raise DatasetError(f"unknown file type '{suffix or '(none)'}': expected .hdf5/.h5 (D4RL), .npz (NeoRL) "
                       "or a Minari dataset folder", source=str(path))


def load_source(source: str, *, task: str | None = None, size: int | None = None, seed: int = 0,
                progress: bool = False) -> OfflineDataset:
    source = str(source)
    if not source:
        raise ReverieError("option 'source': expected a dataset path or name, got nothing")
    path = Path(source).expanduser()
    if path.exists():
        return read_path(path, task)
    if parse_builtin_name(source):
        return load_builtin(source, size=size, seed=seed, progress=progress)
    if is_d4rl_name(source):
        file = d4rl_file_for_name(source)
        if file.is_file():
            return read_d4rl(file, task=task)
    minari_folder = resolve_minari_id(source)
    if minari_folder is not None:
        return read_minari(minari_folder, task=task)
    if path.suffix.lower() in HDF5_SUFFIXES + (".npz",) or source.startswith((".", "/", "~")):
        raise DatasetError("file not found", source=source)
    raise ReverieError(
        f"dataset '{source}' not found: not a path, not a built-in name (TASK-LEVEL), not in D4RL's cache "
        f"({d4rl_cache_dir()}) and not a Minari id under {minari_root()}")
