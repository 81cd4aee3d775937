"""NEUBAY: Bayesian offline RL without conservatism.

The offline data do not pin down one world; they leave a posterior over
worlds. NEUBAY keeps it as a large ensemble (the elites by holdout error),
draws one member per imagined episode and holds it for the whole episode, and
rolls out long (up to the task's episode length), cut only where the model's
uncertainty passes the largest it shows on its own data. By default that is
the elites' disagreement (``cut_on="disagreement"``, the authors' ``epi_mean``):
every member runs each step for it, the held member's prediction giving the
step. ``cut_on="member_std"`` reads the held member's own predicted std instead
and keeps each rollout on the one-member-per-row path (13x the transitions/s
with 20 members, ``tests/bench/bench_neubay.py``), but that score rises well
before the fall the model predicts: on hopper-random it cut 186 of 200 imagined
episodes before it, and the critics, bootstrapping at each cut, valued the
policy at three times its return (findings.md, "Critics against the
simulator's returns"). The whole cell costs about 10% more. The agent
conditions on its history (observation, previous action, previous reward)
through a GRU, so it can act like a Bayes-adaptive agent: infer from what it
sees which world it is in. There is no reward penalty.

- Agent: a GRU encoder for the actor and one for the critics; a tanh-Gaussian
  actor on ``[h_t, s_t]``; a REDQ critic ensemble (N heads, one batched
  operation; the target is the minimum over a random subset of M heads; the
  actor maximises the mean over all heads).
- Data: windows of consecutive steps of one episode (``agents/sequences``),
  from the dataset and from imagined episodes, at ``real_ratio``; up to
  ``burn_in`` earlier steps set the recurrent state before the window.
- Imagination: each episode starts at a dataset state, after the agent has
  read up to ``warmup`` steps of that state's real history; the real history is
  stored with the imagined steps, so training sees the same context.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from agents.networks import EnsembleMLP, FusedAdam, backprop, frozen, full_precision
from agents.sac import GaussianActor
from agents.sequences import SequenceBuffer, concat_windows
from agents.training import TrainConfig, Trainer
from envs.errors import ReverieError
from worldmodels.rollout import StartStates, UncertaintyThreshold, rollout

CUTS = ("disagreement", "member_std")


@dataclass
class NEUBAYConfig:
    hidden: tuple[int, ...] = (256, 256)
    rnn_hidden: int = 128
    critics: int = 10            # REDQ ensemble size N
    target_subset: int = 2       # REDQ: the target's minimum is over M random heads
    actor_lr: float = 3e-4       # the actor's head
    critic_lr: float = 3e-4      # the critics' heads
    encoder_lr: float | None = None   # both GRU encoders (the authors: far smaller than the heads'); None: the heads'
    alpha_lr: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    init_alpha: float = 0.1
    auto_alpha: bool = True
    target_entropy: float | None = None
    window: int = 32             # trained steps per sequence
    burn_in: int = 16            # earlier steps that only set the recurrent state
    warmup: int = 16             # real history read before imagination starts
    # What the uncertainty cut reads: "disagreement", the elites' spread (every member runs each step; the
    # authors' epi_mean), or "member_std", the held member's own predicted std (the fast one-member path).
    cut_on: str = "disagreement"

    def validate(self) -> "NEUBAYConfig":
        if not 1 <= self.target_subset <= self.critics:
            raise ReverieError(f"agent.target_subset: expected 1 <= target_subset <= critics ({self.critics}), "
                               f"got {self.target_subset}")
        for name in ("rnn_hidden", "window"):
            if getattr(self, name) < 1:
                raise ReverieError(f"agent.{name}: expected a positive integer, got {getattr(self, name)}")
        if self.encoder_lr is not None and self.encoder_lr <= 0:
            raise ReverieError(f"agent.encoder_lr: expected a value > 0 or null, got {self.encoder_lr}")
        for name in ("burn_in", "warmup"):
            if getattr(self, name) < 0:
                raise ReverieError(f"agent.{name}: expected an integer >= 0, got {getattr(self, name)}")
        if self.cut_on not in CUTS:
            raise ReverieError(f"agent.cut_on: expected one of {', '.join(CUTS)}, got {self.cut_on!r}")
        return self


class HistoryEncoder(nn.Module):
    """A GRU over ``x_t = [normalised s_t, a_{t-1}, r_{t-1}]``: ``[T, n, in] -> [T, n, hidden]``.

    Always float32, even under ``train.precision=bfloat16``: its steps are small matmuls (8 windows by 128
    units) that autocast made 3x slower, each step's inputs cast anew, and a recurrence compounds bfloat16's
    rounding over 49 steps."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int):
        super().__init__()
        self.gru = nn.GRU(obs_dim + act_dim + 1, hidden)

    def forward(self, x: Tensor, h: Tensor | None = None) -> tuple[Tensor, Tensor]:
        with full_precision(x):
            return self.gru(x.float(), h)


class NEUBAY:
    uses_model = True
    holds_members = True          # one posterior sample per imagined episode

    def __init__(self, obs_dim: int, act_dim: int, cfg: NEUBAYConfig | None = None, model=None,
                 obs_stats: tuple[Tensor, Tensor] | None = None, device: str | torch.device = "cpu"):
        self.cfg = cfg = (cfg or NEUBAYConfig()).validate()
        self.model, self.obs_dim, self.act_dim = model, obs_dim, act_dim
        mean, std = obs_stats or (torch.zeros(obs_dim), torch.ones(obs_dim))
        self.obs_mean, self.obs_std = mean.to(device), std.to(device)
        H = cfg.rnn_hidden
        self.actor_encoder = HistoryEncoder(obs_dim, act_dim, H).to(device)
        self.actor = GaussianActor(H + obs_dim, act_dim, cfg.hidden).to(device)
        self.critic_encoder = HistoryEncoder(obs_dim, act_dim, H).to(device)
        self.critic = EnsembleMLP(cfg.critics, H + obs_dim + act_dim, 1, cfg.hidden).to(device)
        self.critic_encoder_target = copy.deepcopy(self.critic_encoder).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(cfg.init_alpha), device=device, requires_grad=cfg.auto_alpha)
        self.target_entropy = cfg.target_entropy if cfg.target_entropy is not None else -float(act_dim)
        def groups(encoder: nn.Module, head: nn.Module, lr: float) -> list[dict]:
            return [{"params": list(encoder.parameters()), "lr": cfg.encoder_lr if cfg.encoder_lr is not None else lr},
                    {"params": list(head.parameters()), "lr": lr}]
        self.actor_opt = FusedAdam(groups(self.actor_encoder, self.actor, cfg.actor_lr))
        self.critic_opt = FusedAdam(groups(self.critic_encoder, self.critic, cfg.critic_lr))
        self.alpha_opt = FusedAdam([self.log_alpha], lr=cfg.alpha_lr)

    @property
    def alpha(self) -> Tensor:
        return self.log_alpha.exp().detach()

    # ------------------------------------------------------------------ inputs
    def norm(self, obs: Tensor) -> Tensor:
        return (obs - self.obs_mean) / self.obs_std

    def inputs(self, w: dict[str, Tensor]) -> Tensor:
        """``[T + 1, n, in]``: step t's input is (s_t, a_{t-1}, r_{t-1}); the last is the bootstrap input."""
        first = torch.cat([self.norm(w["obs"][0]), w["prev_actions"], w["prev_rewards"][:, None]], dim=-1)
        rest = torch.cat([self.norm(w["next_obs"]), w["actions"], w["rewards"][..., None]], dim=-1)
        return torch.cat([first[None], rest], dim=0)

    def q(self, critic: nn.Module, h: Tensor, obs: Tensor, act: Tensor, heads: Tensor | None = None) -> Tensor:
        """Every head's Q (or only ``heads``') for ``[M]`` steps, in one batched operation: ``[N, M]``."""
        return critic(torch.cat([h, self.norm(obs), act], dim=-1), heads).squeeze(-1)

    # ------------------------------------------------------------------ update
    def update(self, w: dict[str, Tensor], generator: torch.Generator | None = None) -> dict[str, float]:
        """One update on windows: the GRUs read every window whole; the heads and losses see only
        the trained steps (burn-in and padding cost a GRU step, nothing more)."""
        cfg = self.cfg
        x = self.inputs(w)
        trained = w["train"].flatten()

        def steps(t: Tensor) -> Tensor:            # [T, n, ...] -> [M, ...]: the trained steps only
            return t.flatten(0, 1)[trained]

        obs, act, rew, next_obs = steps(w["obs"]), steps(w["actions"]), steps(w["rewards"]), steps(w["next_obs"])
        dones = steps(w["terminated"]).float()

        # the actor's reading of the histories, once: detached for the critic's target, live for the actor
        h_actor_all = self.actor_encoder(x)[0]

        # critics: REDQ target from a random subset of the target heads
        with torch.no_grad():
            h_actor_next = steps(h_actor_all[1:].detach())
            h_target_next = steps(self.critic_encoder_target(x)[0][1:])
            next_act, next_logp = self.actor(torch.cat([h_actor_next, self.norm(next_obs)], -1), generator=generator)
            subset = torch.randperm(cfg.critics, generator=generator, device=rew.device)[:cfg.target_subset]
            q_next = self.q(self.critic_target, h_target_next, next_obs, next_act, heads=subset)  # only those heads
            target = rew + cfg.gamma * (1.0 - dones) * (q_next.min(dim=0).values - self.alpha * next_logp)
        h_critic = steps(self.critic_encoder(x)[0][:-1])
        q = self.q(self.critic, h_critic, obs, act)
        critic_loss = (q - target).pow(2).mean()
        self.critic_opt.zero_grad(set_to_none=True)
        backprop(critic_loss)
        self.critic_opt.step()

        # actor: the mean over all heads, on the critic's (fixed) reading of the history
        h_actor = steps(h_actor_all[:-1])
        new_act, logp = self.actor(torch.cat([h_actor, self.norm(obs)], -1), generator=generator)
        with frozen(self.critic):
            q_new = self.q(self.critic, h_critic.detach(), obs, new_act).mean(dim=0)
        actor_loss = (self.alpha * logp - q_new).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        backprop(actor_loss)
        self.actor_opt.step()

        if cfg.auto_alpha:
            alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
            self.alpha_opt.zero_grad(set_to_none=True)
            backprop(alpha_loss)
            self.alpha_opt.step()

        with torch.no_grad():
            for net, target_net in ((self.critic, self.critic_target),
                                    (self.critic_encoder, self.critic_encoder_target)):
                for p, tp in zip(net.parameters(), target_net.parameters()):
                    tp.lerp_(p, cfg.tau)
        return {"critic_loss": critic_loss.item(), "actor_loss": actor_loss.item(), "q_mean": q.mean().item(),
                "alpha": self.alpha.item(), "entropy": -logp.mean().item(), "trained_steps": float(len(obs))}

    # ----------------------------------------------------------------- acting
    def policy(self, warm: dict | None = None) -> "HistoryPolicy":
        return HistoryPolicy(self, warm)

    @torch.no_grad()
    def warm_up(self, real: SequenceBuffer, anchor: Tensor) -> dict[str, Tensor]:
        """Read up to ``warmup`` real steps before each anchor: the recurrent state just before
        the anchor's observation, and the action and reward that came before it."""
        w = real.windows(anchor, length=1, burn_in=self.cfg.warmup)
        x = self.inputs(w)
        h, _ = self.actor_encoder(x)                                    # h[k]: after reading input k
        o = w["offset"]
        cols = torch.arange(len(anchor), device=anchor.device)
        zeros = torch.zeros_like(h[0])
        before = torch.where((o > 0)[:, None], h[(o - 1).clamp_min(0), cols], zeros)
        prev_act = torch.where((o > 0)[:, None], w["actions"][(o - 1).clamp_min(0), cols], w["prev_actions"])
        prev_rew = torch.where(o > 0, w["rewards"][(o - 1).clamp_min(0), cols], w["prev_rewards"])
        return {"h": before, "prev_actions": prev_act, "prev_rewards": prev_rew, "window": w}

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool = True, generator: torch.Generator | None = None) -> Tensor:
        """The first action of an episode (no history yet)."""
        policy = self.policy()
        _, a = policy.act(policy.initial_state(len(obs)), obs, torch.ones(len(obs), dtype=torch.bool,
                                                                           device=obs.device),
                          deterministic=deterministic, generator=generator)
        return a

    def penalize(self, transitions: dict[str, Tensor]) -> dict[str, float]:
        return {}   # no conservatism

    # ------------------------------------------------------------ persistence
    def state_dict(self) -> dict:
        return {name: getattr(self, name).state_dict() for name in (
            "actor_encoder", "actor", "critic_encoder", "critic", "critic_encoder_target", "critic_target",
            "actor_opt", "critic_opt", "alpha_opt")} | {"log_alpha": self.log_alpha.detach().clone(),
                                                        "obs_mean": self.obs_mean, "obs_std": self.obs_std}

    def load_state_dict(self, state: dict) -> None:
        for name in ("actor_encoder", "actor", "critic_encoder", "critic", "critic_encoder_target",
                     "critic_target", "actor_opt", "critic_opt", "alpha_opt"):
            getattr(self, name).load_state_dict(state[name])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.obs_mean, self.obs_std = state["obs_mean"], state["obs_std"]


class HistoryPolicy:
    """NEUBAY's agent behind the rollout engine's ``Policy`` contract: its state is the GRU's
    hidden state and the previous action; a warm start carries a real history's reading."""

    def __init__(self, learner: NEUBAY, warm: dict | None = None):
        self.learner, self.warm = learner, warm

    def initial_state(self, batch_size: int) -> dict:
        if self.warm is not None:
            return {"h": self.warm["h"], "prev_actions": self.warm["prev_actions"],
                    "first_reward": self.warm["prev_rewards"]}
        dev = self.learner.obs_mean.device
        return {"h": torch.zeros(batch_size, self.learner.cfg.rnn_hidden, device=dev),
                "prev_actions": torch.zeros(batch_size, self.learner.act_dim, device=dev),
                "first_reward": torch.zeros(batch_size, device=dev)}

    @torch.no_grad()
    def act(self, state, obs, first, *, deterministic, generator=None, prev_reward=None):
        L = self.learner
        reward = state["first_reward"] if prev_reward is None else torch.where(first, state["first_reward"],
                                                                              prev_reward)
        x = torch.cat([L.norm(obs), state["prev_actions"], reward[:, None]], dim=-1)
        out, h = L.actor_encoder(x[None], state["h"][None])
        a, _ = L.actor(torch.cat([out[0], L.norm(obs)], -1), deterministic=deterministic, generator=generator)
        return {"h": h[0], "prev_actions": a, "first_reward": state["first_reward"]}, a


class NEUBAYTrainer(Trainer):
    """The shared loop with NEUBAY's data: episodes, not transitions."""

    def __init__(self, learner: NEUBAY, ds, cfg: TrainConfig, model=None, log=None):
        super().__init__(learner, ds, cfg, model=model, log=log)
        self.real = SequenceBuffer.from_dataset(ds, self.device)

    def make_buffer(self) -> SequenceBuffer:
        cfg = self.cfg
        capacity = (cfg.rollout_length + self.learner.cfg.warmup) * cfg.rollout_batch * cfg.model_retain
        return SequenceBuffer(self.ds.obs_dim, self.ds.act_dim, capacity, self.device)

    def make_threshold(self, quantile: float, held_members: bool = True) -> UncertaintyThreshold:
        # measured as the rollouts run: the held member's own std, or (held_members=False) the elites' spread
        return super().make_threshold(quantile, held_members=self.learner.cfg.cut_on == "member_std")

    def imagine(self) -> dict[str, float]:
        cfg, learner = self.cfg, self.learner
        anchor = self.real.anchors(cfg.rollout_batch, self.generator)
        warm = learner.warm_up(self.real, anchor)
        member = self.model.sample_members(cfg.rollout_batch, self.generator)
        ro = rollout(self.model, learner.policy(warm), StartStates(self.real.data["obs"][anchor]),
                     cfg.rollout_length, self.generator, truncate=self.threshold, member=member,
                     **({"disagreement": True} if learner.cfg.cut_on == "disagreement" else {}))
        # each episode: its real history (the warm-up rows), then its imagined steps
        w = warm["window"]
        history = w["valid"] & (torch.arange(len(w["valid"]), device=self.device)[:, None] < w["offset"][None, :])
        rows = {k: torch.cat([w[k], getattr(ro, k)], dim=0)
                for k in ("obs", "actions", "rewards", "next_obs", "terminated")}
        keep = torch.cat([history, ro.valid], dim=0)                      # [W + T, B]
        order = keep.transpose(0, 1)                                      # episode by episode
        flat = {k: v.transpose(0, 1)[order] for k, v in rows.items()}
        episode = torch.arange(cfg.rollout_batch, device=self.device)[:, None].expand_as(order)[order]
        self.buffer.add_episodes(flat, episode)
        lengths = ro.lengths().float()
        return {"rollout/length_mean": lengths.mean().item(), "rollout/length_max": lengths.max().item(),
                "rollout/terminated_rows": int(ro.terminated.any(0).sum()),
                "rollout/uncertainty_cut_rows": ro.rule_cut_rows, "rollout/nonfinite_rows": ro.nonfinite_rows,
                "rollout/return_mean": ro.returns().mean().item(), "rollout/buffer_size": self.buffer.size}

    def batch(self) -> dict[str, Tensor]:
        cfg, lcfg = self.cfg, self.learner.cfg
        n = max(1, cfg.batch_size // lcfg.window)
        n_real = int(round(n * cfg.real_ratio))
        parts = []
        for buf, k in ((self.real, n_real), (self.buffer, n - n_real)):
            if k > 0:
                parts.append(buf.windows(buf.anchors(k, self.generator), lcfg.window, lcfg.burn_in))
        return parts[0] if len(parts) == 1 else concat_windows(*parts)


NEUBAY.trainer_class = NEUBAYTrainer
