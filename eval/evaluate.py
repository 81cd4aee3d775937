"""``reverie evaluate``: the same policies in the simulator and in a world model.

Each policy runs closed-loop from the same start states twice, through the one
rollout engine: in the simulator (MuJoCo reset to the start states through
qpos/qvel) and in the world model. The imagined returns are then judged
against the real ones as a ranking (``eval.metrics``), and the model itself is
examined over rollouts:

- closed loop: per-step state error of the imagined trajectory against the
  real one of the same policy from the same state, the model's uncertainty
  against that error (calibration), and a kinematic-consistency figure;
- open loop: dataset action sequences replayed in the model from the
  dataset's own states, so the per-step error is the model's alone.

Policies come from the task's shipped zoo (``zoo``), policy files
(``reverie.policy/1``), ``reverie train`` runs (``config.yaml`` +
``learner.pt``, any learner, history-dependent ones included), or folders of
those.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from envs.errors import ReverieError
from envs.simulator import SimulatorBatch
from envs.tasks import Task, normalized_score
from eval import metrics
from worldmodels.rollout import ActorPolicy, Rollout, SimulatorSource, StartStates, StateRange, rollout

RUN_FILES = ("learner.pt", "world_model.pt", "checkpoint.pt")


@dataclass
class Candidate:
    name: str        # unique label in the report
    source: str      # where it came from (file, run folder, zoo entry)
    kind: str        # "zoo", "policy file" or "train run (<agent>)"
    policy: object   # behind the rollout engine's Policy contract


# ------------------------------------------------------------------------------------ policies
def _policy_file(path: Path, task: Task, name: str, kind: str) -> Candidate:
    from envs.policies import load_policy

    actor, blob = load_policy(path)
    if (actor.obs_dim, actor.act_dim) != (task.obs_dim, task.act_dim):
        raise ReverieError(f"{path}: policy has obs_dim={actor.obs_dim}, act_dim={actor.act_dim}; task "
                           f"'{task.name}' has obs_dim={task.obs_dim}, act_dim={task.act_dim}")
    return Candidate(name, str(path), kind, ActorPolicy(actor))


def _train_run(path: Path, task: Task) -> Candidate:
    from agents.registry import load_learner
    from agents.training import acting_policy

    agent, learner = load_learner(path, task.obs_dim, task.act_dim)
    return Candidate(path.name, str(path), f"train run ({agent})", acting_policy(learner))


def _is_run(path: Path) -> bool:
    return (path / "learner.pt").is_file() and (path / "config.yaml").is_file()


def load_candidates(specs: Sequence[str], task: Task) -> list[Candidate]:
    """Every policy the specs name: ``zoo`` (the task's shipped snapshots), a policy file, a
    ``reverie train`` run folder, or a folder holding policy files and/or run folders."""
    from envs.policies import load_zoo

    out: list[Candidate] = []
    for spec in specs:
        spec = str(spec)
        if spec == "zoo":
            for e in load_zoo(task).entries:
                out.append(_policy_file(e.path, task, e.name, "zoo" + (f" ({', '.join(e.roles)})" if e.roles else "")))
            continue
        path = Path(spec).expanduser()
        if path.is_file():
            out.append(_policy_file(path, task, path.stem, "policy file"))
        elif path.is_dir() and _is_run(path):
            out.append(_train_run(path, task))
        elif path.is_dir():
            found = [p for p in sorted(path.glob("*.pt")) if p.name not in RUN_FILES]
            runs = sorted(p.parent for p in path.rglob("learner.pt") if _is_run(p.parent))
            if not found and not runs:
                raise ReverieError(f"{path}: no policies in this folder (expected policy files *.pt or "
                                   "`reverie train` run folders with learner.pt)")
            out += [_policy_file(p, task, p.stem, "policy file") for p in found]
            out += [_train_run(r, task) for r in runs]
        else:
            raise ReverieError(f"policies: '{spec}' is neither 'zoo' nor an existing file or folder")
    if not out:
        raise ReverieError("policies: expected at least one policy (e.g. policies=[zoo])")
    names: dict[str, int] = {}
    for c in out:                      # unique labels: a run and a file may share a stem
        k = names.get(c.name, 0)
        names[c.name] = k + 1
        if k:
            c.name = f"{c.name}#{k + 1}"
    return out


# ------------------------------------------------------------------------------ start states
def start_states(task: Task, how: str, rows: int, seed: int, ds=None) -> StartStates:
    """``dataset``: states drawn from the dataset (restored through qpos/qvel); ``reset``: the
    simulator's own initial-state distribution, seeded per row."""
    if how == "dataset":
        if ds is None or not ds.has_states:
            raise ReverieError("start=dataset: the dataset holds no simulator states (qpos/qvel); use start=reset")
        index = np.sort(np.random.default_rng(seed).choice(len(ds), size=min(rows, len(ds)), replace=False))
        return StartStates.from_dataset(ds, index)
    if how == "reset":
        sim = SimulatorBatch(task, rows)
        obs = sim.reset(seed + np.arange(rows))
        qpos, qvel = sim.state()
        sim.close()
        return StartStates(torch.from_numpy(obs), torch.from_numpy(qpos), torch.from_numpy(qvel))
    raise ReverieError(f"start: expected 'dataset' or 'reset', got '{how}'")


class ReplayPolicy:
    """Replays recorded action sequences ``[T, B, act_dim]``, one step per call (open loop)."""

    def __init__(self, actions: torch.Tensor):
        self.actions = actions

    def initial_state(self, batch_size: int) -> int:
        return 0

    def act(self, state, obs, first, *, deterministic, generator=None, prev_reward=None):
        return state + 1, self.actions[state]


# ------------------------------------------------------------------------------ figures
def state_error(pred: torch.Tensor, true: torch.Tensor, scale: torch.Tensor) -> np.ndarray:
    """Mean over coordinates of |pred - true| in units of the data's spread: ``[T, B]``."""
    return ((pred - true).abs() / scale).mean(-1).numpy()


def _positions(r: Rollout, start: torch.Tensor, n: int) -> np.ndarray:
    return torch.cat([start[None, :, :n], r.next_obs[..., :n]], dim=0).numpy()


@dataclass
class EvalConfig:
    horizon: int = 1000
    rows: int = 50
    member: str = "per_step"        # per_step: a member drawn each step; held: one per row per rollout
    sample_model: bool = True       # sample the model's Gaussian, not its mean
    open_loop_rows: int = 200
    open_loop_horizon: int = 200
    bootstrap: int = 2000
    seed: int = 0
    ks: tuple[int, ...] = (1, 3)
    max_state_std: float | None = None   # cut imagined rows that leave the model's data mean ± this many stds

    def validate(self) -> "EvalConfig":
        for name in ("horizon", "rows", "open_loop_horizon", "open_loop_rows", "bootstrap"):
            if getattr(self, name) < 1:
                raise ReverieError(f"{name}: expected a positive integer, got {getattr(self, name)}")
        if self.max_state_std is not None and not self.max_state_std > 0:
            raise ReverieError(f"max_state_std: expected a positive number of standard deviations or null, "
                               f"got {self.max_state_std}")
        if self.member not in ("per_step", "held"):
            raise ReverieError(f"member: expected 'per_step' or 'held', got '{self.member}'")
        return self


# Simulator rollouts run the policy with one torch thread wherever they run: the cost is MuJoCo's
# (single-threaded), and a fixed count keeps a Ray worker's matmuls bit-identical to a serial run's.
SIMULATOR_THREADS = 1


def simulate(task_name: str, policy, start: StartStates, horizon: int, seed: int) -> tuple[Rollout, float]:
    """One policy's closed-loop simulator rollouts from ``start`` (and the seconds they took): a
    function of its arguments alone, so a Ray worker returns exactly what a serial run does."""
    threads = torch.get_num_threads()
    torch.set_num_threads(SIMULATOR_THREADS)
    try:
        t0 = time.perf_counter()
        real = rollout(SimulatorSource(task_name, len(start.obs)), policy, start, horizon,
                       torch.Generator().manual_seed(seed), deterministic=True)
        return real, time.perf_counter() - t0
    finally:
        torch.set_num_threads(threads)


def simulator_rollouts(task: Task, candidates: list[Candidate], start: StartStates, horizon: int, seed: int,
                       ray=None) -> list[tuple[Rollout, float]]:
    """Every candidate's simulator rollouts, one after another, or (``ray``: ``RayOptions``) one
    Ray task per candidate, side by side; the rollouts are the same either way (tested)."""
    if ray is None:
        return [simulate(task.name, c.policy, start, horizon, seed) for c in candidates]
    from eval.parallel import ray_session

    with ray_session(ray) as r:
        remote = r.remote(simulate).options(num_cpus=ray.cpus_per_task, num_gpus=ray.gpus_per_task)
        start_ref = r.put(start)
        return r.get([remote.remote(task.name, c.policy, start_ref, horizon, seed) for c in candidates])


def imagine(model, policy, start_obs: torch.Tensor, cfg: EvalConfig) -> Rollout:
    """A policy's closed-loop rollouts in the world model, acting deterministically, as ``evaluate``
    judges it (and ``reverie tune``'s offline objective does, with a held-out model)."""
    B = len(start_obs)
    member = model.sample_members(B, torch.Generator().manual_seed(cfg.seed)) if cfg.member == "held" else None
    kwargs = {"member": member} if member is not None else {}
    bounds = StateRange.of_model(model, cfg.max_state_std) if cfg.max_state_std is not None else None
    return rollout(model, policy, start_obs, cfg.horizon, torch.Generator().manual_seed(cfg.seed + 1),
                   deterministic=True, sample_model=cfg.sample_model, bounds=bounds, **kwargs)


def evaluate(model, task: Task, candidates: list[Candidate], start: StartStates, cfg: EvalConfig,
             ds=None, progress=None, ray=None) -> dict:
    """Every candidate in the simulator and in the model from ``start``; the rank metrics over
    candidates, the closed-loop model figures over all of them, and (with ``ds``) the open loop.
    ``ray`` (``eval.parallel.RayOptions``) spreads the simulator rollouts over Ray workers."""
    cfg = cfg.validate()
    spec = model.spec
    if spec.task is not None and spec.task != task.name:
        raise ReverieError(f"world model was fitted for task '{spec.task}', not '{task.name}'")
    if (spec.obs_dim, spec.act_dim) != (task.obs_dim, task.act_dim):
        raise ReverieError(f"world model is for obs_dim={spec.obs_dim}, act_dim={spec.act_dim}; task "
                           f"'{task.name}' has obs_dim={task.obs_dim}, act_dim={task.act_dim}")
    B, T = len(start.obs), cfg.horizon
    scale = (torch.from_numpy(ds.observations.std(0)).clamp_min(1e-6) if ds is not None
             else torch.ones(task.obs_dim))
    positions = task.obs_positions
    per_policy, errors, valids, uncert = [], [], [], []
    kin_imagined, kin_real = [], []
    reals = simulator_rollouts(task, candidates, start, T, cfg.seed, ray=ray)
    for i, c in enumerate(candidates):
        real, sim_seconds = reals[i]
        t1 = time.perf_counter()
        imag = imagine(model, c.policy, start.obs, cfg)
        t2 = time.perf_counter()
        rr, ri = real.returns().double().numpy(), imag.returns().double().numpy()
        both = (real.valid & imag.valid).numpy()
        errors.append(state_error(imag.next_obs, real.next_obs, scale))
        valids.append(both)
        uncert.append(imag.uncertainty.numpy())
        kin_imagined.append(metrics.kinematic_error(_positions(imag, start.obs, positions), imag.valid.numpy()))
        kin_real.append(metrics.kinematic_error(_positions(real, start.obs, positions), real.valid.numpy()))
        per_policy.append({
            "policy": c.name, "kind": c.kind, "source": c.source,
            "real_return": float(rr.mean()), "imagined_return": float(ri.mean()),
            "real_score": float(np.mean(normalized_score(task, rr))),
            "imagined_score": float(np.mean(normalized_score(task, ri))),
            "real_length": float(real.lengths().float().mean()),
            "imagined_length": float(imag.lengths().float().mean()),
            "nonfinite_rows": imag.nonfinite_rows, "diverged_rows": imag.diverged_rows,
            "kinematic_imagined": kin_imagined[-1], "kinematic_real": kin_real[-1],
            "simulator_seconds": sim_seconds, "model_seconds": t2 - t1,
            "imagined_transitions_per_second": float(imag.lengths().sum()) / max(t2 - t1, 1e-9)})
        if progress:
            progress(i + 1, len(candidates), per_policy[-1])
    # rank metrics on the normalized return (D4RL score / 100: 0 random, 1 expert), the scale
    # SC3-Eval and WMBench report MMRV and regret on
    S = np.array([p["imagined_score"] for p in per_policy]) / 100.0
    R = np.array([p["real_score"] for p in per_policy]) / 100.0
    err = np.concatenate(errors, axis=1)
    ok = np.concatenate(valids, axis=1)
    result = {
        "task": task.name, "policies": per_policy, "rows": B, "horizon": T,
        "ranking": metrics.ranking_report(S, R, cfg.ks, cfg.bootstrap, cfg.seed) if len(S) >= 2 else {},
        "closed_loop": {"error": metrics.horizon_error(err, ok),
                        "median_error_at": median_error_at(err, ok, T, cfg),
                        "calibration": metrics.calibration(np.concatenate(uncert, axis=1), err, ok),
                        "kinematic_imagined": float(np.nanmean(kin_imagined)),
                        "kinematic_real": float(np.nanmean(kin_real))},
    }
    if ds is not None:
        result["open_loop"] = open_loop(model, ds, cfg, scale)
    return result


def median_error_at(err: np.ndarray, valid: np.ndarray, horizon: int, cfg: EvalConfig) -> dict:
    """The median state error at steps 1, 10, 100 and the last, each with a bootstrap interval over
    the rows still running there (NaN where none is)."""
    out = {}
    for s in sorted({s for s in (1, 10, 100, horizon) if s <= horizon}):
        e = err[s - 1][valid[s - 1]]
        out[str(s)] = (metrics.bootstrap(lambda a, _: float(np.median(a)), e, e, cfg.bootstrap, seed=cfg.seed)
                       if len(e) else {"value": float("nan"), "low": float("nan"), "high": float("nan")})
    return out


def replay_segments(ds, rows: int, horizon: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Start indices of up to ``rows`` dataset segments of ``horizon`` steps inside one episode,
    and a ``[horizon, rows]`` mask of the steps the data holds (episodes may end sooner)."""
    ends = ds.episode_ends()
    episode_end = np.repeat(ends, np.diff(np.concatenate([[0], ends])))      # each row's episode end
    starts = np.random.default_rng(seed).choice(len(ds), size=min(rows, len(ds)), replace=False)
    starts.sort()
    steps = np.arange(horizon)[:, None]
    return starts, (starts[None, :] + steps) < episode_end[starts][None, :]


def open_loop(model, ds, cfg: EvalConfig, scale: torch.Tensor) -> dict:
    """Dataset action sequences replayed in the model from the dataset's states: per-step error
    against the recorded next states, and how well the model's uncertainty ranks it."""
    H = cfg.open_loop_horizon
    starts, held = replay_segments(ds, cfg.open_loop_rows, H, cfg.seed)
    idx = np.minimum(starts[None, :] + np.arange(H)[:, None], len(ds) - 1)       # [H, n]
    actions = torch.from_numpy(ds.actions[idx])
    true_next = torch.from_numpy(ds.next_observations[idx])
    imag = rollout(model, ReplayPolicy(actions), torch.from_numpy(ds.observations[starts]), H,
                   torch.Generator().manual_seed(cfg.seed + 2), deterministic=True, sample_model=cfg.sample_model)
    valid = imag.valid.numpy() & held
    err = state_error(imag.next_obs, true_next, scale)
    return {"rows": int(len(starts)), "horizon": H, "error": metrics.horizon_error(err, valid),
            "median_error_at": median_error_at(err, valid, H, cfg),
            "calibration": metrics.calibration(imag.uncertainty.numpy(), err, valid),
            "nonfinite_rows": imag.nonfinite_rows}
