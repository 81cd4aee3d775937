"""Ranking manipulation policies in the video world model: ``reverie evaluate`` with ``world_model=video``.

Every VLA policy runs from the same simulator resets (one per seed, the
instruction drawn from the seed) twice: in MetaWorld, where success is the
simulator's, and in the video world model from the reset's frame, where an
episode counts as a success when the model's success signal (its frame judge,
trained on real frames) stays past ``threshold`` for ``hold`` steps in a row (the hold the judge
chose on held-out real episodes at fit; 1 for older models: some step). The imagined success rates are then
judged against the real ones with the same rank metrics as the state models
(Pearson, Spearman, Kendall, MMRV, regret; success rates in [0, 1]).

Truncation: an imagined step whose uncertainty (the model's inverse-dynamics
error, or its ensemble disagreement) passes a quantile of what the model shows
one step from its own dataset is not trusted, and neither is anything after it;
success is judged on the trusted steps only. The rollouts run uncut and every
cut is applied afterwards (a rollout is deterministic, so cutting at step t
afterwards keeps exactly what a rollout truncated at t keeps): one pass gives
the chosen cut and the verdict's sensitivity to the quantile.

The model alone: dataset action sequences replayed open loop from the dataset's
first frames; per-step pixel error (mean squared, quantiles) against horizon,
and PSNR/SSIM at a few horizons. Frame strips show real and imagined frames of
each policy side by side.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from pathlib import Path

import numpy as np
import torch

from envs.atomic_io import atomic_path
from envs.errors import ReverieError
from eval import metrics
from worldmodels.judge import HOLDS, held
from worldmodels.rollout import StartStates, rollout
from worldmodels.video import PROPRIO, frames_to_obs

STRIP_STEPS = (0, 5, 10, 20, 30, 40, 60, 80)
SWEEP_QUANTILES = (1.0, 0.99, 0.95, 0.9)


def load_vla_policies(specs: list[str]) -> list[tuple[str, str, object]]:
    """``(name, source, VLAPolicy)`` for VLA policy files and folders of them."""
    from agents.vla import VLAPolicy

    files: list[Path] = []
    for spec in specs:
        p = Path(spec).expanduser()
        if p.is_dir():
            found = sorted(p.glob("*.pt"))
            if not found:
                raise ReverieError(f"{p}: no policies in this folder (expected VLA policy files *.pt)")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise ReverieError(f"policies: '{spec}' is neither an existing file nor a folder")
    out = []
    for f in files:
        try:
            blob = torch.load(f, map_location="cpu", weights_only=False)
        except Exception as exc:
            raise ReverieError(f"{f}: not a readable policy file ({type(exc).__name__})") from None
        if not isinstance(blob, dict) or blob.get("format") != "reverie.vla/1":
            raise ReverieError(f"{f}: field 'format': expected 'reverie.vla/1' (a VLA policy)")
        out.append((f.stem, str(f), VLAPolicy.from_blob(blob)))
    return out


def reset_starts(task: str, seeds: list[int], size: int):
    """Frames, proprioception and instructions of the simulator's resets for ``seeds``."""
    from envs.manipulation import ManipulationEnv, instruction

    env = ManipulationEnv(task, size)
    frames, states, texts = [], [], []
    for seed in seeds:
        obs = env.reset(seed)
        frames.append(obs["image"])
        states.append(obs["state"])
        texts.append(instruction(env.task, np.random.default_rng(seed), "train"))
    env.close()
    return np.stack(frames), np.stack(states), texts


def dataset_uncertainty(model, episodes, generator: torch.Generator) -> np.ndarray:
    """The model's uncertainty one step from each of its dataset's (frame, action) pairs, the previous
    frame as context, as an imagined step measures it."""
    out = []
    for e in episodes:
        if len(e) < 2:
            continue
        obs = frames_to_obs(e.images[1:len(e)], e.states[1:len(e)])
        ctx = frames_to_obs(e.images[:len(e) - 1], e.states[:len(e) - 1])
        state = model.init_state(obs, generator, context=ctx)
        _, step = model.step(state, torch.from_numpy(e.actions[1:len(e)]).float(), generator=generator,
                             deterministic=True)
        out.append(step.uncertainty.numpy())
    if not out:
        raise ReverieError("dataset: truncation needs episodes of at least two frames to measure the model's "
                           "uncertainty on its own data")
    return np.concatenate(out)


def trusted_steps(uncertainty: np.ndarray, threshold: float | None) -> np.ndarray:
    """Per row, the number of steps before the first whose uncertainty passes ``threshold``
    (``uncertainty`` is ``[T, B]``; None: every step)."""
    T, B = uncertainty.shape
    if threshold is None:
        return np.full(B, T)
    over = uncertainty > threshold
    return np.where(over.any(0), over.argmax(0), T)


def real_rollouts(policy, source: str, task: str, seeds: list[int], size: int, horizon: int,
                  cache: Path | None = None):
    """``agents.vla.real_episodes`` for one policy file (the frames kept of ``seeds[0]``), kept in ``cache`` (a
    folder; None: none) and read back when the same policy file runs the same task, seeds, frame size and
    horizon again, under the same scene rules (``SCENE_RULES``) and MetaWorld version: ranking one zoo in
    several world models pays for the simulator once. Simulator rollouts are ~90% of an evaluation's time."""
    from agents.vla import real_episodes
    from envs.manipulation import SCENE_RULES

    if cache is None:
        return real_episodes(policy, task, seeds, "train", size, horizon, seeds[0])
    import metaworld

    key = hashlib.sha256(Path(source).read_bytes())
    key.update(json.dumps([task, list(map(int, seeds)), size, horizon, "train", SCENE_RULES,
                           getattr(metaworld, "__version__", "")]).encode())
    path = Path(cache) / f"{key.hexdigest()[:24]}.npz"
    if path.is_file():
        with np.load(path) as f:
            return f["wins"], f["lengths"], list(f["frames"])
    wins, lengths, frames = real_episodes(policy, task, seeds, "train", size, horizon, seeds[0])
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, wins=wins, lengths=lengths, frames=np.stack(frames).astype(np.uint8))
    return wins, lengths, frames


def evaluate_video(model, task: str, policies, seeds: list[int], horizon: int = 100, threshold: float = 0.5,
                   episodes=None, open_loop_horizon: int = 50, bootstrap: int = 2000, seed: int = 0,
                   truncate_quantile: float | None = None, sweep: tuple[float, ...] = SWEEP_QUANTILES,
                   sample_model: bool = True, real_cache: Path | None = None, hold: int | None = None,
                   progress=None) -> tuple[dict, dict[str, bytes]]:
    """The result (in ``eval.report``'s shape) and the frame strips (PNG bytes by file name).

    ``truncate_quantile``: judge success only on the steps before the model's uncertainty passes this
    quantile of its uncertainty on ``episodes`` (None: every step); ``sweep``: the quantiles whose
    verdicts are reported beside it (both need ``episodes``). ``sample_model=False`` rolls the latent
    dynamics' mean instead of a sample; ``real_cache``: a folder where the simulator rollouts are kept and
    reused (``real_rollouts``); ``hold``: the steps in a row the signal must pass ``threshold`` for a success
    (None: the one the model's judge chose at fit, or 1); the verdicts at the other holds are reported beside."""
    from agents.vla_finetune import VLAEnginePolicy

    S = model.size
    if truncate_quantile is not None and not 0.0 < truncate_quantile <= 1.0:
        raise ReverieError(f"truncate_quantile: expected a quantile in (0, 1], got {truncate_quantile}")
    if truncate_quantile is not None and not episodes:
        raise ReverieError("truncate_quantile: the cut is a quantile of the model's uncertainty on its dataset; "
                           "pass the dataset (a manipulation file) too")
    if hold is None:
        hold = model.success_hold()
    if isinstance(hold, bool) or not isinstance(hold, int) or hold < 1:
        raise ReverieError(f"option 'hold': expected a positive number of steps or null, got {hold!r}")
    cuts: dict[float, float] = {}
    if episodes and (truncate_quantile is not None or sweep):
        data_unc = dataset_uncertainty(model, episodes, torch.Generator().manual_seed(seed))
        cuts = {q: float(np.quantile(data_unc, q)) for q in sorted({*sweep, *([truncate_quantile]
                                                                             if truncate_quantile else [])})}
    cut = cuts.get(truncate_quantile) if truncate_quantile is not None else None
    frames0, states0, texts = reset_starts(task, seeds, S)
    start = StartStates(frames_to_obs(frames0, states0))
    per_policy, strips = [], {}
    for i, (name, source, policy) in enumerate(policies):
        if policy.cfg.image_size != S:
            raise ReverieError(f"{source}: policy takes {policy.cfg.image_size}x{policy.cfg.image_size} frames, "
                               f"the world model {S}x{S}")
        t0 = time.perf_counter()
        wins, lengths, real_strip = real_rollouts(policy, source, task, seeds, S, horizon, real_cache)
        t1 = time.perf_counter()
        ro = rollout(model, VLAEnginePolicy(policy, texts, S), start, horizon, torch.Generator().manual_seed(seed),
                     deterministic=True, sample_model=sample_model, judge=lambda out: out.success)
        t2 = time.perf_counter()
        hit = ((ro.judged > threshold) & ro.valid).numpy()                     # [T, B]
        unc = ro.uncertainty.numpy()

        def success(threshold_, k=hold):
            trusted = trusted_steps(unc, threshold_)
            return held(hit & (np.arange(len(hit))[:, None] < trusted[None]), k), trusted

        imagined, trusted = success(cut)
        per_policy.append({"policy": name, "kind": "VLA", "source": source,
                           "real_score": 100.0 * wins.mean(), "imagined_score": 100.0 * imagined.mean(),
                           "real_length": float(lengths.mean()), "imagined_length": float(trusted.mean()),
                           "sweep": {str(q): 100.0 * success(t)[0].mean() for q, t in cuts.items()},
                           "holds": {str(k): 100.0 * success(cut, k)[0].mean() for k in sorted({*HOLDS, hold})},
                           "nonfinite_rows": ro.nonfinite_rows, "simulator_seconds": t1 - t0, "model_seconds": t2 - t1})
        imag_frames = torch.cat([ro.obs[:1, 0], ro.next_obs[:, 0]])[:, :-PROPRIO].reshape(-1, S, S, 3).numpy()
        strips[f"strip_{name}.png"] = frame_strip(real_strip, imag_frames, f"{name}: real (top) and imagined "
                                                  f"(bottom), seed {seeds[0]}")
        if progress:
            progress(i + 1, len(policies), per_policy[-1])
    S_ = np.array([p["imagined_score"] for p in per_policy]) / 100.0
    R_ = np.array([p["real_score"] for p in per_policy]) / 100.0
    result = {"task": task, "policies": per_policy, "rows": len(seeds), "horizon": horizon,
              "truncate_quantile": truncate_quantile, "truncate_threshold": cut, "cuts": cuts, "hold": hold,
              "ranking": metrics.ranking_report(S_, R_, (1, 3), bootstrap, seed) if len(per_policy) >= 2 else {},
              "labels": {"score": "success rate (%)", "error": "pixel error (mean squared, [0, 1] pixels)",
                         "policies": "Per policy (success rate, % of episodes)",
                         "scale": "MMRV, regret and error are on the success rate (0 to 1)."}}
    if episodes:
        result["open_loop"], rows = open_loop_frames(model, episodes, open_loop_horizon, bootstrap, seed)
        result["model_rows"] = rows + sweep_rows(per_policy, cuts, truncate_quantile, R_)
    result["model_rows"] = result.get("model_rows", []) + hold_rows(per_policy, hold, R_)
    return result, strips


def sweep_rows(per_policy: list[dict], cuts: dict[float, float], chosen: float | None,
               real: np.ndarray) -> list[list[str]]:
    """The verdict's sensitivity to the cut: for each quantile, the policies' imagined success range and
    how it ranks them against the real success (point figures; the chosen cut's intervals are above)."""
    rows = []
    for q, value in cuts.items():
        s = np.array([p["sweep"][str(q)] for p in per_policy]) / 100.0
        label = (f"cut at the {q:g} quantile of the dataset's uncertainty ({value:.3g})"
                 + (" (chosen)" if q == chosen else ""))
        figures = f"imagined success {100 * s.min():.0f}–{100 * s.max():.0f}%"
        if len(s) >= 2:
            figures += (f", Pearson {metrics.pearson(s, real):.2f}, Spearman {metrics.spearman(s, real):.2f}, "
                        f"MMRV {metrics.mmrv(s, real):.3f}")
        rows.append([label, figures])
    return rows


def hold_rows(per_policy: list[dict], chosen: int, real: np.ndarray) -> list[list[str]]:
    """The verdict's sensitivity to the hold (steps in a row past the threshold), as ``sweep_rows``."""
    rows = []
    for k in per_policy[0]["holds"] if per_policy else []:
        s = np.array([p["holds"][k] for p in per_policy]) / 100.0
        figures = f"imagined success {100 * s.min():.0f}–{100 * s.max():.0f}%"
        if len(s) >= 2:
            figures += (f", Pearson {metrics.pearson(s, real):.2f}, Spearman {metrics.spearman(s, real):.2f}, "
                        f"MMRV {metrics.mmrv(s, real):.3f}")
        label = f"success held for {k} step{'s' if k != '1' else ''}" + (" (chosen)" if int(k) == chosen else "")
        rows.append([label, figures])
    return rows


def open_loop_frames(model, episodes, horizon: int, bootstrap: int, seed: int) -> tuple[dict, list[list[str]]]:
    """Dataset actions replayed in the model from each episode's first frame (the second as context)."""
    S = model.size
    eps = [e for e in episodes if len(e) >= 2]
    H = min(horizon, max(len(e) for e in eps) - 1)
    n = len(eps)
    real = np.zeros((H, n, S, S, 3))
    present = np.zeros((H, n), bool)
    actions = torch.zeros(H, n, 4)
    for j, e in enumerate(eps):
        T = min(H, len(e) - 1)                  # frame t + 2 follows action t + 1 (frame 0 is context)
        real[:T, j] = e.images[2:2 + T] / 255.0
        present[:T, j] = True
        actions[:T, j] = torch.from_numpy(e.actions[1:1 + T])
    obs1 = frames_to_obs(np.stack([e.images[1] for e in eps]), np.stack([e.states[1] for e in eps]))
    ctx = frames_to_obs(np.stack([e.images[0] for e in eps]), np.stack([e.states[0] for e in eps]))
    g = torch.Generator().manual_seed(seed)
    state = model.init_state(obs1, g, context=ctx)
    pred = np.zeros_like(real)
    for t in range(H):
        state, out = model.step(state, actions[t], generator=g, deterministic=True)
        pred[t] = out.obs[:, :-PROPRIO].reshape(n, S, S, 3).numpy()
    err = ((pred - real) ** 2).reshape(H, n, -1).mean(-1)
    rows, at = [], {}
    for s in sorted({s for s in (1, 10, 25, H) if s <= H}):
        ok = present[s - 1]
        if not ok.any():
            continue
        p_, r_ = pred[s - 1][ok], real[s - 1][ok]
        at[str(s)] = metrics.bootstrap(lambda a, _: float(np.median(a)), err[s - 1][ok], err[s - 1][ok], bootstrap,
                                       seed=seed)
        rows.append([f"PSNR / SSIM at step {s} ({int(ok.sum())} episodes)",
                     f"{metrics.psnr(p_, r_).mean():.1f} dB / {metrics.ssim(p_, r_).mean():.3f}"])
    return {"error": metrics.horizon_error(err, present), "median_error_at": at}, rows


def frame_strip(real: list | np.ndarray, imagined: np.ndarray, title: str) -> bytes:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [s for s in STRIP_STEPS if s < max(len(real), len(imagined))]
    fig, axes = plt.subplots(2, len(steps), figsize=(1.3 * len(steps), 3.0))
    for k, s in enumerate(steps):
        for row, frames in enumerate((real, imagined)):
            ax = axes[row, k]
            ax.axis("off")
            if s < len(frames):
                img = np.asarray(frames[s])
                ax.imshow(img if img.dtype == np.uint8 else np.clip(img, 0, 1))
            if row == 0:
                ax.set_title(f"t={s}", fontsize=7)
    fig.suptitle(title, fontsize=8)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()
