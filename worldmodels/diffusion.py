"""``DiffusionWorldModel``: an action-conditioned diffusion model behind the same step contract.

Two modes (``mode``):

- ``step``: the next transition. The denoiser sees the noisy normalised
  ``[next_obs - obs, reward]``, the normalised ``[obs, action]`` and the noise
  level; a residual MLP.
- ``segment`` (in the style of DWM): ``H`` future steps at once. The denoiser
  sees the noisy ``[H, obs_dim + 1]`` segment (next observations as offsets from
  the segment's first state, and rewards), the ``H`` actions, the first state and
  the noise level; a 1-D temporal convolution net (kernel 3, residual). The rollout engine still
  drives it one step at a time: a segment is generated at its first step, its
  future actions planned by the acting policy on the segment's own predicted
  states (a few passes, as DyDiff does), and later steps are served from it as
  long as the policy's action is the planned one (within ``plan_tolerance``). A
  row whose action differs (a stochastic policy, a history the planner could not
  see) gets a new segment from its current state, so every served prediction is
  conditioned on actions within that tolerance of the ones actually taken.

The network that predicts is kept apart from the scheduler that samples:
training uses diffusers' ``DDPMScheduler`` (noise added at a random step of
``train_timesteps``), rollouts use ``sampler`` (``ddim``, ``euler``, ``dpm``
or ``ddpm``) with ``sample_steps`` steps, built from the training scheduler's
config.

Uncertainty is the disagreement of a small ensemble of denoisers (``members``,
trained on their own bootstrap samples, run in one batched operation, all from
the same initial noise): the largest distance of a member's predicted next state
from the members' mean. An ensemble is used rather than the spread of repeated
samples from one denoiser because that spread is the model's estimate of the
data's own randomness (aleatoric, near zero for MuJoCo's deterministic
physics), while disagreement between independently trained denoisers grows away
from the data (epistemic), which is what truncation and MOPO's penalty need;
with the shared noise the members' samples differ only through their weights.
``members`` in ``StepOut`` therefore carries each member's sample and a zero
standard deviation: MOPO must use ``penalty=disagreement`` with this model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from agents.networks import EnsembleLinear
from envs.errors import ReverieError
from envs.tasks import get_task
from worldmodels.base import FitCheckpoint, WorldModel, fit_members
from worldmodels.contract import ModelSpec, StepOut, check_batch
from worldmodels.ensemble import Normalizer

CHECKPOINT_FORMAT = "reverie.diffusion/1"
SAMPLERS = ("ddim", "euler", "dpm", "ddpm")
PREDICTIONS = ("sample", "epsilon", "v_prediction")


@dataclass
class DiffusionConfig:
    mode: str = "step"              # step: the next transition; segment: H steps at once
    segment: int = 8                # H, for mode=segment
    members: int = 5                # denoisers; their disagreement is the uncertainty
    elites: int = 5
    hidden: int = 256               # width (step: MLP units; segment: channels per member)
    blocks: int = 2                 # residual blocks
    time_embedding: int = 32
    train_timesteps: int = 1000
    prediction: str = "sample"      # what the denoiser predicts: the clean sample, the noise, or v
    sampler: str = "ddim"           # ddim | euler | dpm | ddpm (rollouts)
    sample_steps: int = 3
    plan_passes: int = 1            # segment mode: policy re-planning passes per generated segment
    plan_tolerance: float = 0.05    # segment mode: a step is served from the segment while the action taken
                                    # is within this (max abs, actions in [-1, 1]) of the planned one
    lr: float = 1e-3
    weight_decay: float = 1e-5
    batch_size: int = 256
    holdout_ratio: float = 0.1
    max_holdout: int = 5000
    max_epochs: int = 100
    patience: int = 5
    improvement: float = 0.01

    def validate(self) -> "DiffusionConfig":
        if self.mode not in ("step", "segment"):
            raise ReverieError(f"world_model.mode: expected 'step' or 'segment', got '{self.mode}'")
        if self.sampler not in SAMPLERS:
            raise ReverieError(f"world_model.sampler: expected one of {', '.join(SAMPLERS)}, got '{self.sampler}'")
        if self.prediction not in PREDICTIONS:
            raise ReverieError(f"world_model.prediction: expected one of {', '.join(PREDICTIONS)}, "
                               f"got '{self.prediction}'")
        if self.members < 1 or not 1 <= self.elites <= self.members:
            raise ReverieError(f"world_model: expected 1 <= elites <= members, got elites={self.elites}, "
                               f"members={self.members}")
        for name in ("segment", "hidden", "sample_steps", "train_timesteps", "batch_size", "max_epochs"):
            if getattr(self, name) < 1:
                raise ReverieError(f"world_model.{name}: expected a positive integer, got {getattr(self, name)}")
        if self.sample_steps > self.train_timesteps:
            raise ReverieError(f"world_model.sample_steps: expected at most train_timesteps "
                               f"({self.train_timesteps}), got {self.sample_steps}")
        if not 0.0 < self.holdout_ratio < 1.0:
            raise ReverieError(f"world_model.holdout_ratio: expected a value in (0, 1), got {self.holdout_ratio}")
        return self

    @property
    def horizon(self) -> int:
        return self.segment if self.mode == "segment" else 1


def timestep_embedding(t: Tensor, dim: int) -> Tensor:
    """Sinusoidal embedding of the diffusion step ``[B] -> [B, dim]``."""
    half = dim // 2
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, device=t.device) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([args.sin(), args.cos()], dim=-1)


class StepDenoiser(nn.Module):
    """E residual MLPs in one batched op: ``(x_t [E,B,D], cond [B,C], temb [B,T]) -> [E,B,D]``."""

    def __init__(self, members: int, dim: int, cond: int, cfg: DiffusionConfig):
        super().__init__()
        H = cfg.hidden
        self.inp = EnsembleLinear(members, dim + cond + cfg.time_embedding, H)
        self.blocks = nn.ModuleList(nn.ModuleList([EnsembleLinear(members, H, H), EnsembleLinear(members, H, H)])
                                    for _ in range(cfg.blocks))
        self.out = EnsembleLinear(members, H, dim)

    def forward(self, x: Tensor, cond: Tensor, temb: Tensor) -> Tensor:
        """``cond``/``temb`` are shared ``[B, *]`` or per member ``[E, B, *]``."""
        E = x.shape[0]
        ctx = torch.cat([cond, temb], dim=-1)
        h = self.inp(torch.cat([x, ctx.expand(E, *ctx.shape[-2:])], dim=-1))
        for a, b in self.blocks:
            h = h + b(F.silu(a(F.silu(h))))
        return self.out(F.silu(h))


class TemporalConv(nn.Module):
    """E kernel-3 convolutions over time as one batched matmul: each step sees itself and its two
    neighbours (zero-padded), ``[E, B, H, C_in] -> [E, B, H, C_out]``. Written as a linear map of the
    stacked neighbours because grouped ``Conv1d`` runs several times slower on CPUs."""

    def __init__(self, members: int, c_in: int, c_out: int):
        super().__init__()
        self.lin = EnsembleLinear(members, 3 * c_in, c_out)

    def forward(self, x: Tensor) -> Tensor:
        E, B, H, C = x.shape
        p = F.pad(x, (0, 0, 1, 1))
        z = torch.cat([p[:, :, :-2], p[:, :, 1:-1], p[:, :, 2:]], dim=-1)
        return self.lin(z.reshape(E, B * H, 3 * C)).reshape(E, B, H, -1)


class SegmentDenoiser(nn.Module):
    """E temporal conv nets in one batched op:
    ``(x_t [E,B,H,D], actions [B,H,A], cond [B,C], temb [B,T]) -> [E,B,H,D]``."""

    def __init__(self, members: int, dim: int, act_dim: int, cond: int, cfg: DiffusionConfig):
        super().__init__()
        E, C = members, cfg.hidden
        self.inp = TemporalConv(E, dim + act_dim + cond + cfg.time_embedding, C)
        self.blocks = nn.ModuleList(nn.ModuleList([TemporalConv(E, C, C), TemporalConv(E, C, C)])
                                    for _ in range(cfg.blocks))
        self.out = EnsembleLinear(E, C, dim)

    def forward(self, x: Tensor, actions: Tensor, cond: Tensor, temb: Tensor) -> Tensor:
        """``actions`` ``[B, H, A]``, ``cond``/``temb`` ``[B, *]``, or each with a leading member axis."""
        E, B, H, _ = x.shape
        per_step = torch.cat([cond, temb], -1).unsqueeze(-2)
        ctx = torch.cat([actions, per_step.expand(*per_step.shape[:-2], H, per_step.shape[-1])], dim=-1)
        h = self.inp(torch.cat([x, ctx.expand(E, B, H, ctx.shape[-1])], dim=-1))
        for a, b in self.blocks:
            h = h + b(F.silu(a(F.silu(h))))
        return self.out(F.silu(h).reshape(E, B * H, -1)).reshape(E, B, H, -1)


class DiffusionWorldModel(WorldModel):
    checkpoint_format = CHECKPOINT_FORMAT
    config_class = DiffusionConfig

    def __init__(self, obs_dim: int, act_dim: int, cfg: DiffusionConfig | None = None, task: str | None = None,
                 terminated=None):
        super().__init__()
        self.cfg = cfg = (cfg or DiffusionConfig()).validate()
        E, H = cfg.members, cfg.horizon
        self.spec = ModelSpec(obs_dim, act_dim, members=E, context_length=1, task=task)
        self.dim = obs_dim + 1
        if cfg.mode == "step":
            self.net = StepDenoiser(E, self.dim, obs_dim + act_dim, cfg)
        else:
            self.net = SegmentDenoiser(E, self.dim, act_dim, obs_dim, cfg)
        self.obs_norm = Normalizer(obs_dim)
        self.act_norm = Normalizer(act_dim)
        self.target_norm = Normalizer(H * self.dim)          # per segment position and coordinate
        self.register_buffer("elites", torch.arange(cfg.elites))
        self.register_buffer("holdout_mse", torch.full((E,), float("nan")))
        self._terminated = terminated or (get_task(task).terminated if task else None)
        self.train_scheduler = self._scheduler("ddpm")
        self._sampler = None                                # built on first use from the training config
        self.chunk_rows: int | None = 1024
        self.plans_with_policy = cfg.mode == "segment"

    fits_on_episodes = True      # segments must not cross an episode's end
    has_aleatoric = False        # no Gaussian std: MOPO's aleatoric penalty does not apply
    # --------------------------------------------------------------- schedulers
    def _scheduler(self, name: str):
        from diffusers import DDIMScheduler, DDPMScheduler, DPMSolverMultistepScheduler, EulerDiscreteScheduler

        base = DDPMScheduler(num_train_timesteps=self.cfg.train_timesteps, prediction_type=self.cfg.prediction,
                             clip_sample=False)
        if name == "ddpm":
            return base
        cls = {"ddim": DDIMScheduler, "euler": EulerDiscreteScheduler, "dpm": DPMSolverMultistepScheduler}[name]
        return cls.from_config(base.config, timestep_spacing="trailing")

    # ------------------------------------------------------------------ network
    def _denoise(self, x: Tensor, t: Tensor, obs_n: Tensor, act_n: Tensor) -> Tensor:
        """Normalised inputs, shared by the members (``t`` ``[B]``) or per member (``t`` ``[E, B]``)."""
        temb = timestep_embedding(t.reshape(-1), self.cfg.time_embedding).reshape(*t.shape, -1)
        if self.cfg.mode == "step":
            return self.net(x, torch.cat([obs_n, act_n], -1), temb)
        return self.net(x, act_n, obs_n, temb)

    def _shape(self, B: int) -> tuple[int, ...]:
        return (B, self.dim) if self.cfg.mode == "step" else (B, self.cfg.segment, self.dim)

    def initial_noise(self, B: int, generator: torch.Generator | None, deterministic: bool,
                      device: torch.device | str = "cpu") -> Tensor:
        shape = self._shape(B)
        return (torch.zeros(shape, device=device) if deterministic
                else torch.randn(shape, generator=generator, device=device))

    @torch.no_grad()
    def _sample(self, obs: Tensor, actions: Tensor, generator: torch.Generator | None,
                deterministic: bool, noise: Tensor | None = None) -> Tensor:
        """Every member's normalised sample from the same initial noise: ``[E, *shape]``.
        ``actions`` is ``[B, A]`` (step) or ``[B, H, A]`` (segment)."""
        cfg = self.cfg
        B = obs.shape[0]
        if noise is None:
            noise = self.initial_noise(B, generator, deterministic, obs.device)
        if self.chunk_rows and B > self.chunk_rows:    # blocks of rows stay in cache: ~2x, as for the ensemble
            return torch.cat([self._sample(obs[i:i + self.chunk_rows], actions[i:i + self.chunk_rows], generator,
                                           deterministic, noise[i:i + self.chunk_rows])
                              for i in range(0, B, self.chunk_rows)], dim=1)
        if self._sampler is None:
            self._sampler = self._scheduler(cfg.sampler)
        sched = self._sampler
        sched.set_timesteps(cfg.sample_steps, device=obs.device)
        shape = self._shape(B)
        x = (noise * sched.init_noise_sigma).expand(cfg.members, *shape).contiguous()
        obs_n, act_n = self.obs_norm(obs), self.act_norm(actions)
        flat = (cfg.members * B, *shape[1:])
        for t in sched.timesteps:
            inp = sched.scale_model_input(x.reshape(flat), t).reshape(x.shape)
            out = self._denoise(inp, t.expand(B), obs_n, act_n)
            kw = {"generator": generator} if cfg.sampler == "ddpm" and not deterministic else {}
            x = sched.step(out.reshape(flat), t, x.reshape(flat), **kw).prev_sample.reshape(x.shape)
        return x

    def _to_world(self, obs: Tensor, y: Tensor) -> Tensor:
        """Normalised targets ``[..., B, H*D or D]`` -> ``[..., B, H, obs_dim + 1]`` next observations and rewards."""
        B = obs.shape[0]
        y = self.target_norm.inverse(y.reshape(*y.shape[:-2], B, -1) if self.cfg.mode == "segment" else y)
        y = y.reshape(*y.shape[:-1], self.cfg.horizon, self.dim)
        return torch.cat([y[..., :-1] + obs[:, None, :], y[..., -1:]], dim=-1)

    @torch.no_grad()
    def predict_segments(self, obs: Tensor, actions: Tensor, generator: torch.Generator | None = None,
                         deterministic: bool = False, noise: Tensor | None = None) -> Tensor:
        """Every member's ``[E, B, H, obs_dim + 1]`` (next observation, reward) for the given actions
        (``[B, A]`` in step mode: H = 1; ``[B, H, A]`` in segment mode); ``noise``: the initial noise."""
        check_batch("obs", obs, self.spec.obs_dim)
        x = self._sample(obs, actions, generator, deterministic, noise)
        y = x if self.cfg.mode == "step" else x.reshape(*x.shape[:2], -1)
        return self._to_world(obs, y)

    @torch.no_grad()
    def predict(self, obs: Tensor, act: Tensor) -> tuple[Tensor, Tensor]:
        """The contract's per-member one-step prediction, ``[E, B, obs_dim + 1]`` each: every member's
        deterministic sample, and a zero std (a diffusion model keeps no Gaussian; see the module doc).
        In segment mode the action is held for the whole segment and the first step is returned."""
        check_batch("action", act, self.spec.act_dim, obs.shape[0])
        a = act if self.cfg.mode == "step" else act[:, None].expand(-1, self.cfg.segment, -1)
        first = self.predict_segments(obs, a, deterministic=True)[:, :, 0]
        return first, torch.zeros_like(first)

    def data_scale(self) -> tuple[Tensor, Tensor]:
        """Mean and std of the observations the model was fitted on (``rollout``'s ``StateRange``)."""
        return self.obs_norm.mean, self.obs_norm.std

    def init_state(self, start: Tensor, generator: torch.Generator | None = None, member: Tensor | None = None,
                   policy=None, policy_deterministic: bool = True) -> dict:
        self.check_start(start, member)
        B, H = start.shape[0], self.cfg.horizon
        return {"obs": start, "member": member, "policy": policy, "policy_deterministic": policy_deterministic,
                "k": torch.full((B,), H, dtype=torch.long, device=start.device),          # H: no segment yet
                "plan": torch.zeros(B, H, self.dim, device=start.device),
                "plan_actions": torch.zeros(B, H, self.spec.act_dim, device=start.device),
                "plan_uncertainty": torch.zeros(B, H, device=start.device),
                "plan_members": torch.zeros(self.cfg.members, B, H, self.dim, device=start.device),
                "segments": 0}

    def _disagreement(self, preds: Tensor) -> Tensor:
        """The elites' disagreement over the next states, ``[E, B, H, D] -> [B, H]``."""
        elite = preds[self.elites][..., :-1]
        return (elite - elite.mean(0)).norm(dim=-1).max(0).values

    def _plan(self, obs: Tensor, first_action: Tensor, pick: Tensor, policy, generator,
              deterministic: bool) -> tuple[Tensor, Tensor]:
        """A segment from ``obs`` whose first action is given and whose later actions the policy
        chooses, acting deterministically on the segment's own predicted states of each row's member
        (``plan_passes`` passes); every member's prediction and the actions it was generated for."""
        H = self.cfg.segment
        B = obs.shape[0]
        rows = torch.arange(B, device=obs.device)
        actions = first_action[:, None].expand(-1, H, -1).clone()
        noise = self.initial_noise(B, generator, deterministic, obs.device)   # one draw for every pass
        preds = self.predict_segments(obs, actions, generator, deterministic, noise)
        for _ in range(self.cfg.plan_passes if policy is not None else 0):
            states = preds[pick, rows][:, :-1, :-1]                   # [B, H-1, obs] of the row's member
            pstate = policy.initial_state(B)
            first = torch.zeros(B, dtype=torch.bool, device=obs.device)
            for j in range(H - 1):
                pstate, actions[:, j + 1] = policy.act(pstate, states[:, j], first, deterministic=True)
            preds = self.predict_segments(obs, actions, generator, deterministic, noise)
        return preds, actions

    @torch.no_grad()
    def step(self, state: dict, action: Tensor, *, generator: torch.Generator | None = None,
             deterministic: bool = False) -> tuple[dict, StepOut]:
        check_batch("action", action, self.spec.act_dim, state["obs"].shape[0])
        obs, member, H = state["obs"], state["member"], self.cfg.horizon
        k = state["k"]
        rows = torch.arange(obs.shape[0], device=obs.device)
        if H == 1:
            stale = torch.ones_like(k, dtype=torch.bool)
        else:
            planned = state["plan_actions"][rows, k.clamp_max(H - 1)]
            stale = (k >= H) | ((planned - action).abs().amax(-1) > self.cfg.plan_tolerance)
        plan, plan_actions = state["plan"].clone(), state["plan_actions"].clone()
        plan_u, plan_m = state["plan_uncertainty"].clone(), state["plan_members"].clone()
        segments = state["segments"]
        if stale.any():
            idx = stale.nonzero().squeeze(1)
            pick = member[idx] if member is not None else self.sample_members(len(idx), generator)
            if H == 1:
                preds = self.predict_segments(obs[idx], action[idx], generator, deterministic)
                acts = action[idx][:, None]
            else:   # a stochastic policy's later actions cannot be planned: hold the first one
                planner = state["policy"] if state["policy_deterministic"] else None
                preds, acts = self._plan(obs[idx], action[idx], pick, planner, generator, deterministic)
            chosen = preds[pick, torch.arange(len(idx), device=obs.device)]
            plan[idx], plan_actions[idx], plan_u[idx] = chosen, acts, self._disagreement(preds)
            plan_m[:, idx] = preds
            k = torch.where(stale, torch.zeros_like(k), k)
            segments += 1
        out = plan[rows, k]
        # a segment's states are offsets from its first state; rows served from a plan keep its frame
        next_obs, reward = out[:, :-1], out[:, -1]
        terminated = (self._terminated(next_obs) if self._terminated is not None
                      else torch.zeros_like(reward, dtype=torch.bool))
        members = plan_m[:, rows, k]
        new = {**state, "obs": next_obs, "k": k + 1, "plan": plan, "plan_actions": plan_actions,
               "plan_uncertainty": plan_u, "plan_members": plan_m, "segments": segments}
        return new, StepOut(next_obs, reward, terminated, plan_u[rows, k],
                            members=(members, torch.zeros_like(members)))

    # --------------------------------------------------------------------- fit
    def _windows(self, n: int, episode_end: np.ndarray) -> Tensor:
        """Start rows of the training windows: ``H`` consecutive steps inside one episode."""
        H = self.cfg.horizon
        starts = np.arange(n)
        return torch.from_numpy(starts[starts + H <= episode_end[starts]])

    def fit(self, obs: Tensor, act: Tensor, next_obs: Tensor, reward: Tensor, generator: torch.Generator,
            progress=None, checkpoint: str | Path | None = None, episode_ends: np.ndarray | None = None
            ) -> dict[str, float]:
        """Every denoiser on its own bootstrap of the training windows, with the DDPM loss on the
        configured prediction target; early stopping on the holdout windows' loss at fixed noise
        (the same draws every epoch); each member keeps its best weights; elites by that loss.
        ``checkpoint`` makes the fit resumable as the ensemble's is."""
        cfg, H, D = self.cfg, self.cfg.horizon, self.dim
        dev = self.elites.device
        n = obs.shape[0]
        fit_checkpoint = FitCheckpoint(checkpoint, n, cfg, generator)   # before any draw: it names the fit
        ends = np.asarray(episode_ends if episode_ends is not None else [n])
        episode_end = np.repeat(ends, np.diff(np.concatenate([[0], ends])))
        starts = self._windows(n, episode_end)
        if len(starts) == 0:
            raise ReverieError(f"dataset holds no window of {H} steps inside one episode")
        idx = starts[:, None] + torch.arange(H)[None]                           # [W, H]
        o, a, no, r = (t.to(dev) for t in (obs, act, next_obs, reward))
        s0 = o[starts]
        targets = torch.cat([no[idx] - s0[:, None], r[idx][..., None]], dim=-1).reshape(len(starts), H * D)
        acts = a[idx]                                                            # [W, H, A]
        W = len(starts)
        n_hold = min(int(W * cfg.holdout_ratio), cfg.max_holdout)
        if n_hold < 1 or W - n_hold < cfg.batch_size:
            raise ReverieError(f"dataset too small to hold out: {W} training windows, need at least "
                               f"{cfg.batch_size} for training plus {max(n_hold, 1)} held out")
        perm = torch.randperm(W, generator=generator).to(dev)
        hold, train = perm[:n_hold], perm[n_hold:]
        self.obs_norm.fit(s0[train])
        self.act_norm.fit(a)
        self.target_norm.fit(targets[train])
        y = self.target_norm(targets)
        E, n_tr = cfg.members, len(train)
        boot = train[torch.randint(0, n_tr, (E, n_tr), generator=generator).to(dev)]
        T = cfg.train_timesteps
        sched = self.train_scheduler
        obs_n, act_n = self.obs_norm(s0), self.act_norm(acts)

        def losses(rows: Tensor, noise: Tensor, t: Tensor) -> Tensor:
            """Each member's DDPM loss ``[E]`` on its own window rows ``[E, b]`` at steps ``t`` ``[E, b]``."""
            x0 = y[rows]
            flat = (-1, H * D)                     # diffusers' schedulers broadcast one step per leading row
            noisy = sched.add_noise(x0.reshape(flat), noise.reshape(flat), t.reshape(-1))
            out = self._denoise(noisy.reshape(E, -1, *self._shape(1)[1:]), t, obs_n[rows],
                                act_n[rows] if cfg.mode == "segment" else act_n[rows][:, :, 0])
            target = {"sample": x0, "epsilon": noise}.get(cfg.prediction)
            if target is None:
                target = sched.get_velocity(x0.reshape(flat), noise.reshape(flat), t.reshape(-1)).reshape(x0.shape)
            return (out.reshape(x0.shape) - target).pow(2).mean(dim=(1, 2))

        hold_rows = hold.expand(E, -1)
        hold_noise = torch.randn(E, n_hold, H * D, generator=generator).to(dev)
        hold_t = torch.randint(0, T, (n_hold,), generator=generator).to(dev).expand(E, -1)
        opt = torch.optim.AdamW(self.net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

        def holdout_loss() -> Tensor:
            with torch.no_grad():
                return losses(hold_rows, hold_noise, hold_t)

        def train_loss(rows: Tensor) -> Tensor:
            noise = torch.randn(E, rows.shape[1], H * D, generator=generator).to(dev)
            t = torch.randint(0, T, rows.shape, generator=generator).to(dev)
            return losses(rows, noise, t).sum()

        member_keys = [k for k in self.state_dict() if k.startswith("net.")]
        best, epoch = fit_members(self, opt, generator, fit_checkpoint, boot, cfg.batch_size, cfg.max_epochs,
                                  cfg.patience, cfg.improvement, train_loss, holdout_loss, member_keys, progress)
        self.holdout_mse.copy_(best)
        self.elites.copy_(torch.argsort(best)[: cfg.elites])
        return {"epochs": float(epoch), "holdout_mse_mean": best.mean().item(),
                "holdout_mse_elites": best[self.elites].mean().item(),
                **{f"holdout_mse/member_{e}": best[e].item() for e in range(E)}}

