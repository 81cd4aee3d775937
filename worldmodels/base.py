"""What every world model shares: posterior draws, member checks, saving and loading, and a fit
that resumes from its last epoch."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch
from torch import Tensor, nn

from envs.atomic_io import atomic_path
from envs.errors import ReverieError
from worldmodels.contract import check_batch


def read_checkpoint(path: str | Path, formats: tuple[str, ...], map_location="cpu") -> dict:
    """A saved model's record, refused on one line unless it is a readable file of one of ``formats``."""
    path = Path(path)
    if not path.is_file():
        raise ReverieError(f"{path}: world-model checkpoint not found")
    try:
        blob = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        raise ReverieError(f"{path}: not a readable checkpoint ({type(exc).__name__})") from None
    if not isinstance(blob, dict) or blob.get("format") not in formats:
        raise ReverieError(f"{path}: field 'format': expected " + " or ".join(f"'{f}'" for f in formats))
    return blob


class WorldModel(nn.Module):
    """Subclasses set ``checkpoint_format`` and ``config_class`` and build from
    ``(obs_dim, act_dim, cfg, task=...)``; they hold ``spec``, ``cfg`` and an ``elites`` buffer."""

    checkpoint_format: str
    config_class: type

    def sample_members(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """``n`` draws from the posterior over models: an elite, uniformly, per row."""
        pick = torch.randint(0, len(self.elites), (n,), generator=generator, device=self.elites.device)
        return self.elites[pick]

    def check_start(self, start: Tensor, member: Tensor | None) -> None:
        check_batch("start", start, self.spec.obs_dim)
        if member is not None and (member.shape != (start.shape[0],) or member.dtype != torch.long
                                   or not ((member >= 0) & (member < self.cfg.members)).all()):
            raise ValueError(f"member: expected {start.shape[0]} member indices in [0, {self.cfg.members}), "
                             f"got shape {list(member.shape)} of {member.dtype}")

    def save(self, path: str | Path) -> None:
        blob = {"format": self.checkpoint_format, "spec": asdict(self.spec), "config": asdict(self.cfg),
                "state_dict": self.state_dict()}
        with atomic_path(path, suffix=".pt") as tmp:
            torch.save(blob, tmp)

    @classmethod
    def load(cls, path: str | Path, map_location: str | torch.device = "cpu"):
        blob = read_checkpoint(path, (cls.checkpoint_format,), map_location)
        values = cls.older_defaults() | blob["config"]
        cfg = cls.config_class(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
        spec = blob["spec"]
        model = cls(spec["obs_dim"], spec["act_dim"], cfg, task=spec.get("task"))
        missing, unexpected = model.load_state_dict(blob["state_dict"], strict=False)
        missing = [k for k in missing if not model.may_lack(k)]
        if missing or unexpected:
            raise ReverieError(f"{path}: field 'state_dict': " + "; ".join(
                f"{what} {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
                for what, keys in (("missing", missing), ("unexpected", unexpected)) if keys))
        return model

    @classmethod
    def older_defaults(cls) -> dict:
        """Config values that a checkpoint written before their key existed was made with (where the default
        has changed since)."""
        return {}

    def may_lack(self, key: str) -> bool:
        """Whether a checkpoint may lack the parameter ``key`` (one written before it existed)."""
        return False


# Config fields added after fits were cached or checkpointed, with the value that reproduces the fits made
# before them: at that value a field stays out of the config that names a fit, so those fits are still found.
KEY_SINCE_ADDED = {"weight_decay_mode": "decoupled", "hand_mover": False, "precision": "float32",
                   "fit_precision": "float32"}


def fit_identity(cfg) -> dict:
    """The config as it names a fit (a cache key, a fit checkpoint's match)."""
    omits = cfg.key_omits() if hasattr(cfg, "key_omits") else set()
    return {k: v for k, v in asdict(cfg).items()
            if k not in omits and (k not in KEY_SINCE_ADDED or v != KEY_SINCE_ADDED[k])}


class FitCheckpoint:
    """A fit's whole state after each epoch, written atomically to ``path`` (None: not kept). A fit
    that finds the checkpoint of the same fit (same data size, config and seed) continues it, so a
    fit killed at any point ends with the weights of one that never stopped."""

    def __init__(self, path: str | Path | None, n: int, cfg, generator: torch.Generator):
        self.path, self.n, self.config, self.start = path, n, fit_identity(cfg), generator.get_state()

    def resume(self, model: nn.Module, opt, generator: torch.Generator, device) -> dict | None:
        """The saved progress (``best``, ``best_state``, ``stale``, ``epoch``), with the model, optimiser
        and generator restored to it; None when there is none of this fit."""
        if self.path is None or not Path(self.path).is_file():
            return None
        blob = torch.load(self.path, map_location=device, weights_only=False)
        if blob["n"] != self.n or blob["config"] != self.config or not torch.equal(blob["generator_start"],
                                                                                    self.start):
            return None
        model.load_state_dict(blob["model"])
        opt.load_state_dict(blob["optimizer"])
        generator.set_state(blob["generator"])
        return blob

    def write(self, model: nn.Module, opt, generator: torch.Generator, **progress) -> None:
        if self.path is None:
            return
        blob = {"n": self.n, "config": self.config, "generator_start": self.start, "model": model.state_dict(),
                "optimizer": opt.state_dict(), "generator": generator.get_state(), **progress}
        with atomic_path(self.path, suffix=".pt") as tmp:
            torch.save(blob, tmp)


def fit_members(model: nn.Module, opt, generator: torch.Generator, checkpoint: FitCheckpoint, boot: Tensor,
                batch_size: int, max_epochs: int, patience: int, improvement: float, train_loss, holdout,
                member_keys: list[str], progress=None) -> tuple[Tensor, int]:
    """The members' shared fit loop: each epoch every member goes once through its own bootstrap
    ``boot`` (``[E, n]`` row ids) in batches (``train_loss(rows [E, b]) -> scalar``); a member whose
    ``holdout() -> [E]`` improves by ``improvement`` (relative) keeps its weights (the parameters
    ``member_keys``, leading dimension E); the fit stops after ``patience`` epochs without any member
    improving, or at ``max_epochs``; ``checkpoint`` is written every epoch and resumed from. The
    model ends with each member's best weights; returns the best holdout figures and the last epoch."""
    E, n = boot.shape
    best = holdout()
    best_state = {k: v.clone() for k, v in model.state_dict().items() if k in member_keys}
    stale, first, last = 0, 1, max_epochs
    saved = checkpoint.resume(model, opt, generator, boot.device)
    if saved is not None:                                   # the same fit, cut short: continue it
        best, best_state, stale = saved["best"], saved["best_state"], saved["stale"]
        first = saved["epoch"] + 1
        last = saved["epoch"] if stale >= patience else last     # it had stopped early
    epoch = first - 1
    for epoch in range(first, last + 1):
        order = torch.argsort(torch.rand(E, n, generator=generator), dim=1).to(boot.device)
        shuffled = torch.gather(boot, 1, order)
        for b in range(0, n, batch_size):
            loss = train_loss(shuffled[:, b:b + batch_size])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        score = holdout()
        improved = (best - score) / best > improvement
        if improved.any():
            state = model.state_dict()
            for k in member_keys:
                best_state[k][improved] = state[k][improved]
            best = torch.where(improved, score, best)
            stale = 0
        else:
            stale += 1
        checkpoint.write(model, opt, generator, best=best, best_state=best_state, stale=stale, epoch=epoch)
        if progress is not None:
            progress(epoch, score)
        if stale >= patience:
            break
    model.load_state_dict({**model.state_dict(), **best_state})
    return best, epoch
