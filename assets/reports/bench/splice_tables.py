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
    with open(HERE / "results.csv", newline="") as fh:     # issue 3's grid only (issue 4's NEUBAY rows share it)
        cells = sum(1 for row in csv.DictReader(fh) if row["agent"] in GRID_AGENTS and row["dataset"] in GRID_DATASETS
                    and int(row["steps"]) == 100_000)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = re.sub(r"\d+ are finished \(as of [^)]*\)", f"{cells} are finished (as of {now})", page)
    write_text(HERE / "results.md", page)
    print(f"{HERE / 'results.md'}: tables from the ledger; {cells} of issue 3's cells finished")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
