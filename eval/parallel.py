"""Work that outgrows one process, on Ray: one session helper shared by ``reverie evaluate``
(simulator rollouts of many policies side by side) and the Ray launcher options of ``reverie bench``.

Ray is an optional extra (``pip install -e ".[ray]"``); nothing here imports it until asked.

A run either starts a local Ray for itself (``ray.address: null``; its CPUs from ``ray.num_cpus``)
and shuts it down when done, or joins an existing cluster (``ray.address: auto`` or
``host:port``) and leaves it running.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from envs.errors import ReverieError

# Ray's default object store asks for 30% of memory; the objects here are rollouts of a few MB.
OBJECT_STORE_BYTES = 78_643_200


@dataclass
class RayOptions:
    address: str | None = None     # None: a local Ray started for this run; "auto" or host:port: a cluster
    num_cpus: int | None = None    # CPUs of the local Ray (None: every core); ignored with an address
    num_gpus: int | None = None    # GPUs of the local Ray (None: what Ray detects)
    temp_dir: str | None = None    # the local Ray's session folder (None: Ray's default, /tmp/ray)
    cpus_per_task: float = 1.0     # CPUs one task (a cell, a policy's rollouts) reserves
    gpus_per_task: float = 0.0

    def validate(self) -> "RayOptions":
        for name in ("num_cpus", "num_gpus"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise ReverieError(f"ray.{name}: expected a non-negative integer or null, got {v!r}")
        if self.cpus_per_task <= 0 or self.gpus_per_task < 0:
            raise ReverieError(f"ray.cpus_per_task / ray.gpus_per_task: expected > 0 / >= 0, got "
                               f"{self.cpus_per_task} / {self.gpus_per_task}")
        return self

    @classmethod
    def from_config(cls, node: Any) -> "RayOptions":
        """From a command's ``ray`` block (a DictConfig or a plain mapping), checked."""
        from omegaconf import OmegaConf

        from envs.config import build_config

        values = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node or {})
        return build_config(cls, values, "ray")

    def init_kwargs(self) -> dict:
        """The arguments of ``ray.init`` for these options."""
        if self.address:
            return {"address": self.address}
        kw: dict = {"include_dashboard": False, "object_store_memory": OBJECT_STORE_BYTES}
        if self.num_cpus is not None:
            kw["num_cpus"] = self.num_cpus
        if self.num_gpus is not None:
            kw["num_gpus"] = self.num_gpus
        if self.temp_dir:
            kw["_temp_dir"] = self.temp_dir
        return kw


def import_ray():
    try:
        import ray
    except ImportError:
        raise ReverieError('Ray is not installed: pip install -e ".[ray]" (or run `make venv`)') from None
    return ray


@contextmanager
def ray_session(options: RayOptions):
    """Ray, initialised for the block: joins a running session or cluster, or starts a local one
    and shuts it down (with its processes) on the way out."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    try:
        ray.init(**options.init_kwargs(), log_to_driver=False)
    except ConnectionError as exc:
        raise ReverieError(f"ray.address: cannot connect to a Ray cluster at '{options.address}' ({exc})") from None
    try:
        yield ray
    finally:
        ray.shutdown()
