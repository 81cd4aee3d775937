"""A cell's (or a train run's) course, read back from its TensorBoard log: the periodic evaluations and, at each
of them, the learner's Q, temperature, entropy, penalty and imagined reward (each averaged over the logged points
since the evaluation before), so that findings.md's figures can be read again from the run itself.

    python assets/reports/bench/draws/curves.py CELL [CELL...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

COLUMNS = {"score": "eval/normalized_score", "Q": "train/q_mean", "alpha": "train/alpha", "entropy": "train/entropy",
           "penalty": "train/penalty_mean", "imagined r": "rollout/reward_mean", "rollout len": "rollout/length_mean"}


def curves(cell: Path) -> str:
    tb = cell / "tb"
    if not tb.is_dir():
        raise SystemExit(f"curves.py: {tb}: no TensorBoard log (expected a cell or run folder with tb/)")
    acc = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    series = {name: [(e.step, e.value) for e in acc.Scalars(tag)] for name, tag in COLUMNS.items() if tag in tags}
    evals = series.pop("score", [])
    if not evals:
        raise SystemExit(f"curves.py: {tb}: no '{COLUMNS['score']}' points yet")
    rows = [f"{cell}", "| step | score | " + " | ".join(series) + " |", "|---:" * (2 + len(series)) + "|"]
    last = 0
    for step, score in evals:
        cells = []
        for points in series.values():
            window = [v for s, v in points if last < s <= step]
            cells.append(f"{sum(window) / len(window):.3g}" if window else "—")
        rows.append(f"| {step} | {score:.1f} | " + " | ".join(cells) + " |")
        last = step
    if "final/normalized_score" in tags:
        final = acc.Scalars("final/normalized_score")[-1].value
        spread = acc.Scalars("final/normalized_std")[-1].value if "final/normalized_std" in tags else float("nan")
        rows.append(f"final: {final:.1f} ± {spread:.1f}")
    return "\n".join(rows)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    print("\n\n".join(curves(Path(p)) for p in sys.argv[1:]))
