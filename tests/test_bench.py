"""``reverie bench``: a Hydra multirun over agents x datasets x seeds that resumes cell by cell."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval.bench import cell_lock
from eval.cli import main
from tests.test_train import FAST, small_dataset


@pytest.mark.slow
def test_bench_runs_cells_writes_tables_and_skips_finished_cells(capsys, tmp_path):
    data = small_dataset(tmp_path / "hopper-tiny.hdf5")
    train = ",".join(f"'{o}'" for o in FAST[1:] + ["agent.hidden=[32,32]"] if not o.startswith("agent.hidden"))
    argv = ["bench", "agents=[td3bc,mopo,neubay]", "agent_overrides.neubay=['agent.rollout_length=40','agent.window=8']",
            f"datasets=['{data}']", "seeds=[0,1]", "size=null", "steps=30",
            f"out={tmp_path / 'grid'}", f"train_overrides=[{train}]"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "6 finished cells" in out
    rows = list(csv.DictReader(open(tmp_path / "grid" / "results.csv")))
    assert sorted((r["agent"], r["seed"]) for r in rows) == [("mopo", "0"), ("mopo", "1"), ("neubay", "0"),
                                                              ("neubay", "1"), ("td3bc", "0"), ("td3bc", "1")]
    assert all(r["steps"] == "30" and r["dataset"] == "hopper-tiny" for r in rows)
    table = (tmp_path / "grid" / "results.md").read_text()
    assert "| hopper-tiny |" in table and "(2)" in table and "Budget: 30 gradient updates" in table
    assert table.rstrip().endswith("## Cells started but unfinished\n\nnone")
    # every cell is finished: a second run trains nothing and rebuilds the same rows
    stamp = (tmp_path / "grid" / "cells" / "mopo" / "hopper-tiny" / "seed0" / "result.json").stat().st_mtime
    assert main(argv) == 0
    assert (tmp_path / "grid" / "cells" / "mopo" / "hopper-tiny" / "seed0" / "result.json").stat().st_mtime == stamp
    assert len(list(csv.DictReader(open(tmp_path / "grid" / "results.csv")))) == 6


def test_a_cell_runs_in_one_grid_at_a_time(tmp_path):
    cell = tmp_path / "cells" / "mopo" / "hopper-medium" / "seed0"
    with cell_lock(cell) as first:
        with cell_lock(cell) as second:
            assert first and not second
    with cell_lock(cell) as again:
        assert again


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_killing_a_grid_ends_its_cells_too(tmp_path):
    # a parent that runs a child the way bench runs its multirun and the multirun its cells
    pid_file = tmp_path / "grandchild.pid"
    child = (f"import os, time; from eval import children; "
             f"children.call([{sys.executable!r}, '-c', "
             f"\"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)\"])")
    top = f"from eval import children; children.call([{sys.executable!r}, '-c', {child!r}])"
    parent = subprocess.Popen([sys.executable, "-c", top], cwd=Path(__file__).resolve().parents[1])
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    grandchild = int(pid_file.read_text())
    parent.terminate()                  # SIGTERM to the top only, as `kill PID` does
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(grandchild, signal.SIGKILL)
        pytest.fail("the grandchild outlived the killed grid")
