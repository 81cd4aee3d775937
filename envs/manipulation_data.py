"""Manipulation datasets: episodes of frames, proprioception, actions, rewards, success and instruction.

One HDF5 file in Minari's episode layout (``main_data.hdf5``-style: one group per
episode), frames stored as gzip-compressed uint8 in chunks of 16 frames:

    /                                 attrs: format="reverie.manipulation/1", task, env_name, level,
                                             noise_std, camera, image_size, seed, episodes, total_steps,
                                             scene_rules (what a reset seed meant: ``SCENE_RULES``)
    /episode_0/observations/image     uint8   [T+1, S, S, 3]   (the first frame is the reset's)
    /episode_0/observations/state     float32 [T+1, 4]         hand xyz, gripper opening
    /episode_0/actions                float32 [T, 4]
    /episode_0/rewards                float32 [T]
    /episode_0/terminations           bool    [T]              (MetaWorld never terminates: all False)
    /episode_0/truncations            bool    [T]              (True at the last step)
    /episode_0/infos/success          bool    [T]
    /episode_0/privileged/objects     float32 [T+1, 6]         object xyz, goal xyz (MetaWorld's state; never
                                                               shown to policies; optional: older files lack it)
    /episode_0                        attrs: instruction, seed

An episode ends ``success_tail`` steps after its first success or at the task's
step limit. ``reverie dataset make task=metaworld-reach level=expert`` writes one;
``reverie dataset info PATH`` reads it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from envs.atomic_io import atomic_path
from envs.errors import ReverieError
from envs.manipulation import (ACT_DIM, LEVELS, MISDIRECT_OFFSET, OBJECT_DIM, PROPRIO_DIM, SCENE_RULES,
                               ManipulationEnv, get_manipulation_task, instruction)

FORMAT = "reverie.manipulation/1"


@dataclass
class Episode:
    images: np.ndarray       # [T+1, S, S, 3] uint8
    states: np.ndarray       # [T+1, 4] float32
    actions: np.ndarray      # [T, 4] float32
    rewards: np.ndarray      # [T] float32
    success: np.ndarray      # [T] bool
    instruction: str
    seed: int
    objects: np.ndarray | None = None   # [T+1, OBJECT_DIM] float32: privileged object and goal positions

    def __len__(self) -> int:
        return len(self.actions)


@dataclass
class ManipulationDataset:
    episodes: list[Episode]
    attrs: dict
    source: str = ""

    @property
    def task(self) -> str:
        return self.attrs["task"]

    @property
    def image_size(self) -> int:
        return int(self.attrs["image_size"])

    @property
    def has_objects(self) -> bool:
        """Every episode records the objects' positions (files from before they were recorded do not)."""
        return all(e.objects is not None for e in self.episodes)


def _expert_actions(env: ManipulationEnv, seed: int) -> np.ndarray:
    """The scripted expert's actions in the scene of ``seed``, for the whole episode length (success ends nothing)."""
    env.reset(seed)
    expert = env.expert()
    actions = []
    for _ in range(env.max_episode_steps):
        actions.append(np.clip(expert.get_action(env.full_state), -1.0, 1.0))
        env.step(actions[-1])
    return np.array(actions)


def collect_episodes(task: str, level: str, episodes: int, seed: int = 0, image_size: int = 64,
                     camera: str = "corner", success_tail: int = 10, progress=None) -> list[Episode]:
    """Roll the task's scripted expert, with the level's action noise, for ``episodes`` episodes (``misdirected``:
    replay the actions the expert took in the scene of seed + ``MISDIRECT_OFFSET``)."""
    t = get_manipulation_task(task)
    if level not in LEVELS:
        raise ReverieError(f"unknown level '{level}' for {t.name}: expected one of {', '.join(LEVELS)}")
    noise = LEVELS[level]
    env = ManipulationEnv(t, image_size, camera)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(episodes):
        ep_seed = seed * 100_000 + i
        replay = _expert_actions(env, ep_seed + MISDIRECT_OFFSET) if level == "misdirected" else None
        obs = env.reset(ep_seed)
        expert = env.expert()
        images, states, actions, rewards, success = [obs["image"]], [obs["state"]], [], [], []
        objects = [env.objects()]
        first_success = None
        for step in range(env.max_episode_steps):
            if replay is not None:
                a = replay[step]
            elif noise is None:
                a = rng.uniform(-1.0, 1.0, ACT_DIM)
            else:
                a = np.clip(expert.get_action(env.full_state) + noise * rng.standard_normal(ACT_DIM), -1.0, 1.0)
            obs, r, _, truncated, info = env.step(a)
            images.append(obs["image"])
            states.append(obs["state"])
            objects.append(env.objects())
            actions.append(a.astype(np.float32))
            rewards.append(r)
            success.append(info["success"])
            if info["success"] and first_success is None:
                first_success = step
            if truncated or (first_success is not None and step - first_success >= success_tail):
                break
        out.append(Episode(np.stack(images), np.stack(states).astype(np.float32), np.stack(actions),
                           np.asarray(rewards, np.float32), np.asarray(success, bool),
                           instruction(t, rng), ep_seed, np.stack(objects)))
        if progress:
            progress(i + 1, episodes)
    env.close()
    return out


def write_manipulation(path: str | Path, episodes: list[Episode], attrs: dict) -> None:
    """Write atomically: a reader sees no file or the whole file."""
    with atomic_path(path, suffix=".hdf5") as tmp:
        with h5py.File(tmp, "w") as f:
            f.attrs.update({"format": FORMAT, **attrs, "episodes": len(episodes),
                            "total_steps": int(sum(len(e) for e in episodes))})
            for i, e in enumerate(episodes):
                g = f.create_group(f"episode_{i}")
                g.attrs.update({"instruction": e.instruction, "seed": int(e.seed)})
                o = g.create_group("observations")
                o.create_dataset("image", data=e.images, compression="gzip", compression_opts=4,
                                 chunks=(min(16, len(e.images)), *e.images.shape[1:]))
                o.create_dataset("state", data=e.states)
                g.create_dataset("actions", data=e.actions)
                g.create_dataset("rewards", data=e.rewards)
                g.create_dataset("terminations", data=np.zeros(len(e), bool))
                g.create_dataset("truncations", data=np.arange(len(e)) == len(e) - 1)
                g.create_group("infos").create_dataset("success", data=e.success)
                if e.objects is not None:
                    g.create_group("privileged").create_dataset("objects", data=e.objects)


def plain_attrs(f: h5py.File) -> dict:
    """A file's attributes as Python values (bytes decoded, numpy scalars unwrapped)."""
    return {k: (v.decode() if isinstance(v, bytes) else v.item() if hasattr(v, "item") else v)
            for k, v in f.attrs.items()}


def read_manipulation(path: str | Path) -> ManipulationDataset:
    """Read and check a manipulation file; a damaged or foreign one is refused naming the field."""
    path = Path(path)
    if not path.is_file():
        raise ReverieError(f"{path}: dataset file not found")
    try:
        f = h5py.File(path, "r")
    except OSError:
        raise ReverieError(f"{path}: not a readable HDF5 file") from None
    with f:
        attrs = plain_attrs(f)
        if attrs.get("format") != FORMAT:
            raise ReverieError(f"{path}: attribute 'format': expected '{FORMAT}'")
        S = int(attrs["image_size"])
        episodes = []
        for i in range(int(attrs["episodes"])):
            name = f"episode_{i}"
            if name not in f:
                raise ReverieError(f"{path}: group '{name}' missing (the file says {attrs['episodes']} episodes)")
            g = f[name]

            def field(key: str, dtype, shape_tail: tuple, rows: int | None):
                if key not in g:
                    raise ReverieError(f"{path}: field '{name}/{key}' missing")
                a = g[key][()]
                if a.dtype != dtype or a.shape[1:] != shape_tail or (rows is not None and len(a) != rows):
                    want = f"{np.dtype(dtype).name} [{rows if rows is not None else 'T'}, " \
                           f"{', '.join(map(str, shape_tail))}]".replace(", ]", "]")
                    raise ReverieError(f"{path}: field '{name}/{key}': expected {want}, got {a.dtype.name} "
                                       f"{list(a.shape)}")
                return a

            actions = field("actions", np.float32, (ACT_DIM,), None)
            T = len(actions)
            images = field("observations/image", np.uint8, (S, S, 3), T + 1)
            states = field("observations/state", np.float32, (PROPRIO_DIM,), T + 1)
            rewards = field("rewards", np.float32, (), T)
            success = field("infos/success", np.bool_, (), T)
            objects = field("privileged/objects", np.float32, (OBJECT_DIM,), T + 1) if "privileged" in g else None
            if not (np.isfinite(actions).all() and np.isfinite(states).all() and np.isfinite(rewards).all()
                    and (objects is None or np.isfinite(objects).all())):
                raise ReverieError(f"{path}: episode '{name}' holds NaN or inf")
            text = g.attrs.get("instruction")
            episodes.append(Episode(images, states, actions, rewards, success,
                                    text.decode() if isinstance(text, bytes) else str(text), int(g.attrs["seed"]),
                                    objects))
    get_manipulation_task(attrs["task"])
    return ManipulationDataset(episodes, attrs, str(path))


def current_attrs(path: Path) -> dict | None:
    """A cached file's attributes if it was made under today's scene rules with every episode's positions, else
    None; from its attributes and its groups' keys alone, without reading the frames (a file that is no HDF5 at
    all is not current either: it is made again). ``make_manipulation`` and its callers read it in full later."""
    try:
        with h5py.File(path, "r") as f:
            attrs = plain_attrs(f)
            if attrs.get("format") != FORMAT or attrs.get("scene_rules") != SCENE_RULES:
                return None
            names = [f"episode_{i}" for i in range(int(attrs.get("episodes", 0)))]
            if not names or not all(n in f and "privileged/objects" in f[n] for n in names):
                return None
            return attrs
    except OSError:
        return None


def make_manipulation(task: str, level: str, episodes: int, seed: int, cache_root: Path, image_size: int = 64,
                      camera: str = "corner", force: bool = False, progress=None) -> tuple[Path, dict, bool]:
    """The cached file for (task, level, episodes, seed, image size, camera), made if missing, and made again if
    it is stale: collected under other scene rules (its seeds meant other scenes) or without the objects'
    positions."""
    path = cache_root / "datasets" / f"{task}-{level}-{episodes}ep-{image_size}px-{camera}-seed{seed}.hdf5"
    if path.is_file() and not force:
        attrs = current_attrs(path)
        if attrs is not None:
            return path, attrs, True
    t0 = time.perf_counter()
    eps = collect_episodes(task, level, episodes, seed, image_size, camera, progress=progress)
    seconds = time.perf_counter() - t0
    steps = sum(len(e) for e in eps)
    attrs = {"task": task, "env_name": get_manipulation_task(task).env_name, "level": level,
             "noise_std": -1.0 if LEVELS[level] is None else float(LEVELS[level]), "camera": camera,
             "image_size": image_size, "seed": seed, "scene_rules": SCENE_RULES, "seconds": seconds,
             "frames_per_second": (steps + len(eps)) / seconds}
    write_manipulation(path, eps, attrs)
    return path, read_manipulation(path).attrs, False


def manipulation_info(ds: ManipulationDataset) -> dict:
    lengths = np.array([len(e) for e in ds.episodes])
    succeeded = np.array([e.success.any() for e in ds.episodes])
    returns = np.array([e.rewards.sum() for e in ds.episodes])
    texts = sorted({e.instruction for e in ds.episodes})
    return {"name": Path(ds.source).stem, "task": ds.task, "level": ds.attrs.get("level"),
            "episodes": len(ds.episodes), "steps": int(lengths.sum()), "frames": int(lengths.sum() + len(lengths)),
            "image_size": ds.image_size, "camera": ds.attrs.get("camera"),
            "success_rate": float(succeeded.mean()) if len(succeeded) else float("nan"),
            "episode_length_mean": float(lengths.mean()), "return_mean": float(returns.mean()),
            "return_std": float(returns.std()), "instructions": texts,
            "objects": ds.has_objects,
            "action_min": float(min(e.actions.min() for e in ds.episodes)),
            "action_max": float(max(e.actions.max() for e in ds.episodes))}


def format_manipulation_info(info: dict) -> str:
    return "\n".join([
        f"dataset      {info['name']}",
        f"task         {info['task']}  (level {info['level']}, camera {info['camera']}, "
        f"{info['image_size']}x{info['image_size']} RGB + {PROPRIO_DIM}-D proprioception, {ACT_DIM}-D actions)",
        f"episodes     {info['episodes']:,}  steps {info['steps']:,}  frames {info['frames']:,}  "
        f"mean length {info['episode_length_mean']:.1f}",
        f"success      {100 * info['success_rate']:.0f}% of episodes",
        f"return       mean {info['return_mean']:.1f} ± {info['return_std']:.1f}",
        f"actions      [{info['action_min']:.2f}, {info['action_max']:.2f}]",
        f"objects      {'object and goal positions recorded (privileged)' if info['objects'] else 'not recorded'}",
        "instructions " + "; ".join(info["instructions"])])
