"""Refresh the tables of results.md from the ledger, keeping its prose: `reverie bench collect_only=true` into a
scratch folder, then its two tables replace this folder's results.md's, and the finished-cell count is updated.

    python assets/reports/bench/splice_tables.py
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from envs.atomic_io import write_text

HERE = Path(__file__).parent
GRID_AGENTS = {"mopo", "mobile", "ravl", "td3bc", "iql"}
GRID_DATASETS = {f"{env}-{level}" for env in ("hopper", "halfcheetah", "walker2d") for level in ("medium", "medium-replay")}


def tables(text: str) -> list[str]:
    """Each markdown table in ``text``, whole (consecutive lines starting with '|')."""
    return re.findall(r"(?:^\|.*\n)+", text, flags=re.M)


def grid_rows(ledger: Path) -> list[dict]:
    """The rows of issue 3's grid in a ledger (issue 4's NEUBAY rows and off-grid cells share the file)."""
    with open(ledger, newline="") as fh:
        return [row for row in csv.DictReader(fh) if row["agent"] in GRID_AGENTS and row["dataset"] in GRID_DATASETS
                and int(row["steps"]) == 100_000]


def remaining(finished: list[dict], retired: list[dict]) -> str:
    """What is left of the grid per learner, and its cost at the wall-clock its cells have taken so far (a retired
    cell's where none has finished): a planning figure, from cells run beside other work on two cores."""
    left, hours, from_retired, unknown = {}, 0.0, [], []
    for agent in sorted(GRID_AGENTS):
        left[agent] = n = len(GRID_DATASETS) * 3 - sum(row["agent"] == agent for row in finished)
        seconds = [float(row["train_seconds"]) for row in finished if row["agent"] == agent]
        if not seconds:
            seconds = [float(row["train_seconds"]) for row in retired if row["agent"] == agent]
            if n:
                (from_retired if seconds else unknown).append(agent.upper())
        hours += n * sum(seconds) / len(seconds) / 3600 if seconds else 0.0
    total = sum(left.values())
    if not total:
        return "Remaining: none; the grid is complete."
    cost = f"about {hours:.0f} core-hours at the wall-clock per cell recorded so far"
    if from_retired:
        cost += f" ({' and '.join(from_retired)} from retired cells)"
    if unknown:
        cost += f", plus {' and '.join(unknown)}, none of whose cells has finished"
    counts = ", ".join(f"{agent} {n}" for agent, n in left.items())
    return f"Remaining: {total} cell{'' if total == 1 else 's'} ({counts}); {cost}."


def stamp_count(page: str, cells: int) -> str:
    """The finished-cell count set to ``cells``, with the time it changed; an unchanged count keeps its old time,
    so a grid commit of another issue's cells does not touch this line."""
    match = re.search(r"(\d+) are finished \(as of [^)]*\)", page)
    if match is None or int(match.group(1)) == cells:
        return page
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return page[:match.start()] + f"{cells} are finished (as of {now})" + page[match.end():]


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run([sys.executable, "-m", "eval.cli", "bench", f"out={scratch}",
                        f"ledger={HERE / 'results.csv'}", "collect_only=true"], check=True, stdout=subprocess.DEVNULL)
        fresh = tables(Path(scratch, "results.md").read_text())
    page = (HERE / "results.md").read_text()
    old = tables(page)
    if len(old) != 2 or len(fresh) != 2:
        sys.exit(f"{HERE / 'results.md'}: expected 2 tables here and from the ledger, found {len(old)} and {len(fresh)}")
    for before, after in zip(old, fresh):
        page = page.replace(before, after)
    finished, retired = grid_rows(HERE / "results.csv"), grid_rows(HERE / "retired.csv")
    cells = len(finished)
    page = stamp_count(page, cells)
    page = re.sub(r"^Remaining: .*$", remaining(finished, retired), page, flags=re.M)
    write_text(HERE / "results.md", page)
    print(f"{HERE / 'results.md'}: tables from the ledger; {cells} of issue 3's cells finished")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
