"""``GaussianEnsemble``: E probabilistic MLPs that predict the change in state and the reward.

All members run in one batched operation (``EnsembleLinear``: one ``baddbmm``
per layer), never a Python loop. Inputs and targets are normalised with
statistics of the training split; the log-variance is soft-clamped between
learned bounds (as in PETS/MBPO); LayerNorm is an option. Each member trains on
its own bootstrap sample, a holdout split drives early stopping, and the elites
are the members with the lowest holdout error.

``predict_member`` is the fast path for callers that need one member per row
(a posterior sample held for a whole episode): rows are grouped by member and
each group goes through its own member's weights only.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from agents.networks import (EnsembleLinear, FusedAdam, FusedAdamW, check_precision, full_precision, resolve_precision,
                             update_precision)
from envs.errors import ReverieError
from envs.tasks import get_task
from worldmodels.base import FitCheckpoint, WorldModel, fit_members
from worldmodels.contract import ModelSpec, StepOut, check_batch

CHECKPOINT_FORMAT = "reverie.gaussian_ensemble/1"


@dataclass
class EnsembleConfig:
    members: int = 7
    elites: int = 5
    hidden: tuple[int, ...] = (200, 200, 200, 200)
    layer_norm: bool = False
    weight_decay: tuple[float, ...] = (2.5e-5, 5e-5, 7.5e-5, 7.5e-5, 1e-4)  # per layer, as MBPO
    # "decoupled": AdamW's decay of the weights and biases, lr * wd * W a step.
    # "l2": MBPO's and OfflineRL-Kit's term wd/2 * ||W||^2 on each layer's weights, added
    #       to the loss under plain Adam (its gradient is rescaled with the rest).
    weight_decay_mode: str = "decoupled"
    lr: float = 1e-3
    batch_size: int = 256
    holdout_ratio: float = 0.1
    max_holdout: int = 5000
    max_epochs: int = 200
    patience: int = 5
    improvement: float = 0.01  # relative holdout improvement that resets patience
    inference_dtype: str = "float32"  # "bfloat16": predictions (not training) under bf16 autocast, ~2x on CPUs with bf16
    fit_precision: str = "float32"    # the fit's updates: float32, bfloat16 (hidden layers under autocast, the output
                                      # layer, the loss and the holdout in float32) or auto (bfloat16 where native)

    def validate(self) -> "EnsembleConfig":
        if self.members < 1 or not 1 <= self.elites <= self.members:
            raise ReverieError(f"world_model: expected 1 <= elites <= members, got elites={self.elites}, "
                               f"members={self.members}")
        if len(self.weight_decay) != len(self.hidden) + 1:
            raise ReverieError(f"world_model.weight_decay: expected {len(self.hidden) + 1} values (one per layer), "
                               f"got {len(self.weight_decay)}")
        if self.weight_decay_mode not in ("decoupled", "l2"):
            raise ReverieError(f"world_model.weight_decay_mode: expected decoupled or l2, "
                               f"got '{self.weight_decay_mode}'")
        if self.inference_dtype not in ("float32", "bfloat16"):
            raise ReverieError(f"world_model.inference_dtype: expected float32 or bfloat16, got '{self.inference_dtype}'")
        check_precision("world_model.fit_precision", self.fit_precision)
        if not 0.0 < self.holdout_ratio < 1.0:
            raise ReverieError(f"world_model.holdout_ratio: expected a value in (0, 1), got {self.holdout_ratio}")
        return self


class EnsembleLayerNorm(nn.Module):
    """LayerNorm over features with each member's own scale and shift: ``[E, B, h]``."""

    def __init__(self, members: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(members, 1, dim))
        self.bias = nn.Parameter(torch.zeros(members, 1, dim))

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, x.shape[-1:]) * self.weight + self.bias


class Normalizer(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    def fit(self, x: Tensor) -> None:
        self.mean.copy_(x.mean(0))
        self.std.copy_(x.std(0).clamp_min(1e-6))

    def forward(self, x: Tensor) -> Tensor:
        return (x - self.mean) / self.std

    def inverse(self, x: Tensor) -> Tensor:
        return x * self.std + self.mean


class GaussianEnsemble(WorldModel):
    checkpoint_format = CHECKPOINT_FORMAT
    config_class = EnsembleConfig
    draws_one_member = True       # init_state(drawn_only=True): a step runs only each row's drawn elite

    def __init__(self, obs_dim: int, act_dim: int, cfg: EnsembleConfig | None = None, task: str | None = None,
                 terminated=None):
        """``terminated`` (a batched ``obs -> bool`` function) overrides the task's; without
        either, imagined episodes end only where a rollout cuts them."""
        super().__init__()
        self.cfg = (cfg or EnsembleConfig()).validate()
        E = self.cfg.members
        self.spec = ModelSpec(obs_dim, act_dim, members=E, task=task)
        self.out_dim = obs_dim + 1  # delta observation, reward
        dims = (obs_dim + act_dim, *self.cfg.hidden)
        self.layers = nn.ModuleList(EnsembleLinear(E, a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.norms = nn.ModuleList(EnsembleLayerNorm(E, h) if self.cfg.layer_norm else nn.Identity()
                                   for h in self.cfg.hidden)
        self.head = EnsembleLinear(E, dims[-1], 2 * self.out_dim)
        self.max_logvar = nn.Parameter(torch.full((1, 1, self.out_dim), 0.5))
        self.min_logvar = nn.Parameter(torch.full((1, 1, self.out_dim), -10.0))
        self.input_norm = Normalizer(obs_dim + act_dim)
        self.target_norm = Normalizer(self.out_dim)
        self.register_buffer("elites", torch.arange(self.cfg.elites))
        self.register_buffer("holdout_mse", torch.full((E,), float("nan")))
        self._terminated = terminated or (get_task(task).terminated if task else None)
        self.chunk_rows: int | None = self.default_chunk_rows()

    # ------------------------------------------------------------------ network
    def _trunk(self, x: Tensor, precision: str = "float32") -> tuple[Tensor, Tensor]:
        """Normalised inputs ``[E, B, in]`` -> normalised mean and log-variance ``[E, B, out]``.
        ``precision="bfloat16"``: the hidden layers under autocast, the output layer in float32 (a fit's
        updates; predictions keep ``inference_dtype``'s arithmetic, set around this call)."""
        with update_precision(precision) if precision != "float32" else nullcontext():
            for layer, norm in zip(self.layers, self.norms):
                x = F.silu(norm(layer(x)))
        if precision != "float32":
            with full_precision(x):
                mean, logvar = self.head(x.float()).chunk(2, dim=-1)
        else:
            mean, logvar = self.head(x).chunk(2, dim=-1)
        logvar = self.max_logvar - F.softplus(self.max_logvar - logvar)
        logvar = self.min_logvar + F.softplus(logvar - self.min_logvar)
        return mean, logvar

    def _inputs(self, obs: Tensor, act: Tensor) -> Tensor:
        check_batch("obs", obs, self.spec.obs_dim)
        check_batch("action", act, self.spec.act_dim, obs.shape[0])
        return self.input_norm(torch.cat([obs, act], dim=-1))

    def _to_world(self, obs: Tensor, mean: Tensor, logvar: Tensor) -> tuple[Tensor, Tensor]:
        """Normalised (delta, reward) -> next observation and reward, with std, in data units."""
        std = logvar.mul(0.5).exp() * self.target_norm.std
        mean = self.target_norm.inverse(mean)
        mean = torch.cat([mean[..., :-1] + obs, mean[..., -1:]], dim=-1)
        return mean, std

    @staticmethod
    def default_chunk_rows() -> int:
        """Rows per block in ``predict``: small enough that a block's activations stay in cache
        (see tests/bench/bench_rollout.py for what each choice gives)."""
        return 1024

    @torch.no_grad()
    def predict(self, obs: Tensor, act: Tensor) -> tuple[Tensor, Tensor]:
        """Every member at once: mean and std of ``[next_obs, reward]``, ``[E, B, obs_dim + 1]``.

        Large batches go through in blocks of ``chunk_rows`` rows (every member in one
        batched operation per block), so activations stay small and hot in cache. With
        ``inference_dtype="bfloat16"`` the matmuls run under bf16 autocast (results stay float32)."""
        x = self._inputs(obs, act)
        n, step = x.shape[0], self.chunk_rows or x.shape[0]
        mean = x.new_empty(self.cfg.members, n, self.out_dim)
        std = torch.empty_like(mean)
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=self.cfg.inference_dtype == "bfloat16"):
            for i in range(0, n, step):
                rows = slice(i, i + step)
                mean[:, rows], std[:, rows] = self._to_world(obs[rows], *self._trunk(x[rows]))
        return mean, std

    @torch.no_grad()
    def predict_member(self, obs: Tensor, act: Tensor, member: Tensor) -> tuple[Tensor, Tensor]:
        """Row ``i`` through member ``member[i]`` only: ``[B, obs_dim + 1]`` mean and std."""
        x = self._inputs(obs, act)
        if member.shape != (obs.shape[0],):
            raise ValueError(f"member: expected shape [{obs.shape[0]}], got {list(member.shape)}")
        order = torch.argsort(member)
        counts = torch.bincount(member, minlength=self.cfg.members).tolist()
        mean = x.new_empty(obs.shape[0], self.out_dim)
        logvar = torch.empty_like(mean)
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            rows = order[start:start + n]
            h = x[rows]
            for layer, norm in zip(self.layers, self.norms):
                h = torch.addmm(layer.bias[e], h, layer.weight[e])
                if isinstance(norm, EnsembleLayerNorm):
                    h = F.layer_norm(h, h.shape[-1:]) * norm.weight[e] + norm.bias[e]
                h = F.silu(h)
            m, lv = torch.addmm(self.head.bias[e], h, self.head.weight[e]).chunk(2, dim=-1)
            lv = self.max_logvar[0] - F.softplus(self.max_logvar[0] - lv)
            lv = self.min_logvar[0] + F.softplus(lv - self.min_logvar[0])
            mean[rows], logvar[rows] = m, lv
            start += n
        return self._to_world(obs, mean, logvar)

    # ---------------------------------------------------------------- contract
    def data_scale(self) -> tuple[Tensor, Tensor]:
        """Mean and std of the observations the model was fitted on (``rollout``'s ``StateRange``)."""
        n = self.spec.obs_dim
        return self.input_norm.mean[:n], self.input_norm.std[:n]

    def init_state(self, start: Tensor, generator: torch.Generator | None = None, member: Tensor | None = None,
                   drawn_only: bool = False, disagreement: bool = False) -> dict:
        """``member`` ``[B]`` holds one member per row for the whole rollout; None draws an elite each step.
        ``drawn_only``: the drawn elite alone runs (``predict_member``), for a caller that needs neither the
        elites' disagreement nor every member's prediction; the draws, and so the rollout, are the same.
        ``disagreement``: with held members, every member still runs each step and the uncertainty is the
        elites' disagreement rather than the held member's own std; the held member's prediction (the same to
        rounding, from the every-member forward pass), at the every-member path's cost."""
        self.check_start(start, member)
        if disagreement and member is None:
            raise ValueError("init_state: disagreement=True is for held members (member=None already reports it)")
        return {"obs": start, "member": member, "drawn_only": drawn_only, "disagreement": disagreement}

    @torch.no_grad()
    def step(self, state: dict, action: Tensor, *, generator: torch.Generator | None = None,
             deterministic: bool = False) -> tuple[dict, StepOut]:
        """One step of every row. A row with a held member runs that member only (the fast
        path) and its ``uncertainty`` is that member's predicted std of the next state
        (aleatoric); otherwise every member runs, an elite is drawn per row, and
        ``uncertainty`` is the elites' disagreement (the largest distance of a member's
        mean next state from theirs), with every member's prediction in ``members``. With
        ``drawn_only`` the elite is drawn the same way and runs alone, as a held member does;
        with ``disagreement`` a held member's row takes the every-member path, its own member's
        prediction and the elites' disagreement."""
        obs, member = state["obs"], state["member"]
        if member is None and state.get("drawn_only"):
            member = self.sample_members(obs.shape[0], generator)
        if member is not None and not state.get("disagreement"):
            m, s = self.predict_member(obs, action, member)
            uncertainty, members = s[:, :-1].norm(dim=-1), None
        else:
            mean, std = self.predict(obs, action)          # [E, B, out]: all members, for the disagreement
            rows = torch.arange(obs.shape[0], device=obs.device)
            pick = member if member is not None else self.sample_members(obs.shape[0], generator)
            m, s = mean[pick, rows], std[pick, rows]
            elite_mean = mean[self.elites, :, :-1]
            uncertainty = (elite_mean - elite_mean.mean(0)).norm(dim=-1).max(0).values
            members = (mean, std)
        if not deterministic:
            m = m + s * torch.randn(m.shape, generator=generator, device=m.device)
        next_obs, reward = m[:, :-1], m[:, -1]
        terminated = (self._terminated(next_obs) if self._terminated is not None
                      else torch.zeros_like(reward, dtype=torch.bool))
        return {**state, "obs": next_obs}, StepOut(next_obs, reward, terminated, uncertainty, members=members)

    # --------------------------------------------------------------------- fit
    def fit(self, obs: Tensor, act: Tensor, next_obs: Tensor, reward: Tensor, generator: torch.Generator,
            progress=None, checkpoint: str | Path | None = None) -> dict[str, float]:
        """Train every member on its own bootstrap of the training split; early-stop on
        the holdout split; keep each member's best weights; choose the elites.

        With ``checkpoint``, the fit's whole state is written there after every epoch
        (atomically) and a fit that finds one resumes from it: a fit killed at any point
        and run again ends with the same weights as one that never stopped."""
        cfg = self.cfg
        dev = self.max_logvar.device          # fit where the model lives; indices are drawn on the CPU
        obs, act, next_obs, reward = (t.to(dev) for t in (obs, act, next_obs, reward))
        n = obs.shape[0]
        fit_checkpoint = FitCheckpoint(checkpoint, n, cfg, generator)   # before any draw: it names the fit
        inputs = torch.cat([obs, act], dim=-1)
        targets = torch.cat([next_obs - obs, reward[:, None]], dim=-1)
        n_hold = min(int(n * cfg.holdout_ratio), cfg.max_holdout)
        if n_hold < 1 or n - n_hold < cfg.batch_size:
            raise ReverieError(f"dataset too small to hold out: {n} transitions, need at least "
                               f"{cfg.batch_size} for training plus {max(n_hold, 1)} held out")
        perm = torch.randperm(n, generator=generator).to(dev)
        hold, train = perm[:n_hold], perm[n_hold:]
        self.input_norm.fit(inputs[train])
        self.target_norm.fit(targets[train])
        x_tr, y_tr = self.input_norm(inputs[train]), self.target_norm(targets[train])
        x_ho, y_ho = self.input_norm(inputs[hold]), self.target_norm(targets[hold])
        E, n_tr = cfg.members, len(train)
        boot = torch.randint(0, n_tr, (E, n_tr), generator=generator).to(dev)

        decayed = list(zip([*self.layers, self.head], cfg.weight_decay))
        if cfg.weight_decay_mode == "l2":
            opt = FusedAdam(self.parameters(), lr=cfg.lr)
        else:
            decay = [{"params": layer.parameters(), "weight_decay": wd} for layer, wd in decayed]
            rest = [self.max_logvar, self.min_logvar, *self.norms.parameters()]
            opt = FusedAdamW(decay + [{"params": rest, "weight_decay": 0.0}], lr=cfg.lr)

        def holdout_mse() -> Tensor:
            with torch.no_grad():
                mean, _ = self._trunk(x_ho.expand(E, -1, -1))
                return (mean - y_ho).pow(2).mean(dim=(1, 2))

        # Per-member tensors (leading dim E) are kept member by member; the shared
        # log-variance bounds and normalisers are taken as they end.
        member_keys = [k for k in self.state_dict() if k.startswith(("layers.", "norms.", "head."))]

        precision = resolve_precision(cfg.fit_precision, dev.type)

        def train_loss(idx: Tensor) -> Tensor:
            mean, logvar = self._trunk(x_tr[idx], precision)
            nll = ((mean - y_tr[idx]).pow(2) * torch.exp(-logvar) + logvar).mean(dim=(1, 2)).sum()
            loss = nll + 0.01 * (self.max_logvar.sum() - self.min_logvar.sum())
            if cfg.weight_decay_mode == "l2":
                loss = loss + sum(wd * 0.5 * layer.weight.pow(2).sum() for layer, wd in decayed)
            return loss

        best, epoch = fit_members(self, opt, generator, fit_checkpoint, boot, cfg.batch_size, cfg.max_epochs,
                                  cfg.patience, cfg.improvement, train_loss, holdout_mse, member_keys, progress)
        self.holdout_mse.copy_(best)
        self.elites.copy_(torch.argsort(best)[: cfg.elites])
        return {"epochs": float(epoch), "holdout_mse_mean": best.mean().item(),
                "holdout_mse_elites": best[self.elites].mean().item(),
                **{f"holdout_mse/member_{e}": best[e].item() for e in range(E)}}
