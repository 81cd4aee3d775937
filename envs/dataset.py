"""One offline-dataset type for every format Reverie reads or writes.

``OfflineDataset`` holds flat transition arrays in D4RL's vocabulary. Episode
boundaries are where ``terminals`` (the task's own end: a fall) or ``timeouts``
(a cut: the time limit, or the end of collection) is set; the two are never
merged, because a learner must bootstrap through a timeout and not through a
terminal. ``validate()`` checks shapes, dtypes, finiteness and flag consistency
and names the offending field in its error.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from envs.errors import DatasetError

FLOAT_FIELDS = ("observations", "actions", "rewards", "next_observations")
FLAG_FIELDS = ("terminals", "timeouts")
STATE_FIELDS = ("qpos", "qvel")


@dataclass
class OfflineDataset:
    observations: np.ndarray        # [N, obs_dim] float32
    actions: np.ndarray             # [N, act_dim] float32
    rewards: np.ndarray             # [N] float32
    next_observations: np.ndarray   # [N, obs_dim] float32 (stored, never shifted)
    terminals: np.ndarray           # [N] bool: the task ended the episode
    timeouts: np.ndarray            # [N] bool: the episode was cut (time limit, end of data)
    qpos: np.ndarray | None = None  # [N, nq] float64 simulator state of `observations`
    qvel: np.ndarray | None = None  # [N, nv] float64
    task: str | None = None         # a key of envs.tasks.TASKS where known
    name: str = "dataset"
    source: str = ""                # the file or name it was read from, for error messages
    metadata: dict = field(default_factory=dict)

    # ----------------------------------------------------------------- checks
    @classmethod
    def from_arrays(cls, arrays: dict, *, source: str = "", **kwargs) -> "OfflineDataset":
        """Build from raw arrays, checking and converting dtypes; raises DatasetError."""
        out = {}
        for key in FLOAT_FIELDS + FLAG_FIELDS:
            if key not in arrays or arrays[key] is None:
                raise DatasetError("missing", source=source, field=key)
        for key in FLOAT_FIELDS + STATE_FIELDS:
            a = arrays.get(key)
            if a is None:
                continue
            a = np.asarray(a)
            if not np.issubdtype(a.dtype, np.floating):
                raise DatasetError(f"expected a floating-point array, got dtype {a.dtype}", source=source, field=key)
            out[key] = a.astype(np.float64 if key in STATE_FIELDS else np.float32, copy=False)
        for key in FLAG_FIELDS:
            a = np.asarray(arrays[key])
            if a.dtype != bool:
                if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
                    raise DatasetError(f"expected booleans or 0/1 numbers, got dtype {a.dtype}", source=source, field=key)
                if a.size and not np.isin(a, (0, 1)).all():
                    raise DatasetError("expected only 0 and 1 values", source=source, field=key)
                a = a.astype(bool)
            out[key] = a
        # Rewards and flags stored as [N, 1] (NeoRL does) become [N].
        for key in ("rewards",) + FLAG_FIELDS:
            if out[key].ndim == 2 and out[key].shape[1] == 1:
                out[key] = out[key][:, 0]
        ds = cls(**out, source=source, **kwargs)
        ds.validate()
        return ds

    def validate(self) -> "OfflineDataset":
        src = self.source or self.name
        n = len(self.observations)
        if self.observations.ndim != 2:
            raise DatasetError(f"expected shape [N, obs_dim], got {self.observations.shape}", source=src, field="observations")
        if self.actions.ndim != 2:
            raise DatasetError(f"expected shape [N, act_dim], got {self.actions.shape}", source=src, field="actions")
        expected = {
            "actions": (n, self.actions.shape[1]),
            "rewards": (n,),
            "next_observations": self.observations.shape,
            "terminals": (n,),
            "timeouts": (n,),
        }
        if self.qpos is not None or self.qvel is not None:
            if self.qpos is None or self.qvel is None:
                raise DatasetError("qpos and qvel must come together", source=src,
                                   field="qvel" if self.qvel is None else "qpos")
            expected["qpos"] = (n, self.qpos.shape[1] if self.qpos.ndim == 2 else -1)
            expected["qvel"] = (n, self.qvel.shape[1] if self.qvel.ndim == 2 else -1)
        for key, shape in expected.items():
            got = getattr(self, key).shape
            if got != shape:
                raise DatasetError(f"expected shape {shape}, got {got}", source=src, field=key)
        for key in FLOAT_FIELDS + STATE_FIELDS:
            a = getattr(self, key)
            if a is None:
                continue
            expected_dtype = np.float64 if key in STATE_FIELDS else np.float32
            if a.dtype != expected_dtype:
                raise DatasetError(f"expected dtype {np.dtype(expected_dtype)}, got {a.dtype}", source=src, field=key)
            bad = ~np.isfinite(a)
            if bad.any():
                row = int(np.argwhere(bad)[0][0])
                raise DatasetError(f"expected finite values, found NaN or inf at row {row}", source=src, field=key)
        for key in FLAG_FIELDS:
            if getattr(self, key).dtype != bool:
                raise DatasetError(f"expected dtype bool, got {getattr(self, key).dtype}", source=src, field=key)
        both = self.terminals & self.timeouts
        if both.any():
            raise DatasetError(f"a transition cannot be both terminal and a timeout (row {int(np.argmax(both))})",
                               source=src, field="timeouts")
        if n == 0:
            raise DatasetError("expected at least one transition", source=src, field="observations")
        return self

    # ------------------------------------------------------------- structure
    def __len__(self) -> int:
        return len(self.observations)

    @property
    def obs_dim(self) -> int:
        return self.observations.shape[1]

    @property
    def act_dim(self) -> int:
        return self.actions.shape[1]

    @property
    def has_states(self) -> bool:
        return self.qpos is not None

    def episode_ends(self) -> np.ndarray:
        """Exclusive end index of each episode; data after the last flag is one
        unfinished episode."""
        ends = np.flatnonzero(self.terminals | self.timeouts) + 1
        if len(ends) == 0 or ends[-1] != len(self):
            ends = np.append(ends, len(self))
        return ends

    def episode_starts(self) -> np.ndarray:
        return np.concatenate([[0], self.episode_ends()[:-1]])

    def episode_returns(self) -> np.ndarray:
        """Undiscounted return of each episode, the unfinished last one included."""
        return np.add.reduceat(self.rewards.astype(np.float64), self.episode_starts())

    def continuity_breaks(self) -> int:
        """Rows inside an episode whose next observation is not the next row's observation."""
        inside = ~(self.terminals | self.timeouts)[:-1]
        differ = (self.next_observations[:-1] != self.observations[1:]).any(axis=1)
        return int((inside & differ).sum())

    def select(self, index: np.ndarray) -> "OfflineDataset":
        pick = lambda a: None if a is None else a[index]  # noqa: E731
        return replace(self, **{k: pick(getattr(self, k)) for k in FLOAT_FIELDS + FLAG_FIELDS + STATE_FIELDS})

    def arrays(self) -> dict[str, np.ndarray]:
        out = {k: getattr(self, k) for k in FLOAT_FIELDS + FLAG_FIELDS}
        if self.has_states:
            out.update(qpos=self.qpos, qvel=self.qvel)
        return out

    @staticmethod
    def concatenate(parts: list["OfflineDataset"], **kwargs) -> "OfflineDataset":
        with_states = all(p.has_states for p in parts)
        fields = FLOAT_FIELDS + FLAG_FIELDS + (STATE_FIELDS if with_states else ())
        arrays = {k: np.concatenate([getattr(p, k) for p in parts]) for k in fields}
        # A part whose last episode is unfinished was cut there: mark the cut so it
        # does not run on into the next part's first episode.
        for end in np.cumsum([len(p) for p in parts])[:-1] - 1:
            if not arrays["terminals"][end]:
                arrays["timeouts"][end] = True
        return OfflineDataset(**arrays, **kwargs).validate()
