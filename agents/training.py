"""The training loop every learner shares: imagine, store, sample, update, evaluate, checkpoint.

Model-based learners (``learner.uses_model``) get fresh imagined rollouts every
``rollout_every`` updates: start states drawn from the dataset, the current
policy acting, the world model stepping through the one ``rollout()`` engine
(termination from the task, an optional uncertainty cut, the NaN guard). The
learner may change the imagined rewards as they are stored (MOPO's penalty).
Each update draws ``real_ratio`` of its batch from the dataset and the rest
from the model buffer; model-free learners draw all of it from the dataset.

Everything random comes from one ``torch.Generator``. A checkpoint holds the
learner (weights and optimisers), the model buffer, the generator and the step,
so a run killed at any point and resumed from its last checkpoint ends with
the same weights as one that never stopped (on the CPU, same thread count).
Asked to stop (SIGTERM, as a scheduler, ``reverie bench``'s parent or a machine
going down sends it, or Ctrl-C), the loop finishes the update it is in, saves a
checkpoint there and raises ``Stopped``, so nothing since the last periodic
checkpoint is lost; a second signal acts at once, as it would have without.
The periodic simulator evaluation uses its own seeds and draws nothing from
the training generator.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from agents.data import TransitionSampler, mix
from agents.networks import check_precision, resolve_precision, update_precision
from envs.atomic_io import atomic_path, write_json
from envs.errors import ReverieError, Stopped
from envs.simulator import SimulatorBatch
from envs.tasks import get_task, normalized_score
from worldmodels.rollout import ModelReplayBuffer, StartStates, UncertaintyThreshold, rollout

CHECKPOINT_FORMAT = "reverie.train_checkpoint/1"


@dataclass
class TrainConfig:
    steps: int = 100_000            # gradient updates
    batch_size: int = 256
    real_ratio: float = 0.05        # share of each batch from the dataset (model-based learners)
    rollout_length: int = 5
    rollout_batch: int = 50_000     # start states per rollout round
    rollout_every: int = 1000       # updates between rollout rounds
    model_retain: int = 5           # rollout rounds the model buffer holds
    truncate_quantile: float | None = None  # cut a row above this quantile of the model's dataset uncertainty
    episode_start_share: float = 0.0        # share of each round's start states drawn from the data's episode
                                            # starts (its reset states); the rest uniform over rows, as MBPO/MOPO
    eval_every: int = 10_000
    eval_episodes: int = 5
    final_eval_episodes: int = 10
    checkpoint_every: int = 5_000
    log_every: int = 1_000
    seed: int = 0
    device: str = "cpu"             # where the learner, the model, the data and the generator live
    precision: str = "float32"      # bfloat16: updates under autocast (hidden layers' matmuls; outputs stay float32);
                                    # auto: bfloat16 where the machine has it natively (native_bfloat16), else float32

    def validate(self) -> "TrainConfig":
        positive = ("steps", "batch_size", "rollout_length", "rollout_batch", "rollout_every", "model_retain",
                    "eval_every", "eval_episodes", "final_eval_episodes", "checkpoint_every", "log_every")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ReverieError(f"train.{name}: expected a positive integer, got {value!r}")
        for name in ("real_ratio", "episode_start_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ReverieError(f"train.{name}: expected a value in [0, 1], got {getattr(self, name)}")
        check_device(self.device)
        check_precision("train.precision", self.precision)
        if self.truncate_quantile is not None and not 0.0 < self.truncate_quantile <= 1.0:
            raise ReverieError(f"train.truncate_quantile: expected a value in (0, 1] or null, "
                               f"got {self.truncate_quantile}")
        return self


def check_device(name: str) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N`` that this machine has; anything else is one clear error."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ReverieError(f"device: expected cpu, cuda or cuda:N, got {name!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ReverieError(f"device: '{name}' asked for, but CUDA is not available on this machine")
    if device.type not in ("cpu", "cuda"):
        raise ReverieError(f"device: expected cpu, cuda or cuda:N, got {name!r}")
    return device


class LearnerPolicy:
    """A learner's stochastic policy behind the rollout engine's ``Policy`` contract."""

    def __init__(self, learner):
        self.learner = learner

    def initial_state(self, batch_size: int) -> None:
        return None

    def act(self, state, obs, first, *, deterministic, generator=None, prev_reward=None):
        return state, self.learner.act(obs, deterministic=deterministic, generator=generator)


def acting_policy(learner):
    """What acts for a learner in the rollout engine: its own (history-dependent) policy, or its actor."""
    return learner.policy() if hasattr(learner, "policy") else LearnerPolicy(learner)


# Keys an agent's config may carry that belong to the training loop, not to the learner.
LOOP_KEYS = ("rollout_length", "real_ratio", "rollout_batch", "rollout_every", "truncate_quantile",
             "episode_start_share")


class Acting:
    """A policy (the rollout engine's ``Policy``) acting deterministically on ``n`` rows, step by step: a
    history-dependent one (NEUBAY's GRU) carries its reading of the (observation, previous action, previous
    reward) history from step to step, from an empty history at the first. Call it with the observations, then
    ``observe`` the rewards they earned. The evaluation and the bench's draws step every policy through this."""

    def __init__(self, policy, n: int, device: str | torch.device = "cpu"):
        self.policy, self.device = policy, torch.device(device)
        self.state = policy.initial_state(n)
        self.first = torch.ones(n, dtype=torch.bool, device=self.device)
        self.prev_reward = torch.zeros(n, device=self.device)

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        self.state, act = self.policy.act(self.state, obs.to(self.device), self.first, deterministic=True,
                                          prev_reward=self.prev_reward)
        self.first = torch.zeros_like(self.first)
        return act

    def observe(self, reward) -> None:
        self.prev_reward = torch.as_tensor(reward, dtype=torch.float32).to(self.device)


def play_episodes(task, policy, episodes: int, seed: int, device: str | torch.device = "cpu"):
    """``episodes`` simulator episodes of a (possibly history-dependent) policy acting deterministically through
    ``Acting``, run side by side from the resets ``seed``..; deterministic for a seed. Yields each step as
    ``(obs, action, reward, running, terminated)``: the float32 observations acted on and the actions (tensors on
    ``device``), then numpy arrays: the simulator's float32 rewards, whether each row was still in its episode at
    this step (finished rows keep stepping, and their rewards must not count) and whether the step ended it in a
    fall. Stops once every episode has ended. ``task`` is a task name or an ``envs.tasks`` task."""
    sim = SimulatorBatch(get_task(task) if isinstance(task, str) else task, episodes)
    try:
        obs = sim.reset(seed + np.arange(episodes))
        acting = Acting(policy, episodes, device)
        alive = np.ones(episodes, dtype=bool)
        while alive.any():
            o = torch.from_numpy(obs).float()
            with torch.no_grad():
                act = acting(o)
            obs, rew, term, trunc = sim.step(act.cpu().numpy())
            acting.observe(rew)
            yield o, act, rew, alive.copy(), term
            alive &= ~(term | trunc)
    finally:
        sim.close()


def run_episodes(task, policy, episodes: int, seed: int, device: str | torch.device = "cpu") -> np.ndarray:
    """Returns of ``episodes`` simulator episodes of a (possibly history-dependent) policy acting
    deterministically, run side by side (``play_episodes``); deterministic for a seed."""
    returns = np.zeros(episodes)
    for _, _, rew, running, _ in play_episodes(task, policy, episodes, seed, device):
        returns += rew * running
    return returns


def evaluate(learner, task: str, episodes: int, seed: int, device: str | torch.device = "cpu") -> dict[str, float]:
    """The learner's deterministic policy over ``episodes`` simulator episodes (CPU MuJoCo)."""
    returns = run_episodes(task, acting_policy(learner), episodes, seed, device)
    scores = normalized_score(task, returns)
    return {"return_mean": float(returns.mean()), "return_std": float(returns.std()),
            "normalized_score": float(np.mean(scores)), "normalized_std": float(np.std(scores))}


@contextmanager
def stop_requests(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)):
    """Within: the first of ``signals`` is noted (yielded: a list that gets its number) rather than acted on, for
    the caller to stop where it is safe; the handlers in place before come back at once, so a second signal acts
    as it would have (Ctrl-C twice interrupts). Python takes signals in the main thread only; elsewhere (a worker
    thread) nothing changes and the list stays empty."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def note(signum, frame):
        caught.append(signum)
        for s, handler in previous.items():
            signal.signal(s, handler)

    # a handler set outside Python reads as None, and only the default can stand in for it
    previous = {s: signal.signal(s, note) or signal.SIG_DFL for s in signals}
    try:
        yield caught
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class Trainer:
    def __init__(self, learner, ds, cfg: TrainConfig, model=None, log: Callable[[dict, int], None] | None = None):
        self.learner, self.ds, self.cfg, self.model = learner, ds, cfg.validate(), model
        self.log = log or (lambda metrics, step: None)
        self.device = torch.device(cfg.device)
        self.sampler = TransitionSampler(ds, self.device)
        self.generator = torch.Generator(self.device).manual_seed(cfg.seed)
        self.precision = resolve_precision(cfg.precision, self.device.type)   # a resumed run keeps its own
        self.step = 0
        self.seconds = 0.0          # training wall-clock, summed over every session of this run
        self.evals: list[dict] = []
        self.buffer = self.make_buffer() if learner.uses_model else None
        self.threshold = (self.make_threshold(cfg.truncate_quantile)
                          if learner.uses_model and cfg.truncate_quantile is not None else None)

    # ---------------------------------------------------------------- pieces
    def autocast(self):
        """The update's arithmetic, as ``train.precision`` says (``update_precision``)."""
        return update_precision(self.precision, self.device.type)

    def make_buffer(self):
        cfg = self.cfg
        return ModelReplayBuffer(self.ds.obs_dim, self.ds.act_dim,
                                 cfg.rollout_batch * cfg.rollout_length * cfg.model_retain, self.device)

    def make_threshold(self, quantile: float, held_members: bool = False) -> UncertaintyThreshold:
        """The uncertainty cut: a quantile of what the model shows on (up to 10,000 of) its own data."""
        return UncertaintyThreshold.on_data(self.model, self.sampler.data["obs"], self.sampler.data["actions"],
                                            quantile, seed=self.cfg.seed, held_members=held_members)

    def start_rows(self) -> torch.Tensor:
        """A rollout round's start rows: uniform over the dataset, but for ``episode_start_share`` of them drawn
        from its episode starts. Uniform rows seldom include a reset state (0.25% of walker2d-medium's rows), so a
        policy may never train on imagined steps from where every real episode begins (findings.md, walker2d)."""
        cfg = self.cfg
        n_first = int(round(cfg.rollout_batch * cfg.episode_start_share))
        rows = torch.randint(0, self.sampler.size, (cfg.rollout_batch - n_first,), generator=self.generator,
                             device=self.device)
        if n_first == 0:
            return rows
        starts = torch.from_numpy(self.ds.episode_starts()).to(self.device)
        pick = torch.randint(0, len(starts), (n_first,), generator=self.generator, device=self.device)
        return torch.cat([starts[pick], rows])

    def imagine(self) -> dict[str, float]:
        cfg = self.cfg
        start = self.start_rows()
        judge = getattr(self.learner, "judge", None)
        # Neither a judge (MOPO's penalty reads every member) nor the uncertainty cut (the elites'
        # disagreement): the drawn elite alone runs each step, the same draws, a round 3.4x faster (README,
        # "Benchmarks").
        fast = {"drawn_only": True} if judge is None and self.threshold is None and getattr(
            self.model, "draws_one_member", False) else {}
        ro = rollout(self.model, LearnerPolicy(self.learner), StartStates(self.sampler.data["obs"][start]),
                     cfg.rollout_length, self.generator, truncate=self.threshold, judge=judge, **fast)
        transitions = ro.transitions()
        metrics = {f"rollout/{k}": v for k, v in self.learner.penalize(transitions).items()}
        self.buffer.add(transitions)
        lengths = ro.lengths().float()
        metrics.update({"rollout/length_mean": lengths.mean().item(),
                        "rollout/terminated_rows": int(ro.terminated.any(0).sum()),
                        "rollout/uncertainty_cut_rows": ro.rule_cut_rows,
                        "rollout/nonfinite_rows": ro.nonfinite_rows,
                        "rollout/reward_mean": transitions["rewards"].mean().item() if len(lengths) else 0.0,
                        "rollout/buffer_size": self.buffer.size})
        return metrics

    def batch(self) -> dict[str, torch.Tensor]:
        cfg = self.cfg
        if self.buffer is None:
            return self.sampler.sample(cfg.batch_size, self.generator)
        n_real = int(round(cfg.batch_size * cfg.real_ratio))
        return mix(self.sampler.sample(n_real, self.generator),
                   self.buffer.sample(cfg.batch_size - n_real, self.generator))

    # ------------------------------------------------------------ checkpoint
    def save(self, path: Path) -> None:
        blob = {"format": CHECKPOINT_FORMAT, "step": self.step, "seconds": self.seconds, "learner": self.learner.state_dict(),
                "generator": self.generator.get_state(), "evals": self.evals, "precision": self.precision,
                "buffer": None if self.buffer is None else self.buffer.state_dict()}
        with atomic_path(path, suffix=".pt") as tmp:
            torch.save(blob, tmp)
        write_json(path.with_name("progress.json"), {"step": self.step, "steps": self.cfg.steps,
                                                     "seconds": self.seconds})

    def load(self, path: Path) -> None:
        try:
            blob = torch.load(path, map_location=self.device, weights_only=False)
        except Exception as exc:
            raise ReverieError(f"{path}: not a readable training checkpoint ({type(exc).__name__})") from None
        if not isinstance(blob, dict) or blob.get("format") != CHECKPOINT_FORMAT:
            raise ReverieError(f"{path}: field 'format': expected '{CHECKPOINT_FORMAT}'")
        try:
            self.learner.load_state_dict(blob["learner"])
        except (RuntimeError, KeyError) as exc:
            raise ReverieError(f"{path}: the checkpoint does not fit this agent and task "
                               f"({str(exc).splitlines()[0][:120]})") from None
        self.step, self.evals = int(blob["step"]), list(blob["evals"])
        self.seconds = float(blob.get("seconds", 0.0))
        if self.cfg.precision == "auto":      # resumed elsewhere: the run keeps the arithmetic it began with
            self.precision = blob.get("precision", self.precision)
        self.generator.set_state(blob["generator"].cpu())
        if self.buffer is not None and blob["buffer"] is not None:
            self.buffer.load_state_dict(blob["buffer"])

    # ------------------------------------------------------------------ loop
    def run(self, checkpoint: Path | None = None, progress: bool = False,
            stop_after: int | None = None) -> dict[str, float]:
        """Train to ``cfg.steps`` (or ``stop_after`` more updates), resuming from ``checkpoint`` if it exists."""
        cfg = self.cfg
        if checkpoint is not None and checkpoint.is_file():
            self.load(checkpoint)
        task = self.ds.task
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=cfg.steps, initial=self.step, unit="upd", dynamic_ncols=True)
        last = self.step + stop_after if stop_after is not None else cfg.steps
        t0, s0, metrics = time.perf_counter(), self.step, {}
        t_saved = t0
        with stop_requests() as caught, (bar if bar is not None else nullcontext()):   # tqdm closes on exit
            while self.step < min(cfg.steps, last):
                if self.buffer is not None and self.step % cfg.rollout_every == 0:
                    self.log(self.imagine(), self.step)
                with self.autocast():
                    metrics = self.learner.update(self.batch(), self.generator)
                self.step += 1
                if bar is not None:
                    bar.update(1)
                if self.step % cfg.log_every == 0:
                    rate = (self.step - s0) / (time.perf_counter() - t0)
                    self.log({**{f"train/{k}": v for k, v in metrics.items()}, "train/updates_per_second": rate},
                             self.step)
                if task is not None and self.step % cfg.eval_every == 0 and self.step < cfg.steps:
                    result = evaluate(self.learner, task, cfg.eval_episodes, seed=10_000 + self.step,
                                      device=self.device)
                    self.evals.append({"step": self.step, **result})
                    self.log({f"eval/{k}": v for k, v in result.items()}, self.step)
                    if bar is not None:
                        bar.set_postfix(score=f"{result['normalized_score']:.1f}")
                if checkpoint is not None and (caught or self.step % cfg.checkpoint_every == 0
                                               or self.step == cfg.steps):
                    now = time.perf_counter()
                    self.seconds += now - t_saved
                    t_saved = now
                    self.save(checkpoint)
                if caught:                  # asked to stop: the checkpoint is at this update
                    raise Stopped(caught[0], self.step, checkpoint)
        elapsed = time.perf_counter() - t0
        self.seconds += time.perf_counter() - t_saved if checkpoint is None else 0.0
        return {"step": self.step, "seconds": elapsed, "total_seconds": self.seconds,
                "updates_per_second": (self.step - s0) / elapsed if elapsed > 0 and self.step > s0 else 0.0,
                **{f"last/{k}": v for k, v in metrics.items()}}

    def final_evaluation(self) -> dict[str, float]:
        if self.ds.task is None:
            raise ReverieError(f"{self.ds.name}: the dataset names no task, so there is no simulator to "
                               "evaluate in (pass task=...)")
        return evaluate(self.learner, self.ds.task, self.cfg.final_eval_episodes, seed=0, device=self.device)
