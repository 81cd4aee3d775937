"""The learners ``reverie train agent=NAME`` knows, and how one is built from its config."""

from __future__ import annotations

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
                device: str | torch.device = "cpu"):
    """A learner ready to train; model-free references take what they need from the data."""
    cls, cfg = agent_class(name), agent_config(name, values)
    if cls.uses_model and model is None:
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
    return cls(obs_dim, act_dim, cfg, model=model, device=device)
