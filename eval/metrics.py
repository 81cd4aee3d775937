"""How far can an imagined verdict on a set of policies be trusted?

Every metric compares ``S`` (a policy's score in the world model) with ``R``
(its score in the simulator), one entry per policy, both on the D4RL
normalized scale. The rank metrics follow DOPE (Fu et al. 2021) and the
video-world-model evaluators (SC3-Eval, WMBench):

- ``pearson``, ``spearman``, ``kendall``: correlation of S with R (scipy);
- ``mmrv``: mean maximum rank violation,
  ``(1/N) sum_i max_j |R_i - R_j| * 1[(S_i > S_j) != (R_i > R_j)]``:
  how much real return the worst mis-ordered pair of each policy costs;
- ``regret_at_k``: the best real score minus the best real score among the k
  policies the model ranks highest (0: the model's top k hold the best);
- ``abs_error``: mean |S - R| in normalized points.

``bootstrap`` gives any of them a percentile confidence interval by
resampling policies (written here rather than taken from ``scipy.stats.bootstrap``
because a resample of near-tied policies can make a correlation undefined;
those resamples are dropped and counted instead of failing the interval).

Model-side figures over rollouts: ``horizon_error`` (per-step state error
quantiles), ``calibration`` (does the model's uncertainty rank its own errors)
and ``kinematic_error`` (positions against a constant-velocity guess from the
two previous steps).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from scipy import stats


def _pair(s, r) -> tuple[np.ndarray, np.ndarray]:
    s, r = np.asarray(s, dtype=np.float64), np.asarray(r, dtype=np.float64)
    if s.shape != r.shape or s.ndim != 1:
        raise ValueError(f"expected two 1-D arrays of one length, got {s.shape} and {r.shape}")
    return s, r


def _constant(x: np.ndarray) -> bool:
    return len(x) < 2 or bool(np.all(x == x[0]))


def pearson(s, r) -> float:
    s, r = _pair(s, r)
    return float("nan") if _constant(s) or _constant(r) else float(stats.pearsonr(s, r).statistic)


def spearman(s, r) -> float:
    s, r = _pair(s, r)
    return float("nan") if _constant(s) or _constant(r) else float(stats.spearmanr(s, r).statistic)


def kendall(s, r) -> float:
    s, r = _pair(s, r)
    return float("nan") if _constant(s) or _constant(r) else float(stats.kendalltau(s, r).statistic)


def mmrv(s, r) -> float:
    """Mean maximum rank violation of imagined scores ``s`` against real scores ``r``."""
    s, r = _pair(s, r)
    violated = (s[:, None] > s[None, :]) != (r[:, None] > r[None, :])
    return float((np.abs(r[:, None] - r[None, :]) * violated).max(axis=1).mean())


def regret_at_k(s, r, k: int = 1) -> float:
    """Best real score minus the best real score among the model's top ``k`` (ties: the lower real)."""
    s, r = _pair(s, r)
    if not 1 <= k <= len(s):
        raise ValueError(f"k: expected 1 <= k <= {len(s)} policies, got {k}")
    order = np.lexsort((r, -s))          # by imagined score, highest first; ties resolved pessimistically
    return float(r.max() - r[order[:k]].max())


def abs_error(s, r) -> float:
    s, r = _pair(s, r)
    return float(np.mean(np.abs(s - r)))


def bootstrap(metric: Callable[[np.ndarray, np.ndarray], float], s, r, samples: int = 2000,
              level: float = 0.95, seed: int = 0, strata=None) -> dict:
    """The metric on all policies and a percentile interval over policy resamples.
    Resamples where the metric is undefined (NaN, e.g. all-tied scores) are dropped and counted.
    ``strata`` (one label per policy, e.g. its task): resample within each stratum, so every
    resample keeps each stratum's count of policies."""
    s, r = _pair(s, r)
    rng = np.random.default_rng(seed)
    if strata is None:
        idx = rng.integers(0, len(s), size=(samples, len(s)))
    else:
        labels = np.asarray(strata)
        if labels.shape != s.shape:
            raise ValueError(f"strata: expected one label per policy ({len(s)}), got {labels.shape}")
        groups = [np.flatnonzero(labels == g) for g in dict.fromkeys(labels.tolist())]
        idx = np.concatenate([g[rng.integers(0, len(g), size=(samples, len(g)))] for g in groups], axis=1)
    values = np.array([metric(s[i], r[i]) for i in idx])
    ok = values[np.isfinite(values)]
    tail = 100 * (1 - level) / 2
    lo, hi = (np.percentile(ok, [tail, 100 - tail]) if len(ok) else (float("nan"), float("nan")))
    return {"value": metric(s, r), "low": float(lo), "high": float(hi), "level": level,
            "samples": samples, "undefined": int(samples - len(ok))}


def ranking_report(s, r, ks: tuple[int, ...] = (1, 3), samples: int = 2000, seed: int = 0) -> dict:
    """Every rank metric with its bootstrap interval, by name."""
    s, r = _pair(s, r)
    metrics = {"pearson": pearson, "spearman": spearman, "kendall": kendall, "mmrv": mmrv, "abs_error": abs_error}
    for k in ks:
        if k <= len(s):
            metrics[f"regret@{k}"] = (lambda a, b, k=k: regret_at_k(a, b, k))
    return {name: bootstrap(f, s, r, samples, seed=seed) for name, f in metrics.items()}


# ------------------------------------------------------------------ model-side figures over rollouts
def horizon_error(error: np.ndarray, valid: np.ndarray, quantiles=(0.1, 0.25, 0.5, 0.75, 0.9)) -> dict:
    """Per-step error quantiles: ``error`` and ``valid`` are ``[T, B]``; step t's figures use the rows
    still valid at t. Returns ``{"step": [1..T], "rows": [...], "q10": [...], ...}``."""
    T = error.shape[0]
    out: dict[str, list] = {"step": list(range(1, T + 1)), "rows": valid.sum(1).astype(int).tolist()}
    for q in quantiles:
        out[f"q{int(round(100 * q))}"] = [float(np.quantile(error[t][valid[t]], q)) if valid[t].any()
                                          else float("nan") for t in range(T)]
    return out


def calibration(uncertainty: np.ndarray, error: np.ndarray, valid: np.ndarray) -> float:
    """Spearman correlation of the model's uncertainty with its error, over valid (step, row) pairs."""
    u, e = uncertainty[valid], error[valid]
    return spearman(u, e)


def kinematic_error(positions: np.ndarray, valid: np.ndarray) -> float:
    """Mean |x_{t+1} - (2 x_t - x_{t-1})| over position coordinates and steps: how far each step's
    positions are from a constant-velocity guess from the two before. ``positions`` is
    ``[T + 1, B, P]`` (start state first); ``valid`` ``[T, B]`` marks the steps taken."""
    guess = 2 * positions[1:-1] - positions[:-2]
    err = np.abs(positions[2:] - guess).mean(-1)          # [T - 1, B]
    ok = valid[1:] & valid[:-1]
    return float(err[ok].mean()) if ok.any() else float("nan")


# ------------------------------------------------------------------ frames
def psnr(pred, true) -> np.ndarray:
    """Peak signal-to-noise ratio (dB) per frame of images in [0, 1], ``[N, ...] -> [N]``."""
    pred, true = np.asarray(pred, np.float64), np.asarray(true, np.float64)
    mse = ((pred - true) ** 2).reshape(len(pred), -1).mean(1)
    return 10 * np.log10(1.0 / np.maximum(mse, 1e-12))


def ssim(pred, true, window: int = 7) -> np.ndarray:
    """Structural similarity per frame of RGB images in [0, 1], ``[N, H, W, 3] -> [N]``: the standard
    formula (Wang et al. 2004; C1 = 0.01^2, C2 = 0.03^2) over uniform ``window`` x ``window`` patches,
    averaged over patches and channels."""
    from numpy.lib.stride_tricks import sliding_window_view

    x, y = np.asarray(pred, np.float64), np.asarray(true, np.float64)

    def local_mean(a):
        return sliding_window_view(a, (window, window), axis=(1, 2)).mean(axis=(-1, -2))

    mx, my = local_mean(x), local_mean(y)
    vx, vy = local_mean(x * x) - mx ** 2, local_mean(y * y) - my ** 2
    cxy = local_mean(x * y) - mx * my
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx ** 2 + my ** 2 + c1) * (vx + vy + c2))
    return s.reshape(len(x), -1).mean(1)
