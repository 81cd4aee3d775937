"""How many torch threads a command should run: ``threads=N``, or ``threads=auto`` for the idle cores.

torch's OpenMP threads spin at every barrier, so a thread that shares its core with another busy process
holds the others up: on two cores, each running a grid cell, MOPO's update ran at 10.7 updates/s on two
threads against 42.8 on one (``tests/bench/bench_threads.py``). So ``auto`` counts the cores this process
may use (its CPU affinity, capped by a cgroup CPU quota) that are idle now: it reads the kernel's CPU times
(``/proc/stat``) twice, a quarter-second apart, and sums the idle share of each usable core. The 1-minute load
average is the fallback where there is no ``/proc/stat``; it lags, so just after other work stops it still
counts that work.

Both readings happen once a process: a nested command (the demo runs ``train`` and ``evaluate`` in-process)
shares the first, since a later reading would count this process's own work.
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings
from pathlib import Path

from envs.errors import ReverieError

SAMPLE_SECONDS = 0.25

_auto: int | None = None          # ``threads=auto``'s count, once read
auto_reading = ""                 # what it read: "2 cores, 1.9 busy over 0.25 s"
_checked = False                  # whether an explicit count has been checked against the idle cores


def usable_cpus() -> tuple[list[int], int]:
    """The CPUs this process may run on, and how many of them it may keep busy at once (fewer where a cgroup
    CPU quota, ``cpu.max`` or ``cfs_quota_us``, allows less than all of them)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    quota = _cgroup_quota()
    return cpus, min(len(cpus), max(1, math.ceil(quota))) if quota is not None else len(cpus)


def _cgroup_quota() -> float | None:
    try:
        text = Path("/sys/fs/cgroup/cpu.max").read_text().split()                      # cgroup v2: "max 100000"
        return None if text[0] == "max" else int(text[0]) / int(text[1])
    except (OSError, ValueError, IndexError):
        pass
    try:
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())          # cgroup v1: -1 for none
        period = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def cpu_times(text: str) -> dict[int, tuple[int, int]]:
    """``/proc/stat``'s per-CPU lines as ``{cpu: (idle ticks, total ticks)}`` (idle counts iowait)."""
    times = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            ticks = [int(f) for f in fields[:8]]                  # user nice system idle iowait irq softirq steal
            times[int(name[3:])] = (ticks[3] + ticks[4], sum(ticks))
    return times


def idle_share(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], cpus: list[int]) -> float:
    """Idle cores among ``cpus`` between two readings of ``cpu_times``: each core's idle share, summed."""
    idle = 0.0
    for c in cpus:
        if c in before and c in after:
            total = after[c][1] - before[c][1]
            idle += (after[c][0] - before[c][0]) / total if total > 0 else 1.0
    return idle


def free_cores(sample_seconds: float = SAMPLE_SECONDS) -> tuple[int, int, str]:
    """(cores this process may use, how many of them are idle, how that was read)."""
    cpus, usable = usable_cpus()
    try:
        before = cpu_times(Path("/proc/stat").read_text())
        time.sleep(sample_seconds)
        after = cpu_times(Path("/proc/stat").read_text())
        if not any(c in before for c in cpus):
            raise OSError("no usable CPU in /proc/stat")
        idle = idle_share(before, after, cpus)
        return usable, min(usable, round(idle)), f"{len(cpus) - idle:.1f} of {len(cpus)} busy over {sample_seconds:g} s"
    except (OSError, ValueError, IndexError):
        pass
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return usable, usable, "no load reading"
    return usable, min(usable, max(0, len(cpus) - round(load))), f"1-minute load {load:.1f}"


def resolve_threads(value) -> int:
    """``threads=N`` or ``threads=auto`` as a torch thread count: ``auto`` takes the idle cores (at least one);
    an explicit N above them is kept, with one warning."""
    global _auto, _checked, auto_reading
    if value == "auto":
        if _auto is None:
            usable, idle, how = free_cores()
            _auto, auto_reading = max(1, idle), f"{usable} core{'s' * (usable > 1)}, {how}"
        return _auto
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ReverieError(f"option 'threads': expected a positive whole number or auto, got {value!r}")
    if value > 1 and not _checked:
        _checked = True
        usable, idle, how = free_cores()
        if value > max(1, idle):
            warnings.warn(f"threads={value} but {idle} of {usable} cores are idle ({how}): torch's threads will "
                          f"wait on each other, often several times slower than threads={max(1, idle)}; pass "
                          f"threads=auto to use the idle cores", stacklevel=2)
    return value



def threads_option(text: str) -> int | str:
    """``--threads``'s argparse ``type``: ``auto`` or a positive whole number, else argparse's one-line refusal."""
    if text == "auto":
        return text
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive whole number or auto, got {text!r}")


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """``--threads`` (default auto) for the scripts under ``eval/``; ``resolve_threads(args.threads)`` is the count."""
    parser.add_argument("--threads", type=threads_option, default="auto",
                        help="torch threads: auto takes the idle cores, at least one; a count above them makes "
                        "torch's threads wait on each other (eval/threads.py)")
