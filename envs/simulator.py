"""A batch of MuJoCo simulators stepped together, resettable to dataset states.

``SimulatorBatch`` steps N unwrapped gymnasium v5 environments with one
``[N, act_dim]`` action array and keeps its own episode-step counters, so the
caller sees ``terminated`` (the task's own health check) and ``truncated`` (the
time limit) apart, exactly as D4RL's ``terminals`` and ``timeouts``. It does not
reset finished environments by itself: data collection and the rollout engine
decide what a finished row means.
"""

from __future__ import annotations

import numpy as np

from envs.tasks import Task, get_task


class SimulatorBatch:
    def __init__(self, task: str | Task, num_envs: int, max_episode_steps: int | None = None):
        self.task = task if isinstance(task, Task) else get_task(task)
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = num_envs
        self.max_episode_steps = max_episode_steps or self.task.max_episode_steps
        self.envs = [self.task.make_env().unwrapped for _ in range(num_envs)]
        self.elapsed = np.zeros(num_envs, dtype=np.int64)

    # ------------------------------------------------------------------ resets
    def reset(self, seeds: int | list[int] | np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """Reset the rows in ``index`` (all rows by default) with the task's own
        initial-state noise, seeded per row; returns their observations."""
        index = np.arange(self.num_envs) if index is None else np.asarray(index)
        seeds = np.broadcast_to(np.asarray(seeds, dtype=np.int64), index.shape)
        obs = np.empty((len(index), self.task.obs_dim), dtype=np.float64)
        for k, (i, s) in enumerate(zip(index, seeds)):
            obs[k], _ = self.envs[i].reset(seed=int(s))
            self.elapsed[i] = 0
        return obs.astype(np.float32)

    def reset_to(self, qpos: np.ndarray, qvel: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """Put rows in the given simulator states (``[n, nq]``, ``[n, nv]``)."""
        index = np.arange(self.num_envs) if index is None else np.asarray(index)
        qpos, qvel = np.atleast_2d(qpos), np.atleast_2d(qvel)
        if qpos.shape != (len(index), self.task.nq) or qvel.shape != (len(index), self.task.nv):
            raise ValueError(
                f"reset_to: expected qpos [{len(index)}, {self.task.nq}] and qvel [{len(index)}, {self.task.nv}], "
                f"got {qpos.shape} and {qvel.shape}")
        obs = np.empty((len(index), self.task.obs_dim), dtype=np.float64)
        for k, i in enumerate(index):
            env = self.envs[i]
            if getattr(env, "_np_random", None) is None:
                env.reset(seed=0)  # gymnasium refuses to step an env never reset
            env.set_state(qpos[k].astype(np.float64), qvel[k].astype(np.float64))
            obs[k] = env._get_obs()
            self.elapsed[i] = 0
        return obs.astype(np.float32)

    # ------------------------------------------------------------------- steps
    def step(self, actions: np.ndarray):
        """Step every row. Returns ``obs, reward, terminated, truncated``
        (``[N, obs_dim]`` float32, ``[N]`` float32, ``[N]`` bool, ``[N]`` bool)."""
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs, self.task.act_dim):
            raise ValueError(f"step: expected actions [{self.num_envs}, {self.task.act_dim}], got {actions.shape}")
        obs = np.empty((self.num_envs, self.task.obs_dim), dtype=np.float64)
        rew = np.empty(self.num_envs, dtype=np.float64)
        term = np.empty(self.num_envs, dtype=bool)
        for i, env in enumerate(self.envs):
            obs[i], rew[i], term[i], _, _ = env.step(actions[i].astype(np.float64))
        self.elapsed += 1
        trunc = (self.elapsed >= self.max_episode_steps) & ~term
        return obs.astype(np.float32), rew.astype(np.float32), term, trunc

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """Current ``qpos [N, nq]`` and ``qvel [N, nv]`` (float64, as MuJoCo keeps them)."""
        qpos = np.stack([env.data.qpos.copy() for env in self.envs])
        qvel = np.stack([env.data.qvel.copy() for env in self.envs])
        return qpos, qvel

    def close(self) -> None:
        for env in self.envs:
            env.close()
