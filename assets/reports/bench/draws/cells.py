"""A grid cell's (or a train run's) learner, world model and data, rebuilt from its folder, for the draws here."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from agents.data import TransitionSampler
from agents.registry import build_agent
from envs.sources import load_source
from eval.cli import _dataset_key, train_configs
from worldmodels.registry import load_world_model


def load_cell(cell: Path):
    """``(name, values, loop, ds, model, learner)``: the learner untrained, built with the values the cell's own
    `reverie train` used (its per-dataset defaults, then its command line from ``overrides.yaml``); the caller
    loads the weights it wants (``learner.pt`` or ``checkpoint.pt``)."""
    cfg = OmegaConf.load(cell / "config.yaml")
    overrides_file = cell / "overrides.yaml"
    overrides = list(OmegaConf.load(overrides_file)) if overrides_file.is_file() else []
    name, _, values, loop, _ = train_configs(cfg, overrides, _dataset_key(str(cfg.dataset)))
    ds = load_source(cfg.dataset, size=cfg.size, seed=cfg.dataset_seed)
    model = load_world_model(cell / "world_model.pt", ds)
    learner = build_agent(name, values, ds.obs_dim, ds.act_dim, model=model, sampler=TransitionSampler(ds), ds=ds)
    return name, values, loop, ds, model, learner


