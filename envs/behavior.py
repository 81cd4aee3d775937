"""Training the behaviour policies that make the built-in datasets (TD3).

``reverie dataset train-behavior task=hopper`` runs this. It is a long job (hours
on two cores), so it checkpoints everything -- networks, optimisers, the
replay buffer, random-number states -- atomically every ``checkpoint_every``
steps and on SIGINT/SIGTERM, and a second call resumes from the checkpoint.
A resumed run starts a fresh episode; nothing else differs.

Every ``snapshot_every`` steps the current actor is saved and evaluated
deterministically over ``eval_episodes`` episodes (``evals.csv``). ``publish``
then picks at least ten snapshots spanning the return range, measures each
again over more episodes on unseen seeds, and writes them to the shipped zoo.

TD3 (Fujimoto et al., 2018) rather than SAC: on one CPU core it is about a third
cheaper per environment step (one actor update in two, no entropy term), and
its deterministic actors make a clean policy zoo. Datasets add Gaussian action
noise when they roll these actors (see ``envs/builtin.py``).
"""

from __future__ import annotations

import copy
import csv
import json
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.tensorboard import SummaryWriter

import mujoco
from agents.networks import EnsembleMLP, TanhActor
from envs.atomic_io import atomic_path, write_json
from envs.errors import ReverieError
from envs.policies import ZOO_DIR, evaluate_actor, load_policy, save_policy
from envs.simulator import SimulatorBatch
from envs.tasks import Task, get_task, normalized_score


@dataclass
class BehaviorConfig:
    task: str = "hopper"
    seed: int = 0
    total_steps: int = 1_000_000
    start_steps: int = 10_000
    batch_size: int = 256
    hidden: tuple[int, ...] = (256, 256)
    lr: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    expl_noise: float = 0.1
    policy_noise: float = 0.2
    noise_clip: float = 0.5
    policy_delay: int = 2
    snapshot_every: int = 10_000
    eval_episodes: int = 10
    checkpoint_every: int = 50_000
    budget_minutes: float = 0.0  # stop (after a checkpoint) once this much wall time is spent; 0 = no limit
    threads: int = 1

    def validate(self) -> "BehaviorConfig":
        get_task(self.task)
        for name in ("total_steps", "batch_size", "snapshot_every", "eval_episodes", "checkpoint_every",
                     "policy_delay", "threads"):
            if int(getattr(self, name)) < 1:
                raise ReverieError(f"option '{name}': expected a positive integer, got {getattr(self, name)}")
        if self.checkpoint_every % self.snapshot_every:
            raise ReverieError("option 'checkpoint_every': expected a multiple of snapshot_every")
        return self


class ReplayBuffer:
    """A fixed-capacity transition store in numpy, saved whole in checkpoints."""

    FIELDS = ("obs", "act", "rew", "next_obs", "done")

    def __init__(self, obs_dim: int, act_dim: int, capacity: int):
        self.capacity, self.size, self.ptr = capacity, 0, 0
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.act = np.zeros((capacity, act_dim), np.float32)
        self.rew = np.zeros(capacity, np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.done = np.zeros(capacity, np.float32)

    def add(self, obs, act, rew, next_obs, done) -> None:
        i = self.ptr
        self.obs[i], self.act[i], self.rew[i], self.next_obs[i], self.done[i] = obs, act, rew, next_obs, done
        self.ptr = (self.ptr + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        idx = torch.randint(0, self.size, (batch,), generator=generator).numpy()
        return tuple(torch.from_numpy(getattr(self, f)[idx]) for f in self.FIELDS)

    def state_dict(self) -> dict:
        return {"size": self.size, "ptr": self.ptr, **{f: getattr(self, f)[: self.size].copy() for f in self.FIELDS}}

    def load_state_dict(self, state: dict) -> None:
        self.size, self.ptr = int(state["size"]), int(state["ptr"])
        for f in self.FIELDS:
            getattr(self, f)[: self.size] = state[f]


class TD3:
    def __init__(self, obs_dim: int, act_dim: int, cfg: BehaviorConfig):
        self.cfg = cfg
        self.actor = TanhActor(obs_dim, act_dim, cfg.hidden)
        self.critic = EnsembleMLP(2, obs_dim + act_dim, 1, cfg.hidden)  # twin critics, one batched op
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.lr)
        self.updates = 0

    def q(self, net: EnsembleMLP, obs, act) -> torch.Tensor:
        return net(torch.cat([obs, act], dim=-1)).squeeze(-1)  # [2, B]

    def update(self, batch, generator: torch.Generator) -> dict[str, float]:
        cfg = self.cfg
        obs, act, rew, next_obs, done = batch
        with torch.no_grad():
            noise = torch.randn(act.shape, generator=generator) * cfg.policy_noise
            next_act = (self.actor_target(next_obs) + noise.clamp(-cfg.noise_clip, cfg.noise_clip)).clamp(-1, 1)
            target_q = self.q(self.critic_target, next_obs, next_act).min(dim=0).values
            target = rew + cfg.gamma * (1.0 - done) * target_q
        critic_loss = F.mse_loss(self.q(self.critic, obs, act), target.expand(2, -1))
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        metrics = {"critic_loss": critic_loss.item()}

        self.updates += 1
        if self.updates % cfg.policy_delay == 0:
            actor_loss = -self.q(self.critic, obs, self.actor(obs))[0].mean()
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_opt.step()
            with torch.no_grad():
                for net, target_net in ((self.actor, self.actor_target), (self.critic, self.critic_target)):
                    for p, tp in zip(net.parameters(), target_net.parameters()):
                        tp.lerp_(p, cfg.tau)
            metrics["actor_loss"] = actor_loss.item()
        return metrics

    def state_dict(self) -> dict:
        return {name: getattr(self, name).state_dict() for name in
                ("actor", "critic", "actor_target", "critic_target", "actor_opt", "critic_opt")} | {
                "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        for name in ("actor", "critic", "actor_target", "critic_target", "actor_opt", "critic_opt"):
            getattr(self, name).load_state_dict(state[name])
        self.updates = int(state["updates"])


def _read_evals(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with path.open() as f:
        return [{"step": int(r["step"]), "return_mean": float(r["return_mean"]), "return_std": float(r["return_std"])}
                for r in csv.DictReader(f)]


def _write_evals(path: Path, rows: list[dict]) -> None:
    with atomic_path(path, suffix=".csv") as tmp, tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["step", "return_mean", "return_std"])
        w.writeheader()
        w.writerows(rows)


def train_behavior(cfg: BehaviorConfig, workdir: Path, progress: bool = True) -> dict:
    """Train (or resume training) TD3 on ``cfg.task``; returns a summary dict."""
    cfg.validate()
    task = get_task(cfg.task)
    torch.set_num_threads(cfg.threads)
    workdir.mkdir(parents=True, exist_ok=True)
    ckpt_path, evals_path, snap_dir = workdir / "checkpoint.pt", workdir / "evals.csv", workdir / "snapshots"
    write_json(workdir / "config.json", asdict(cfg))

    torch.manual_seed(cfg.seed)  # network initialisation; sampling uses `gen` below
    agent = TD3(task.obs_dim, task.act_dim, cfg)
    buffer = ReplayBuffer(task.obs_dim, task.act_dim, cfg.total_steps)
    gen = torch.Generator().manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    step, episodes = 0, 0
    evals = _read_evals(evals_path)
    if ckpt_path.is_file():
        state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        agent.load_state_dict(state["agent"])
        buffer.load_state_dict(state["buffer"])
        gen.set_state(state["torch_rng"])
        rng.bit_generator.state = state["np_rng"]
        step, episodes = int(state["step"]), int(state["episodes"])
        evals = [r for r in evals if r["step"] <= step]  # drop evals newer than the checkpoint

    def checkpoint() -> None:
        with atomic_path(ckpt_path, suffix=".pt") as tmp:
            torch.save({"agent": agent.state_dict(), "buffer": buffer.state_dict(), "torch_rng": gen.get_state(),
                        "np_rng": rng.bit_generator.state, "step": step, "episodes": episodes}, tmp)
        _write_evals(evals_path, evals)

    def snapshot() -> None:
        save_policy(snap_dir / f"step_{step:07d}.pt", agent.actor, task.name, {"step": step})
        r = evaluate_actor(task, agent.actor, cfg.eval_episodes, seed=1_000_000 + step)
        evals.append({"step": step, "return_mean": float(r.mean()), "return_std": float(r.std())})
        writer.add_scalar("eval/return", r.mean(), step)
        writer.add_scalar("eval/normalized_score", normalized_score(task, r.mean()), step)

    stop = {"signal": None}

    def on_signal(signum, _frame):
        stop["signal"] = signum

    old_handlers = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    writer = SummaryWriter(str(workdir / "tb"))
    sim = SimulatorBatch(task, 1)
    obs = sim.reset(cfg.seed * 100_003 + episodes)[0]
    ep_return, started, start_step = 0.0, time.time(), step
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=cfg.total_steps, initial=step, desc=f"td3 {task.name}", unit="step", mininterval=5)
    try:
        if step == 0 and not evals:
            snapshot()  # the untrained network is the "random" policy, as in D4RL
        while step < cfg.total_steps:
            if step < cfg.start_steps:
                act = rng.uniform(-1, 1, task.act_dim).astype(np.float32)
            else:
                with torch.no_grad():
                    act = agent.actor(torch.from_numpy(obs)[None])[0].numpy()
                act = np.clip(act + cfg.expl_noise * rng.standard_normal(task.act_dim), -1, 1).astype(np.float32)
            next_obs, rew, term, trunc = sim.step(act[None])
            buffer.add(obs, act, rew[0], next_obs[0], float(term[0]))
            ep_return += float(rew[0])
            obs = next_obs[0]
            if term[0] or trunc[0]:
                writer.add_scalar("train/episode_return", ep_return, step)
                episodes += 1
                obs, ep_return = sim.reset(cfg.seed * 100_003 + episodes)[0], 0.0
            if step >= cfg.start_steps:
                metrics = agent.update(buffer.sample(cfg.batch_size, gen), gen)
                if step % 1000 == 0:
                    for k, v in metrics.items():
                        writer.add_scalar(f"train/{k}", v, step)
            step += 1
            if bar is not None:
                bar.update(1)
            if step % cfg.snapshot_every == 0:
                snapshot()
                writer.add_scalar("perf/steps_per_second", (step - start_step) / (time.time() - started), step)
                if bar is not None:
                    bar.set_postfix(ret=f"{evals[-1]['return_mean']:.0f}")
            over_budget = cfg.budget_minutes > 0 and time.time() - started > 60 * cfg.budget_minutes
            if step % cfg.checkpoint_every == 0 or step == cfg.total_steps or (
                    (stop["signal"] or over_budget) and step % cfg.snapshot_every == 0):
                checkpoint()
                if stop["signal"] or over_budget:
                    break
    finally:
        for s, h in old_handlers.items():
            signal.signal(s, h)
        writer.close()
        sim.close()
        if bar is not None:
            bar.close()
    best = max(evals, key=lambda r: r["return_mean"]) if evals else None
    return {"task": task.name, "step": step, "total_steps": cfg.total_steps, "done": step >= cfg.total_steps,
            "snapshots": len(evals), "best_step": best and best["step"], "best_return": best and best["return_mean"],
            "steps_per_second": (step - start_step) / max(time.time() - started, 1e-9)}


def publish_zoo(task_name: str, workdir: Path, out_root: Path = ZOO_DIR, n_policies: int = 12,
                eval_episodes: int = 20, seed: int = 2_000_000, command: str = "") -> dict:
    """Choose ``n_policies`` snapshots spanning random to best, re-measure them on
    unseen seeds, and write them with ``zoo.json`` into ``out_root/<task>``."""
    task: Task = get_task(task_name)
    cfg = json.loads((workdir / "config.json").read_text())
    # Before learning starts the actor does not change: those snapshots repeat step 0.
    evals = [r for r in _read_evals(workdir / "evals.csv") if r["step"] == 0 or r["step"] > cfg["start_steps"]]
    if len(evals) < n_policies:
        raise ReverieError(f"{workdir / 'evals.csv'}: {len(evals)} distinct snapshots, expected at least {n_policies}")
    by_step = {r["step"]: r for r in evals}
    best = max(evals, key=lambda r: r["return_mean"])
    lo = by_step[0]["return_mean"]
    chosen = {0, best["step"]}
    # Fill the rest at evenly spaced target returns between the untrained and best
    # policy, taking for each target the earliest snapshot nearest to it.
    for target in np.linspace(lo, best["return_mean"], n_policies)[1:-1]:
        pool = [r for r in evals if r["step"] not in chosen]
        chosen.add(min(pool, key=lambda r: (abs(r["return_mean"] - target), r["step"]))["step"])
    while len(chosen) < n_policies:  # ties collapsed: add the next steps in order
        chosen.add(next(r["step"] for r in evals if r["step"] not in chosen))

    out_dir = out_root / task.name
    records = []
    for s in sorted(chosen):
        actor, _ = load_policy(workdir / "snapshots" / f"step_{s:07d}.pt")
        r = evaluate_actor(task, actor, eval_episodes, seed=seed)
        records.append({"name": f"step_{s:07d}", "file": f"step_{s:07d}.pt", "step": s,
                        "return_mean": round(float(r.mean()), 3), "return_std": round(float(r.std()), 3),
                        "episodes": eval_episodes,
                        "normalized_score": round(float(normalized_score(task, r.mean())), 2),
                        "roles": [], "actor": actor})
    expert = max(records, key=lambda p: p["return_mean"])
    if expert["step"] == 0:
        raise ReverieError(f"{workdir}: no snapshot beats the untrained network on unseen seeds; train longer")
    between = [p for p in records if 0 < p["step"] < expert["step"]]
    if not between:
        raise ReverieError(f"{workdir}: no snapshot between the untrained and the best one to serve as 'medium'")
    medium = min(between, key=lambda p: abs(p["return_mean"] - expert["return_mean"] / 3))
    records[0]["roles"].append("random")
    medium["roles"].append("medium")
    expert["roles"].append("expert")
    for p in records:
        save_policy(out_dir / p["file"], p.pop("actor"), task.name,
                    {k: p[k] for k in ("step", "return_mean", "return_std", "episodes")})
    for old in out_dir.glob("step_*.pt"):
        if old.name not in {p["file"] for p in records}:
            old.unlink()
    manifest = {
        "task": task.name, "gym_id": task.gym_id, "mujoco": mujoco.__version__, "algorithm": "TD3",
        "trained_steps": max(r["step"] for r in evals), "train_config": cfg,
        "eval": {"episodes": eval_episodes, "seeds": f"{seed}..{seed + eval_episodes - 1}", "deterministic": True},
        "medium_rule": "the snapshot before the expert whose return is nearest one third of the expert's",
        "train_command": f"reverie dataset train-behavior task={task.name} seed={cfg['seed']} "
                         f"total_steps={cfg['total_steps']}  (resumable; stopped at trained_steps)",
        "command": command, "policies": records,
    }
    write_json(out_dir / "zoo.json", manifest)
    with atomic_path(out_dir / "training_evals.csv", suffix=".csv") as tmp:
        tmp.write_text((workdir / "evals.csv").read_text())
    return manifest
