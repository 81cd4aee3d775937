"""The world models ``reverie fit`` and ``reverie train`` know: build, fit (with a cache), load and check."""

from __future__ import annotations

import fcntl
import hashlib
import json
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from envs.config import build_config
from envs.errors import ReverieError
from worldmodels.base import WorldModel, fit_identity, read_checkpoint
from worldmodels.diffusion import DiffusionConfig, DiffusionWorldModel
from worldmodels.ensemble import EnsembleConfig, GaussianEnsemble
from worldmodels.video import VideoConfig, VideoWorldModel

WORLD_MODELS = {"ensemble": (GaussianEnsemble, EnsembleConfig), "diffusion": (DiffusionWorldModel, DiffusionConfig),
                "video": (VideoWorldModel, VideoConfig)}
NOT_MODEL_KEYS = ("name", "checkpoint")


def world_model_config(values: dict):
    name = values.get("name")
    if name not in WORLD_MODELS:
        raise ReverieError(f"unknown world_model '{name}': expected one of {', '.join(WORLD_MODELS)}")
    return build_config(WORLD_MODELS[name][1], {k: v for k, v in values.items() if k not in NOT_MODEL_KEYS},
                        "world_model")


def dataset_fingerprint(ds) -> str:
    h = hashlib.blake2b(digest_size=8)
    for a in (ds.observations, ds.actions, ds.rewards, ds.next_observations, ds.terminals):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def fit_world_model(ds, values: dict, seed: int, progress=None, device: str | torch.device = "cpu",
                    checkpoint: Path | None = None) -> tuple[WorldModel, dict]:
    """Fit from scratch, or resume the same fit from ``checkpoint`` (removed once the fit ends)."""
    cfg = world_model_config(values)
    torch.manual_seed(seed)
    model = WORLD_MODELS[values["name"]][0](ds.obs_dim, ds.act_dim, cfg, task=ds.task).to(device)
    t = torch.from_numpy
    episodes = {"episode_ends": ds.episode_ends()} if getattr(model, "fits_on_episodes", False) else {}
    metrics = model.fit(t(ds.observations), t(ds.actions), t(ds.next_observations), t(ds.rewards),
                        torch.Generator().manual_seed(seed), progress=progress, checkpoint=checkpoint, **episodes)
    return model, metrics


def load_model(path: str | Path, map_location: str | torch.device = "cpu"):
    """Any saved world model, by the format its file names."""
    blob = read_checkpoint(path, tuple(cls.checkpoint_format for cls, _ in WORLD_MODELS.values()))
    cls = next(c for c, _ in WORLD_MODELS.values() if c.checkpoint_format == blob["format"])
    return cls.load(path, map_location)


@contextmanager
def _locked(path: Path):
    """Hold a cache entry's lock; yields the seconds spent waiting for another run that held it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as fh:
        t0 = time.perf_counter()
        fcntl.flock(fh, fcntl.LOCK_EX)   # two bench cells fitting the same model: one fits, one waits
        try:
            yield time.perf_counter() - t0
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cached_model_path(ds, values: dict, seed: int, cache_root: Path) -> Path:
    """Where the cache keeps the model fitted to this data, config and seed."""
    key = hashlib.blake2b(json.dumps({"name": values["name"], "config": fit_identity(world_model_config(values)),
                                      "seed": seed, "data": dataset_fingerprint(ds)}, sort_keys=True).encode(),
                          digest_size=8).hexdigest()
    return cache_root / f"{ds.name}-{values['name']}-seed{seed}-{key}.pt"


def cached_world_model(ds, values: dict, seed: int, cache_root: Path, progress=None,
                       device: str | torch.device = "cpu") -> tuple[WorldModel, dict, bool]:
    """A model fitted to exactly this data, config and seed: from the cache, or fitted and cached. The metrics
    include ``waited_s``: how long this call waited for another run fitting the same model."""
    path = cached_model_path(ds, values, seed, cache_root)
    with _locked(path) as waited:
        if path.is_file():
            model = load_model(path).to(device)
            return model, {"holdout_mse_mean": model.holdout_mse.mean().item(),
                           "holdout_mse_elites": model.holdout_mse[model.elites].mean().item(),
                           "waited_s": waited}, True
        partial = path.with_name(path.stem + ".fit-checkpoint.pt")   # a fit cut short resumes from here
        model, metrics = fit_world_model(ds, values, seed, progress, device, checkpoint=partial)
        model.save(path)
        partial.unlink(missing_ok=True)
        return model, {**metrics, "waited_s": waited}, False


def fit_took(reused: bool, seconds: float, metrics: dict) -> str:
    """How a model came to hand: 'reused from the cache in 2 s', 'fitted in 2154 s', and the part of it spent
    waiting for another run's fit of the same model, which is not this run's cost."""
    waited = metrics.get("waited_s", 0.0)
    line = f"{'reused from the cache' if reused else 'fitted'} in {seconds - waited:.0f} s"
    return line + (f" after waiting {waited:.0f} s for another run's fit of it" if waited >= 1 else "")


def load_world_model(path: str | Path, ds, device: str | torch.device = "cpu") -> WorldModel:
    """A saved model, refused unless it was fitted for this dataset's task and dimensions."""
    model = load_model(path).to(device)
    spec = model.spec
    if spec.task is not None and ds.task is not None and spec.task != ds.task:
        raise ReverieError(f"{path}: world model was fitted for task '{spec.task}' (obs_dim={spec.obs_dim}, "
                           f"act_dim={spec.act_dim}); dataset {ds.name} is '{ds.task}' (obs_dim={ds.obs_dim}, "
                           f"act_dim={ds.act_dim})")
    if (spec.obs_dim, spec.act_dim) != (ds.obs_dim, ds.act_dim):
        raise ReverieError(f"{path}: world model is for obs_dim={spec.obs_dim}, act_dim={spec.act_dim}; "
                           f"dataset {ds.name} has obs_dim={ds.obs_dim}, act_dim={ds.act_dim}")
    return model


def fit_video_model(datasets: list, values: dict, seed: int, progress=None,
                    checkpoint: str | Path | None = None) -> tuple[VideoWorldModel, dict]:
    """A video world model on one or more manipulation datasets (``envs.manipulation_data``) of one frame size;
    its task names every task it saw; ``checkpoint``: a folder the fit writes its progress to and resumes from."""
    cfg = world_model_config(values)
    sizes = {ds.image_size for ds in datasets}
    if len(sizes) != 1:
        raise ReverieError(f"dataset: the files hold frames of different sizes {sorted(sizes)}; use one size")
    size = sizes.pop()
    torch.manual_seed(seed)
    tasks = ",".join(sorted({ds.task for ds in datasets}))
    model = VideoWorldModel(3 * size * size + 4, 4, cfg, task=tasks)
    episodes = [e for ds in datasets for e in ds.episodes]
    metrics = model.fit_episodes(episodes, torch.Generator().manual_seed(seed), progress=progress,
                                 checkpoint=checkpoint)
    return model, metrics


def check_video_model(model, path, task: str, image_size: int) -> None:
    """A video model is refused for a task it never saw or frames of another size, naming both."""
    seen = (model.spec.task or "").split(",")
    if task not in seen:
        raise ReverieError(f"{path}: video world model was trained on {', '.join(seen)}, not {task}")
    if model.size != image_size:
        raise ReverieError(f"{path}: video world model takes {model.size}x{model.size} frames, got "
                           f"{image_size}x{image_size}")
