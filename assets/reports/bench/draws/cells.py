"""A grid cell's (or a train run's) learner, world model and data, rebuilt from its folder, for the draws here;
and the config a `reverie train` command would compose, for the draws that build their own runs."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from agents.data import TransitionSampler
from agents.registry import build_agent
from agents.training import Acting, acting_policy, play_episodes
from envs.sources import load_source
from eval.cli import COMMANDS, _compose, _dataset_key, agent_world_model, train_configs
from worldmodels.registry import load_world_model


def composed(agent: str, dataset: str):
    """``(agent_values, world_model_values)``: what ``reverie train agent=AGENT dataset=DATASET`` would build its
    learner's typed config and its world model from (configs/, the agent's per-dataset defaults and its
    world-model needs)."""
    overrides = [f"agent={agent}", f"dataset={dataset}"]
    cfg = _compose(COMMANDS["train"], overrides)
    agent_cfg = train_configs(cfg, overrides, _dataset_key(dataset))[1]
    return agent_cfg, agent_world_model(cfg, overrides)


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


def load_weights(cell: Path, learner, weights: str | None = None) -> str:
    """Load a cell's learner weights: ``learner.pt`` (a finished cell; the default when present) or
    ``checkpoint.pt`` (one still running). Returns which, with the step, for the printout."""
    weights = weights or ("learner.pt" if (cell / "learner.pt").is_file() else "checkpoint.pt")
    if weights not in ("learner.pt", "checkpoint.pt"):
        raise SystemExit(f"--weights: expected learner.pt or checkpoint.pt, got {weights!r}")
    if not (cell / weights).is_file():
        raise SystemExit(f"{cell / weights}: no such file (expected a cell folder with learner.pt or checkpoint.pt)")
    blob = torch.load(cell / weights, map_location="cpu", weights_only=False)
    if weights == "checkpoint.pt":
        learner.load_state_dict(blob["learner"])
        return f"checkpoint.pt, step {blob['step']}"
    learner.load_state_dict(blob)
    return "learner.pt, final"


def cell_parser(doc: str) -> argparse.ArgumentParser:
    """A draw's command line: the CELL folder and ``--weights``; the draw adds its own options."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cell", type=Path)
    ap.add_argument("--weights", default=None, help="learner.pt (default when present) or checkpoint.pt")
    return ap


def open_cell(args: argparse.Namespace):
    """``(name, values, loop, ds, model, learner, loaded)``: ``args.cell`` rebuilt with its ``--weights`` loaded
    (``loaded`` says which, for the printout), torch on one thread."""
    torch.set_num_threads(1)
    name, values, loop, ds, model, learner = load_cell(args.cell)
    return name, values, loop, ds, model, learner, load_weights(args.cell, learner, args.weights)


def acting(learner, n: int) -> Acting:
    """A cell's policy acting deterministically on ``n`` rows as the evaluation runs it: through the learner's
    ``Policy`` (``acting_policy``) and ``agents.training.Acting``, the evaluation's own stepper, so a
    history-dependent agent (NEUBAY's GRU) carries its history from step to step."""
    return Acting(acting_policy(learner), n)


def record_episodes(learner, task, n: int, seed: int = 10_000) -> dict:
    """``n`` whole simulator episodes from the resets ``seed``.. (the evaluation's seeds), stepped by the
    evaluation's own loop (``agents.training.play_episodes``): per step ``[T, n]``, the tensors ``obs`` and
    ``actions``, the arrays ``rewards`` (float32, as the simulator gives them; 0 once a row's episode has ended)
    and ``running`` (the step was in its episode), and per episode ``terminated`` (it ended in a fall)."""
    terminated = np.zeros(n, bool)
    seen = {"obs": [], "actions": [], "rewards": [], "running": []}
    for obs, act, rew, running, term in play_episodes(task, acting_policy(learner), n, seed):
        seen["obs"].append(obs), seen["actions"].append(act), seen["running"].append(running)
        seen["rewards"].append(np.where(running, rew, 0.0))
        terminated |= running & term
    return {"obs": torch.stack(seen["obs"]), "actions": torch.stack(seen["actions"]),
            "rewards": np.stack(seen["rewards"]), "running": np.stack(seen["running"]), "terminated": terminated}
