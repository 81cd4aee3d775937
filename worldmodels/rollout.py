"""One batched rollout engine for world models and real simulators.

``rollout(source, policy, start, horizon, generator, truncate)`` drives any
source that keeps the step contract (``worldmodels.contract``): a learned model,
or ``SimulatorSource``, which wraps a batch of MuJoCo simulators reset to
dataset states through qpos/qvel. Because both go through the same loop, an
imagined return and a simulator return of the same policy from the same start
states are directly comparable.

A row stops when the task terminates it, when a truncation rule cuts it (a
fixed horizon, or uncertainty above a threshold measured on the model's own
dataset), or when its prediction turns NaN or inf. The NaN guard counts those
rows and never drops them silently. A cut row's last kept step is marked
``truncated``; the step that broke a rule is not kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np
import torch
from torch import Tensor

from envs.simulator import SimulatorBatch
from envs.tasks import Task, get_task
from worldmodels.contract import ModelSpec, StepOut, check_batch


@dataclass
class StartStates:
    obs: Tensor                 # [B, obs_dim]
    qpos: Tensor | None = None  # [B, nq] for simulators
    qvel: Tensor | None = None  # [B, nv]

    @classmethod
    def from_dataset(cls, ds, index: np.ndarray) -> "StartStates":
        qpos = torch.from_numpy(ds.qpos[index]) if ds.has_states else None
        qvel = torch.from_numpy(ds.qvel[index]) if ds.has_states else None
        return cls(torch.from_numpy(ds.observations[index]), qpos, qvel)


class Policy(Protocol):
    """``act`` sees the observation, whether it is the row's first step, and the reward of
    the previous step (zeros on the first): what a history-dependent agent conditions on."""

    def initial_state(self, batch_size: int) -> Any: ...

    def act(self, state: Any, obs: Tensor, first: Tensor, *, deterministic: bool,
            generator: torch.Generator | None = None, prev_reward: Tensor | None = None) -> tuple[Any, Tensor]: ...


class ActorPolicy:
    """A stateless actor (``obs -> action in [-1, 1]``) with optional Gaussian exploration noise."""

    def __init__(self, actor: torch.nn.Module, noise_std: float = 0.0):
        self.actor, self.noise_std = actor, noise_std

    def initial_state(self, batch_size: int) -> None:
        return None

    @torch.no_grad()
    def act(self, state, obs, first, *, deterministic, generator=None, prev_reward=None):
        a = self.actor(obs)
        if not deterministic and self.noise_std > 0:
            a = (a + self.noise_std * torch.randn(a.shape, generator=generator, device=a.device)).clamp(-1, 1)
        return state, a


class SimulatorSource:
    """A ``SimulatorBatch`` behind the world-model step contract (its state lives in MuJoCo)."""

    def __init__(self, task: str | Task, batch_size: int):
        self.task = task if isinstance(task, Task) else get_task(task)
        self.sim = SimulatorBatch(self.task, batch_size)
        self.spec = ModelSpec(self.task.obs_dim, self.task.act_dim, members=1, task=self.task.name)

    def init_state(self, start: StartStates, generator: torch.Generator | None = None) -> None:
        if start.qpos is None or start.qvel is None:
            raise ValueError("SimulatorSource needs start states with qpos and qvel")
        obs = self.sim.reset_to(start.qpos.double().numpy(), start.qvel.double().numpy())
        if not np.allclose(obs, start.obs.numpy(), atol=1e-5):
            raise ValueError("start.obs does not match the simulator state given by qpos/qvel")
        return None

    def step(self, state, action: Tensor, *, generator=None, deterministic: bool = True) -> tuple[None, StepOut]:
        obs, rew, term, trunc = self.sim.step(action.numpy())
        return None, StepOut(torch.from_numpy(obs), torch.from_numpy(rew), torch.from_numpy(term),
                             torch.zeros(len(rew)), time_limit=torch.from_numpy(trunc))


class StateRange:
    """Cut a row whose next observation leaves ``mean ± k * std`` of the model's data in any coordinate:
    a finite prediction that has run off to 1e30 is as meaningless as a NaN (the guard counts it apart)."""

    def __init__(self, low: Tensor, high: Tensor):
        self.low, self.high = low, high

    @classmethod
    def of_model(cls, model, stds: float) -> "StateRange | None":
        """From the model's data scale (``model.data_scale()``: mean and std of its observations), or
        None for a model that does not know it."""
        scale = model.data_scale() if hasattr(model, "data_scale") else None
        if scale is None:
            return None
        mean, std = scale
        return cls(mean - stds * std, mean + stds * std)

    def contains(self, obs: Tensor) -> Tensor:
        return ((obs >= self.low) & (obs <= self.high)).all(1)


class UncertaintyThreshold:
    """Cut a row when its uncertainty passes ``threshold``."""

    def __init__(self, threshold: float):
        self.threshold = float(threshold)

    @classmethod
    def from_dataset(cls, model, obs: Tensor, act: Tensor, quantile: float = 1.0,
                     generator: torch.Generator | None = None, batch: int = 10_000,
                     held_members: bool = False) -> "UncertaintyThreshold":
        """The ``quantile`` (1.0: the maximum) of the uncertainty the model shows one
        step from its own dataset's state-action pairs, measured the way the rollouts
        will run: with a member drawn per step, or (``held_members``) one held per row."""
        scores = []
        for i in range(0, len(obs), batch):
            rows = obs[i:i + batch]
            member = model.sample_members(len(rows), generator) if held_members else None
            state = model.init_state(rows, generator, member=member)
            _, out = model.step(state, act[i:i + batch], generator=generator, deterministic=True)
            scores.append(out.uncertainty)
        return cls(torch.quantile(torch.cat(scores).float(), quantile).item())

    @classmethod
    def on_data(cls, model, obs: Tensor, act: Tensor, quantile: float = 1.0, seed: int = 0,
                held_members: bool = False, rows: int = 10_000) -> "UncertaintyThreshold":
        """``from_dataset`` on up to ``rows`` of the data's state-action pairs, drawn (and the members held on
        them) from ``seed``: the cut a training run with that seed measures, rebuilt the same by any caller."""
        pick = torch.randperm(len(obs), generator=torch.Generator().manual_seed(seed))[:rows].to(obs.device)
        return cls.from_dataset(model, obs[pick], act[pick], quantile, held_members=held_members,
                                generator=torch.Generator(obs.device).manual_seed(seed))

    def exceeds(self, uncertainty: Tensor) -> Tensor:
        return uncertainty > self.threshold


@dataclass
class Rollout:
    obs: Tensor           # [T, B, obs_dim] observation before each step
    actions: Tensor       # [T, B, act_dim]
    rewards: Tensor       # [T, B]
    next_obs: Tensor      # [T, B, obs_dim]
    terminated: Tensor    # [T, B] bool
    truncated: Tensor     # [T, B] bool: the row's last kept step, cut by a rule, the horizon or NaN
    uncertainty: Tensor   # [T, B]
    valid: Tensor         # [T, B] bool: the step was taken and kept
    nonfinite_rows: int   # rows cut because a prediction was NaN or inf
    rule_cut_rows: int    # rows cut by the uncertainty rule
    judged: Tensor | None = None  # [T, B] the caller's ``judge`` of each step (e.g. MOPO's uncertainty)
    diverged_rows: int = 0  # rows cut because a finite prediction left the ``StateRange``

    def returns(self) -> Tensor:
        return (self.rewards * self.valid).sum(0)

    def lengths(self) -> Tensor:
        return self.valid.sum(0)

    def transitions(self) -> dict[str, Tensor]:
        """The kept steps, flattened: what a model replay buffer stores."""
        m = self.valid
        out = {"obs": self.obs[m], "actions": self.actions[m], "rewards": self.rewards[m],
               "next_obs": self.next_obs[m], "terminated": self.terminated[m]}
        if self.judged is not None:
            out["judged"] = self.judged[m]
        return out


@torch.no_grad()
def rollout(source, policy: Policy, start: StartStates | Tensor, horizon: int, generator: torch.Generator,
            truncate: UncertaintyThreshold | None = None, deterministic: bool = False, sample_model: bool = True,
            judge: Callable[[StepOut], Tensor] | None = None, bounds: StateRange | None = None,
            **init_kwargs) -> Rollout:
    """Roll ``policy`` in ``source`` for up to ``horizon`` steps from ``start``.

    ``deterministic`` is the policy's choice (no exploration noise);
    ``sample_model=False`` takes a model's mean prediction instead of a sample.
    ``judge(step_out) -> [B]`` is recorded for every kept step: a learner's score
    computed from what the model returned (its members), without a second pass.
    Extra keyword arguments go to ``source.init_state`` (e.g. ``member=`` to hold
    one ensemble member per row for the whole rollout, as NEUBAY does). ``bounds`` cuts rows whose
    prediction diverged (left the range), as NaN and inf rows are cut."""
    start = start if isinstance(start, StartStates) else StartStates(start)
    spec = source.spec
    check_batch("start.obs", start.obs, spec.obs_dim)
    B = start.obs.shape[0]
    if horizon < 1:
        raise ValueError(f"horizon: expected a positive number of steps, got {horizon}")
    if getattr(source, "plans_with_policy", False):   # a segment model plans a segment's later actions
        init_kwargs = {"policy": policy, "policy_deterministic": deterministic, **init_kwargs}
    state = source.init_state(start if isinstance(source, SimulatorSource) else start.obs, generator, **init_kwargs)
    pstate = policy.initial_state(B)
    obs = start.obs
    T, dev = horizon, obs.device
    f32, flag = {"device": dev}, {"dtype": torch.bool, "device": dev}
    rec = {"obs": torch.zeros(T, B, spec.obs_dim, **f32), "actions": torch.zeros(T, B, spec.act_dim, **f32),
           "rewards": torch.zeros(T, B, **f32), "next_obs": torch.zeros(T, B, spec.obs_dim, **f32),
           "terminated": torch.zeros(T, B, **flag), "truncated": torch.zeros(T, B, **flag),
           "uncertainty": torch.zeros(T, B, **f32), "valid": torch.zeros(T, B, **flag)}
    if judge is not None:
        rec["judged"] = torch.zeros(T, B, **f32)
    alive = torch.ones(B, **flag)
    prev_reward = torch.zeros(B, **f32)
    first = torch.ones(B, **flag)
    last_kept = torch.full((B,), -1, dtype=torch.long, device=dev)
    nonfinite = rule_cut = diverged = 0
    for t in range(T):
        pstate, act = policy.act(pstate, obs, first, deterministic=deterministic, generator=generator,
                                 prev_reward=prev_reward)
        state, out = source.step(state, act, generator=generator, deterministic=not sample_model)
        finite = torch.isfinite(out.obs).all(1) & torch.isfinite(out.reward)
        sane = finite & bounds.contains(out.obs) if bounds is not None else finite
        over = truncate.exceeds(out.uncertainty) if truncate is not None else torch.zeros(B, **flag)
        keep = alive & sane & ~over
        nonfinite += int((alive & ~finite).sum())
        diverged += int((alive & finite & ~sane).sum())
        rule_cut += int((alive & sane & over).sum())
        cut = alive & ~keep                     # stopped by the guard or the rule: close the previous step
        closable = cut & (last_kept >= 0)
        rec["truncated"][last_kept[closable], closable.nonzero().squeeze(1)] = True
        next_obs = torch.where(keep[:, None], out.obs, obs)
        rec["obs"][t], rec["actions"][t], rec["next_obs"][t] = obs, act, next_obs
        rec["rewards"][t] = torch.where(keep, out.reward, torch.zeros_like(out.reward))
        rec["terminated"][t] = out.terminated & keep
        rec["uncertainty"][t] = torch.where(keep, out.uncertainty, torch.zeros_like(out.uncertainty))
        rec["valid"][t] = keep
        if judge is not None:
            rec["judged"][t] = torch.where(keep, judge(out), torch.zeros_like(out.reward))
        last_kept = torch.where(keep, torch.full_like(last_kept, t), last_kept)
        ended = out.terminated
        if out.time_limit is not None:
            rec["truncated"][t] |= keep & out.time_limit & ~out.terminated
            ended = ended | out.time_limit
        alive = keep & ~ended
        obs, prev_reward = next_obs, rec["rewards"][t]
        first = torch.zeros(B, **flag)
        if not alive.any():
            break
    rows = alive.nonzero().squeeze(1)
    rec["truncated"][last_kept[rows], rows] = True   # reached the horizon
    return Rollout(**rec, nonfinite_rows=nonfinite, rule_cut_rows=rule_cut, diverged_rows=diverged)


class ModelReplayBuffer:
    """A FIFO store of imagined transitions (torch tensors), sampled uniformly."""

    def __init__(self, obs_dim: int, act_dim: int, capacity: int, device: str | torch.device = "cpu"):
        self.capacity, self.size, self.ptr, self.device = capacity, 0, 0, torch.device(device)
        d = {"device": self.device}
        self.data = {"obs": torch.zeros(capacity, obs_dim, **d), "actions": torch.zeros(capacity, act_dim, **d),
                     "rewards": torch.zeros(capacity, **d), "next_obs": torch.zeros(capacity, obs_dim, **d),
                     "terminated": torch.zeros(capacity, dtype=torch.bool, **d)}

    def add(self, transitions: dict[str, Tensor]) -> None:
        n = len(transitions["rewards"])
        if n > self.capacity:
            transitions = {k: v[-self.capacity:] for k, v in transitions.items()}
            n = self.capacity
        idx = (self.ptr + torch.arange(n, device=self.device)) % self.capacity
        for k, v in self.data.items():
            v[idx] = transitions[k]
        self.ptr = (self.ptr + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def state_dict(self) -> dict:
        return {"data": {k: v[:self.size] for k, v in self.data.items()}, "ptr": self.ptr, "size": self.size}

    def load_state_dict(self, state: dict) -> None:
        self.size, self.ptr = int(state["size"]), int(state["ptr"])
        for k, v in self.data.items():
            v[:self.size] = state["data"][k]

    def sample(self, batch: int, generator: torch.Generator) -> dict[str, Tensor]:
        if self.size == 0:
            raise ValueError("ModelReplayBuffer.sample: the buffer is empty")
        idx = torch.randint(0, self.size, (batch,), generator=generator, device=self.device)
        return {k: v[idx] for k, v in self.data.items()}
