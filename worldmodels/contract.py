"""The contract every world model keeps, so one rollout engine drives them all.

State is passed in and handed back: one start state can branch into many
futures, and nothing hides in the model between calls. Tensors crossing the
contract are ``[B, ...]`` float32 on the caller's device; shapes are checked
here, at the boundary, with a message that says what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor


@dataclass(frozen=True)
class ModelSpec:
    obs_dim: int
    act_dim: int
    members: int = 1
    context_length: int = 1
    task: str | None = None


@dataclass
class StepOut:
    obs: Tensor          # [B, obs_dim] next observation
    reward: Tensor       # [B]
    terminated: Tensor   # [B] bool
    uncertainty: Tensor  # [B] epistemic score (zeros where unknown)
    time_limit: Tensor | None = None  # [B] bool: a simulator's episode limit was reached (None for models)
    members: tuple[Tensor, Tensor] | None = None  # every member's mean and std of [next_obs, reward], [E, B, D]
    success: Tensor | None = None        # [B] probability the task is done (manipulation models), else None


class WorldModel(Protocol):
    spec: ModelSpec

    def init_state(self, start: Tensor, generator: torch.Generator) -> Any: ...

    def step(self, state: Any, action: Tensor, *, generator: torch.Generator) -> tuple[Any, StepOut]: ...


def check_batch(name: str, x: Tensor, width: int, batch: int | None = None) -> None:
    """Raise a clear ValueError unless ``x`` is ``[B, width]`` float32 (with ``B == batch`` if given)."""
    if x.ndim != 2 or x.shape[1] != width or (batch is not None and x.shape[0] != batch):
        want = f"[{batch if batch is not None else 'B'}, {width}]"
        raise ValueError(f"{name}: expected shape {want}, got {list(x.shape)}")
    if x.dtype != torch.float32:
        raise ValueError(f"{name}: expected float32, got {x.dtype}")
