"""``reverie bench``: a Hydra multirun over agents x datasets x seeds that resumes cell by cell."""

from __future__ import annotations

import csv
import json
import os
import shutil
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
            f"out={tmp_path / 'grid'}", f"ledger={tmp_path / 'ledger.csv'}", f"train_overrides=[{train}]"]
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
    # the grid folder lost (a new machine): the ledger still knows every cell, and nothing trains again
    shutil.rmtree(tmp_path / "grid")
    assert main(argv) == 0
    assert not (tmp_path / "grid" / "cells").exists()
    assert len(list(csv.DictReader(open(tmp_path / "grid" / "results.csv")))) == 6


def test_a_cells_threads_come_from_threads_else_the_launcher(capsys, tmp_path):
    from omegaconf import OmegaConf

    from eval.bench import cell_args

    cfg = OmegaConf.load(Path(__file__).resolve().parents[1] / "configs" / "bench.yaml")

    def threads(**over) -> list[str]:
        c = OmegaConf.merge(cfg, over)
        return [a for a in cell_args(c, "neubay", "hopper-random", 0, tmp_path) if a.startswith("threads=")]

    assert threads() == ["threads=1"]                                     # joblib: one per cell
    assert threads(launcher="ray", ray={"cpus_per_task": 3}) == ["threads=3"]
    assert threads(threads=2) == ["threads=2"]                            # one long cell on two cores
    assert threads(launcher="ray", ray={"cpus_per_task": 3}, threads=2) == ["threads=2"]
    # refused before any cell starts, the option named
    assert main(["bench", "threads=0", f"out={tmp_path / 'g'}"]) != 0
    assert "option 'threads': expected a positive whole number or null, got 0" in capsys.readouterr().err
    assert not (tmp_path / "g").exists()


def grid_config(**over):
    from omegaconf import OmegaConf

    return OmegaConf.merge(OmegaConf.load(Path(__file__).resolve().parents[1] / "configs" / "bench.yaml"), over)


def test_joblib_hands_out_one_cell_at_a_time():
    """Finished (skipped) cells are quick, and joblib's auto batching, after jobs quicker than 0.2 s, would give one
    worker several long cells in a batch while the other idles; the grid's multirun asks for batches of one."""
    from eval.bench import multirun_command

    argv = multirun_command(grid_config(jobs=2), [], [("mopo", "hopper-medium", 0)])
    assert "hydra/launcher=joblib" in argv and "hydra.launcher.n_jobs=2" in argv
    assert "hydra.launcher.batch_size=1" in argv


def test_a_grid_resumes_the_cells_it_began_first_then_goes_seed_by_seed(tmp_path):
    """A grid spanning sessions finishes what it started (the furthest along first) before it starts more;
    finished cells, in ``out`` or in the ledger, are not dispatched at all; the multirun runs exactly these
    cells in this order, a dataset given as a path (quotes and all) reaching its cell as it was written."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from eval.bench import cell_dir, multirun_command, record, run_order

    odd = str(tmp_path / "it's a dir" / "hopper-x.hdf5")
    cfg = grid_config(agents=["mopo", "mobile"], datasets=["hopper-random", odd], seeds=[0, 1, 2],
                      out=str(tmp_path / "grid"), ledger=str(tmp_path / "ledger.csv"), steps=30, size=None)
    out = tmp_path / "grid"
    record(tmp_path / "ledger.csv", {"agent": "mopo", "dataset": "hopper-random", "seed": 0, "steps": 30,
                                     "normalized_score": 1.0})
    finished = cell_dir(out, "mobile", "hopper-random", 0)
    finished.mkdir(parents=True)
    (finished / "result.json").write_text("{}")
    for (agent, dataset, seed), step in {("mobile", odd, 2): 5000, ("mopo", "hopper-random", 1): 15000,
                                         ("mopo", odd, 2): None}.items():       # None: still fitting its model
        cell = cell_dir(out, agent, dataset, seed)
        cell.mkdir(parents=True)
        if step is not None:
            (cell / "progress.json").write_text(json.dumps({"step": step, "steps": 30}))

    begun, fresh = run_order(cfg)
    assert begun == [("mopo", "hopper-random", 1), ("mobile", odd, 2), ("mopo", odd, 2)]
    assert fresh == [("mopo", odd, 0), ("mobile", odd, 0), ("mobile", "hopper-random", 1), ("mopo", odd, 1),
                     ("mobile", odd, 1), ("mopo", "hopper-random", 2), ("mobile", "hopper-random", 2)]
    order = begun + fresh
    sweep = next(a for a in multirun_command(cfg, [], order) if a.startswith("cell="))
    parser = OverridesParser.create()           # as Hydra's sweeper does: one override a job, each parsed again
    jobs = [parser.parse_override(f"cell={v}").value() for v in parser.parse_override(sweep).sweep_string_iterator()]
    assert [(j["agent"], j["dataset"], j["seed"]) for j in jobs] == order


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


def test_a_ledger_keeps_finished_cells_when_the_grid_folder_is_lost(tmp_path):
    from omegaconf import OmegaConf

    from envs.errors import ReverieError
    from eval.bench import cells_left, collect, read_ledger, record, unfinished

    data = small_dataset(tmp_path / "hopper-tiny.hdf5", n=600)
    ledger = tmp_path / "ledger.csv"

    def result(agent, seed, score, steps=30):
        return {"agent": agent, "dataset": "hopper-tiny", "source": str(data), "dataset_size": None, "seed": seed,
                "steps": steps, "normalized_score": score, "train_seconds": 60.0, "updates_per_second": 0.5,
                "behaviour_score": 3.4, "command": f"reverie train agent={agent}"}

    record(ledger, result("mopo", 0, 10.0))
    record(ledger, {**result("mopo", 0, 12.0), "behaviour_score": None})  # the same cell again replaces its
    # row, but not a field the ledger holds and the new row leaves blank
    record(ledger, result("td3bc", 0, 5.0, steps=99))  # another budget: not a cell of this grid
    assert [(r["agent"], r["normalized_score"], r["behaviour_score"]) for r in read_ledger(ledger)] == [
        ("mopo", "12.0", "3.4"), ("td3bc", "5.0", "3.4")]

    cfg = OmegaConf.load(Path(__file__).resolve().parents[1] / "configs" / "bench.yaml")
    cfg.merge_with({"agents": ["mopo", "td3bc"], "datasets": [str(data)], "seeds": [0, 1], "size": None,
                    "steps": 30, "out": str(tmp_path / "grid"), "ledger": str(ledger)})
    left = sorted(str(p.relative_to(tmp_path / "grid")) for p in unfinished(cfg))
    assert left == ["cells/mopo/hopper-tiny/seed1", "cells/td3bc/hopper-tiny/seed0", "cells/td3bc/hopper-tiny/seed1"]
    # what is left, timed by each agent's finished cells of this budget (td3bc's only row is of another)
    running = tmp_path / "grid" / "cells" / "mopo" / "hopper-tiny" / "seed1"
    running.mkdir(parents=True)
    (running / "progress.json").write_text(json.dumps({"step": 12, "steps": 30}))
    mopo_hour = {**result("mopo", 0, 12.0), "train_seconds": 3600.0}
    assert cells_left(cfg, unfinished(cfg), [mopo_hour, result("td3bc", 0, 5.0, steps=99)]) == (
        "3 cells left: mopo 1, td3bc 2; about 0.6 core-hours of training at the finished cells' mean wall-clock "
        "per agent (world-model fits not counted); no finished cell to time td3bc by")
    assert cells_left(cfg, sorted(unfinished(cfg))[:1], [mopo_hour]).startswith(
        "1 cell left: mopo 1; about 0.6 core-hours")
    assert cells_left(cfg, sorted(unfinished(cfg))[1:], [mopo_hour]) == (   # no hours where nothing can be timed
        "2 cells left: td3bc 2; no finished cell to time td3bc by")
    shutil.rmtree(running)

    # a cell finished in the grid folder joins the ledger; the tables read both, this budget only
    done = tmp_path / "grid" / "cells" / "td3bc" / "hopper-tiny" / "seed1"
    done.mkdir(parents=True)
    (done / "result.json").write_text(json.dumps(result("td3bc", 1, 20.0)))
    _, md, n = collect(tmp_path / "grid", None, 30, "reverie bench", ledger)
    assert n == 2
    assert len(read_ledger(ledger)) == 3
    table = md.read_text()
    assert "| hopper-tiny | 3.4 |" in table and "12.0 (1)" in table and "20.0 (1)" in table
    assert "5.0" not in table.split("## Cells")[0].split("| hopper-tiny |")[1]
    record(ledger, result("mopo", 1, 14.0))                 # two seeds: their mean and spread
    assert "13.0 ± 1.0 (2)" in collect(tmp_path / "grid", None, 30, "reverie bench", ledger)[1].read_text()

    # a column this version does not know (a newer writer's) survives a record
    text = ledger.read_text().splitlines()
    ledger.write_text("\n".join([text[0] + ",gpu"] + [line + ",h200" for line in text[1:]]) + "\n")
    record(ledger, result("iql", 0, 7.0))
    assert {r["agent"]: r["gpu"] for r in read_ledger(ledger)} == {"mopo": "h200", "td3bc": "h200", "iql": ""}

    ledger.write_text("name,score\nx,1\n")
    with pytest.raises(ReverieError, match=r"ledger.csv: not a bench ledger"):
        unfinished(cfg)
