"""The learners ``reverie train agent=NAME`` knows, and how one is built from its config."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from agents.iql import IQL, IQLConfig
from agents.mobile import MOBILE, MOBILEConfig
from agents.mbpo import MBPO
from agents.mopo import MOPO, MOPOConfig
from agents.neubay import NEUBAY, NEUBAYConfig
from agents.ravl import RAVL, RAVLConfig
from agents.sac import SACConfig
from agents.td3bc import TD3BC, TD3BCConfig
from envs.config import build_config
from envs.errors import ReverieError

AGENTS = {"mopo": (MOPO, MOPOConfig), "mobile": (MOBILE, MOBILEConfig), "ravl": (RAVL, RAVLConfig),
          "neubay": (NEUBAY, NEUBAYConfig), "mbpo": (MBPO, SACConfig), "td3bc": (TD3BC, TD3BCConfig), "iql": (IQL, IQLConfig)}


def agent_class(name: str):
    if name not in AGENTS:
        raise ReverieError(f"unknown agent '{name}': expected one of {', '.join(AGENTS)}")
    return AGENTS[name][0]


def agent_config(name: str, values: dict):
    """The learner's typed config from plain values; a wrong key, type or range is one clear error."""
    agent_class(name)
    return build_config(AGENTS[name][1], values, "agent")


def build_agent(name: str, values: dict, obs_dim: int, act_dim: int, *, model=None, sampler=None, ds=None,
                device: str | torch.device = "cpu", acting_only: bool = False):
    """A learner ready to train; model-free references take what they need from the data.
    ``acting_only``: a shell for saved weights to act with (no world model needed)."""
    cls, cfg = agent_class(name), agent_config(name, values)
    if cls.uses_model and model is None and not acting_only:
        raise ReverieError(f"agent '{name}' needs a world model")
    if cls is NEUBAY:
        return NEUBAY(obs_dim, act_dim, cfg, model=model,
                      obs_stats=sampler.obs_stats() if sampler is not None else None, device=device)
    if cls is TD3BC:
        return TD3BC(obs_dim, act_dim, cfg, obs_stats=sampler.obs_stats() if sampler is not None else None,
                     device=device)
    if cls is IQL:
        returns = ds.episode_returns() if ds is not None else np.array([0.0, 1000.0])
        spread = float(returns.max() - returns.min()) if len(returns) > 1 else 0.0
        return IQL(obs_dim, act_dim, cfg, reward_scale=1000.0 / spread if spread > 0 else 1.0, device=device)
    if cls is MOBILE and cfg.target_floor is not None and ds is not None and len(ds.rewards) \
            and float(ds.rewards.mean()) < cfg.target_floor:    # a warning: the authors clamp halfcheetah-random too
        warnings.warn(f"agent.target_floor={cfg.target_floor} is above {ds.name}'s mean reward "
                      f"({float(ds.rewards.mean()):.3g}): MOBILE clamps every critic target at it, as its authors do "
                      "on locomotion; set agent.target_floor=null for a task whose returns are negative", stacklevel=2)
    return cls(obs_dim, act_dim, cfg, model=model, device=device)


def load_learner(run_dir: str | Path, obs_dim: int, act_dim: int):
    """The learner a ``reverie train`` run saved (``config.yaml`` + ``learner.pt``), ready to act:
    ``(agent name, learner)``. Refused, naming the file, if it does not fit ``obs_dim``/``act_dim``."""
    from omegaconf import OmegaConf

    from agents.training import LOOP_KEYS

    run_dir = Path(run_dir)
    for f in ("config.yaml", "learner.pt"):
        if not (run_dir / f).is_file():
            raise ReverieError(f"{run_dir}: not a finished `reverie train` run (no {f})")
    agent = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml").agent, resolve=True)
    name = agent.pop("name")
    for key in ("tuned", "world_model", *LOOP_KEYS):
        agent.pop(key, None)
    learner = build_agent(name, agent, obs_dim, act_dim, acting_only=True)
    try:
        learner.load_state_dict(torch.load(run_dir / "learner.pt", map_location="cpu", weights_only=False))
    except RuntimeError as exc:
        raise ReverieError(f"{run_dir / 'learner.pt'}: does not fit a task with obs_dim={obs_dim}, "
                           f"act_dim={act_dim} ({str(exc).splitlines()[-1].strip()})") from None
    return name, learner
