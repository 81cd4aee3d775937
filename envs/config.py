"""Typed configs from Hydra's plain values: one clear error for a wrong key, type or range.

Hydra composes YAML into untyped values; each component keeps a dataclass
config. ``build_config`` fills one from a mapping, checks every value against
its field's default type, and runs the dataclass's own ``validate()`` (ranges).
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from envs.errors import ReverieError


def _check(prefix: str, key: str, default: Any, value: Any) -> Any:
    where = f"{prefix}.{key}"
    if default is None or value is None:
        return value
    if isinstance(default, tuple):
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                           for v in value):
            raise ReverieError(f"{where}: expected a list of numbers, got {value!r}")
        return tuple(value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ReverieError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise ReverieError(f"{where}: expected an integer, got {value!r}")
        return int(value)
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ReverieError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if isinstance(default, str) and not isinstance(value, str):
        raise ReverieError(f"{where}: expected a string, got {value!r}")
    return value


def build_config(cls, values: dict, prefix: str):
    known = {f.name: f for f in fields(cls)}
    kwargs = {}
    for key, value in values.items():
        if key not in known:
            raise ReverieError(f"{prefix}.{key}: not an option here (options: {', '.join(sorted(known))})")
        f = known[key]
        default = f.default if f.default is not MISSING else (f.default_factory() if f.default_factory
                                                              is not MISSING else None)
        kwargs[key] = _check(prefix, key, default, value)
    cfg = cls(**kwargs)
    return cfg.validate() if hasattr(cfg, "validate") else cfg
