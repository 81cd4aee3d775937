"""The evaluation metrics on cases worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eval import metrics


def test_correlations_on_known_cases():
    assert metrics.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert metrics.pearson([1, 2, 3], [6, 4, 2]) == pytest.approx(-1.0)
    # monotone but not linear: rank correlations are 1, Pearson is not
    assert metrics.spearman([1, 2, 3, 4], [1, 2, 3, 50]) == pytest.approx(1.0)
    assert metrics.kendall([1, 2, 3, 4], [1, 2, 3, 50]) == pytest.approx(1.0)
    assert metrics.pearson([1, 2, 3, 4], [1, 2, 3, 50]) < 0.9
    # one swapped pair of 3: Kendall (concordant 2 - discordant 1) / 3
    assert metrics.kendall([1, 3, 2], [1, 2, 3]) == pytest.approx(1 / 3)
    assert metrics.spearman([1, 3, 2], [1, 2, 3]) == pytest.approx(0.5)
    assert math.isnan(metrics.spearman([1, 1, 1], [1, 2, 3]))   # undefined, not an error


def test_mmrv_by_hand():
    assert metrics.mmrv([1, 2, 3], [10, 20, 30]) == 0.0
    # R = [1, 2, 3], S swaps the top two: policies 2 and 3 each lose |2 - 3| = 1, policy 1 nothing
    assert metrics.mmrv([1, 3, 2], [1, 2, 3]) == pytest.approx(2 / 3)
    # fully reversed: max violations 20, 10, 20
    assert metrics.mmrv([3, 2, 1], [0, 10, 20]) == pytest.approx(50 / 3)
    # ties in the real score cost nothing; a tie in the imagined score breaks the order
    assert metrics.mmrv([1, 2], [5, 5]) == 0.0
    assert metrics.mmrv([1, 1], [0, 4]) == pytest.approx(2.0)


def test_regret_and_abs_error_by_hand():
    s, r = [1, 3, 2], [1, 2, 3]
    assert metrics.regret_at_k(s, r, 1) == pytest.approx(1.0)    # the model picks R=2; the best is 3
    assert metrics.regret_at_k(s, r, 2) == 0.0                    # its top two hold the best
    assert metrics.regret_at_k([1, 1], [0, 5], 1) == pytest.approx(5.0)   # a tie resolves pessimistically
    with pytest.raises(ValueError, match="k: expected"):
        metrics.regret_at_k(s, r, 4)
    assert metrics.abs_error([1, 2], [2, 4]) == pytest.approx(1.5)


def test_bootstrap_interval_holds_the_value_and_counts_undefined_resamples():
    rng = np.random.default_rng(0)
    r = np.arange(12, dtype=float)
    s = r + rng.normal(0, 2, size=12)
    b = metrics.bootstrap(metrics.spearman, s, r, samples=500)
    assert b["low"] <= b["value"] <= b["high"] and b["undefined"] == 0
    b = metrics.bootstrap(metrics.spearman, [1, 1, 1, 2], [1, 2, 3, 4], samples=300)
    assert b["undefined"] > 0 and math.isfinite(b["low"])
    report = metrics.ranking_report(s, r, ks=(1, 3), samples=100)
    assert set(report) == {"pearson", "spearman", "kendall", "mmrv", "abs_error", "regret@1", "regret@3"}


def test_a_stratified_bootstrap_keeps_every_stratum_whole_in_each_resample():
    """Resampling within tasks: a resample never drops a task or lends one task's policies to another."""
    labels = np.array(["a"] * 3 + ["b"] * 5)
    seen = []

    def record(s, r):
        seen.append(s.copy())
        return 0.0
    metrics.bootstrap(record, np.arange(8.0), np.arange(8.0), samples=200, strata=labels)
    drawn = np.stack(seen[:-1])                 # the last call is the metric on all policies
    assert drawn.shape == (200, 8)
    assert np.isin(drawn[:, :3], [0, 1, 2]).all() and np.isin(drawn[:, 3:], [3, 4, 5, 6, 7]).all()
    with pytest.raises(ValueError, match="strata: expected one label per policy"):
        metrics.bootstrap(metrics.pearson, [1.0, 2.0], [1.0, 2.0], strata=["a"])


def test_horizon_error_uses_only_valid_rows():
    error = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 100.0]])
    valid = np.array([[True, True, True], [True, True, False]])
    out = metrics.horizon_error(error, valid, quantiles=(0.5,))
    assert out["step"] == [1, 2] and out["rows"] == [3, 2]
    assert out["q50"] == [2.0, 4.5]


def test_calibration_and_kinematic_error():
    e = np.arange(12, dtype=float).reshape(3, 4)
    ok = np.ones_like(e, dtype=bool)
    assert metrics.calibration(e * 2 + 1, e, ok) == pytest.approx(1.0)
    assert metrics.calibration(-e, e, ok) == pytest.approx(-1.0)
    t = np.arange(6, dtype=float)
    constant_velocity = np.stack([3 * t, -t], axis=-1)[:, None, :]          # [T + 1, 1, 2]
    assert metrics.kinematic_error(constant_velocity, np.ones((5, 1), bool)) == pytest.approx(0.0)
    accelerating = np.stack([t ** 2, t ** 2], axis=-1)[:, None, :]          # second difference 2
    assert metrics.kinematic_error(accelerating, np.ones((5, 1), bool)) == pytest.approx(2.0)
    # steps after the row ended do not count
    broken = accelerating.copy()
    broken[4:] = 1e6
    valid = np.array([True, True, True, False, False])[:, None]
    assert metrics.kinematic_error(broken, valid) == pytest.approx(2.0)


def test_psnr_and_ssim_on_known_frames():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, (2, 16, 16, 3))
    assert np.all(metrics.ssim(a, a) == pytest.approx(1.0)) and np.all(metrics.psnr(a, a) > 100)
    # a uniform error of 0.1: MSE 0.01, PSNR 20 dB
    assert metrics.psnr(np.clip(a, 0, 0.9), np.clip(a, 0, 0.9) + 0.1) == pytest.approx([20.0, 20.0])
    noisy = np.clip(a + rng.normal(0, 0.2, a.shape), 0, 1)
    flat = np.full_like(a, 0.5)
    assert np.all(metrics.ssim(noisy, a) > metrics.ssim(flat, a))    # structure kept beats structure lost
    assert np.all(metrics.ssim(noisy, a) < 0.99)
