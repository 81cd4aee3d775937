"""Minari datasets: a folder holding ``data/metadata.json`` and ``data/main_data.hdf5``.

Reading goes through the ``minari`` package when it is installed (the
``reverie[minari]`` extra) and otherwise reads Minari's HDF5 layout directly:
one group ``episode_<i>`` per episode with ``observations`` (T+1 rows),
``actions``, ``rewards``, ``terminations``, ``truncations`` (T rows) and an
optional ``infos`` group. Writing uses ``minari.create_dataset_from_buffers``
(the format's own writer) so that Minari itself can open the result.

Simulator states travel as ``infos/qpos`` and ``infos/qvel`` with one row per
observation; the state after an episode's last step is not stored in our
datasets, so its row repeats the previous one and is ignored on reading.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import h5py
import numpy as np

from envs.dataset import OfflineDataset
from envs.errors import DatasetError, ReverieError
from envs.tasks import get_task, task_from_name


def minari_root() -> Path:
    return Path(os.environ.get("MINARI_DATASETS_PATH", Path.home() / ".minari" / "datasets")).expanduser()


def _data_dir(folder: Path) -> Path:
    for cand in (folder / "data", folder):
        if (cand / "main_data.hdf5").is_file():
            return cand
    raise DatasetError("not a Minari dataset folder (no data/main_data.hdf5)", source=str(folder))


def is_minari_folder(path: Path) -> bool:
    return path.is_dir() and any((c / "main_data.hdf5").is_file() for c in (path / "data", path))


def resolve_minari_id(dataset_id: str) -> Path | None:
    folder = minari_root() / dataset_id
    return folder if is_minari_folder(folder) else None


def _episodes_direct(data_dir: Path):
    main = data_dir / "main_data.hdf5"
    if not h5py.is_hdf5(main):
        raise DatasetError("not an HDF5 file (bad signature)", source=str(main))
    try:
        f = h5py.File(main, "r")
    except OSError as exc:
        raise DatasetError(f"cannot open HDF5 file, truncated or corrupt ({exc})", source=str(main)) from None
    with f:
        keys = sorted((k for k in f.keys() if k.startswith("episode_")), key=lambda k: int(k.split("_")[1]))
        if not keys:
            raise DatasetError("no episode_<i> groups", source=str(main))
        for k in keys:
            g = f[k]
            ep = {}
            for name in ("observations", "actions", "rewards", "terminations", "truncations"):
                if name not in g:
                    raise DatasetError(f"missing in {k}", source=str(main), field=name)
                try:
                    ep[name] = g[name][()]
                except OSError as exc:
                    raise DatasetError(f"cannot read {k}, file truncated or corrupt ({exc})",
                                       source=str(main), field=name) from None
            infos = {}
            if "infos" in g:
                for name in ("qpos", "qvel"):
                    if name in g["infos"]:
                        infos[name] = g["infos"][name][()]
            ep["infos"] = infos
            yield ep


def _episodes_minari(data_dir: Path):
    import minari

    try:
        ds = minari.MinariDataset(data_dir)
    except Exception as exc:
        raise DatasetError(f"minari cannot open it ({type(exc).__name__}: {exc})", source=str(data_dir)) from None
    for ep in ds.iterate_episodes():
        infos = {k: np.asarray(v) for k, v in (ep.infos or {}).items() if k in ("qpos", "qvel")}
        yield {"observations": ep.observations, "actions": ep.actions, "rewards": ep.rewards,
               "terminations": ep.terminations, "truncations": ep.truncations, "infos": infos}


def read_minari(folder: str | Path, task: str | None = None, use_package: bool | None = None) -> OfflineDataset:
    folder = Path(folder)
    if not folder.exists():
        raise DatasetError("dataset folder not found", source=str(folder))
    data_dir = _data_dir(folder)
    meta_path = data_dir / "metadata.json"
    metadata = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if use_package is None:
        try:
            import minari  # noqa: F401
            use_package = True
        except ImportError:
            use_package = False
    episodes = _episodes_minari(data_dir) if use_package else _episodes_direct(data_dir)
    parts: dict[str, list] = {k: [] for k in ("observations", "next_observations", "actions", "rewards",
                                              "terminals", "timeouts", "qpos", "qvel")}
    for i, ep in enumerate(episodes):
        obs = np.asarray(ep["observations"])
        steps = len(ep["actions"])
        if obs.ndim != 2 or len(obs) != steps + 1:
            raise DatasetError(f"episode {i}: expected {steps + 1} observation rows for {steps} actions, "
                               f"got shape {obs.shape}", source=str(folder), field="observations")
        term = np.asarray(ep["terminations"], dtype=bool).reshape(steps)
        trunc = np.asarray(ep["truncations"], dtype=bool).reshape(steps)
        if steps and not (term[-1] or trunc[-1]):
            trunc[-1] = True  # an episode stored without an end flag was cut
        parts["observations"].append(obs[:-1])
        parts["next_observations"].append(obs[1:])
        parts["actions"].append(np.asarray(ep["actions"]))
        parts["rewards"].append(np.asarray(ep["rewards"]).reshape(steps))
        parts["terminals"].append(term)
        parts["timeouts"].append(trunc & ~term)
        for name in ("qpos", "qvel"):
            if name in ep["infos"]:
                parts[name].append(np.asarray(ep["infos"][name])[:steps])
    arrays = {k: np.concatenate(v) if v else None for k, v in parts.items()}
    if arrays["qpos"] is not None and len(parts["qpos"]) != len(parts["observations"]):
        arrays["qpos"] = arrays["qvel"] = None  # only some episodes carry states: drop them
    env_id = (metadata.get("env_spec") or "")
    if isinstance(env_id, str) and env_id.startswith("{"):
        env_id = json.loads(env_id).get("id", "")
    dataset_id = metadata.get("dataset_id", folder.name)
    t = task or (task_from_name(str(env_id)) or task_from_name(dataset_id) or task_from_name(folder.name))
    t = t if isinstance(t, str) or t is None else t.name
    return OfflineDataset.from_arrays(arrays, source=str(folder), task=t, name=str(dataset_id),
                                      metadata={"minari": {k: metadata.get(k) for k in ("dataset_id", "minari_version")}})


def write_minari(ds: OfflineDataset, folder: str | Path, dataset_id: str | None = None) -> Path:
    """Write ``ds`` as a Minari dataset at ``folder`` with the ``minari`` package."""
    try:
        import minari
        from minari.data_collector import EpisodeBuffer
    except ImportError:
        raise ReverieError("writing a Minari dataset needs the minari package: pip install 'reverie[minari]'") from None
    folder = Path(folder)
    if folder.exists():
        raise ReverieError(f"{folder}: output folder exists; remove it or choose another 'out'")
    if ds.continuity_breaks():
        raise DatasetError(f"{ds.continuity_breaks()} rows whose next observation is not the next row's; "
                           "Minari stores one observation sequence per episode", source=ds.source or ds.name,
                           field="next_observations")
    dataset_id = dataset_id or f"reverie/{folder.name.removesuffix('-v0')}-v0"
    buffers = []
    for i, (s, e) in enumerate(zip(ds.episode_starts(), ds.episode_ends())):
        infos = None
        if ds.has_states:
            infos = {k: np.concatenate([getattr(ds, k)[s:e], getattr(ds, k)[e - 1:e]]) for k in ("qpos", "qvel")}
        buffers.append(EpisodeBuffer(
            id=i, observations=np.concatenate([ds.observations[s:e], ds.next_observations[e - 1:e]]),
            actions=ds.actions[s:e], rewards=ds.rewards[s:e].tolist(), terminations=ds.terminals[s:e].tolist(),
            truncations=(~ds.terminals[s:e] & (ds.timeouts[s:e] | (np.arange(s, e) == e - 1))).tolist(), infos=infos))
    env = get_task(ds.task).gym_id if ds.task else None
    import gymnasium as gym
    obs_space = gym.spaces.Box(-np.inf, np.inf, (ds.obs_dim,), np.float32)
    act_space = gym.spaces.Box(-1.0, 1.0, (ds.act_dim,), np.float32)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    old = os.environ.get("MINARI_DATASETS_PATH")
    try:
        os.environ["MINARI_DATASETS_PATH"] = str(staging)
        with warnings.catch_warnings():  # minari nags about author and permalink fields
            warnings.simplefilter("ignore", UserWarning)
            minari.create_dataset_from_buffers(
                dataset_id=dataset_id, buffer=buffers, env=env, algorithm_name="reverie",
                observation_space=obs_space, action_space=act_space, author="Reverie",
                description=f"Converted by Reverie from {ds.source or ds.name}")
        os.replace(staging / dataset_id, folder)
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old
        shutil.rmtree(staging, ignore_errors=True)
    return folder
