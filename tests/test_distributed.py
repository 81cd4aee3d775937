"""Ray: ``reverie bench launcher=ray`` behaves as the joblib grid does, and ``reverie evaluate
parallel=ray`` returns exactly the serial run's results. Every test gives Ray its own home folder
(its auth token) and session folder, and checks that nothing of Ray is left running or on disk."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("ray")

from eval.cli import main  # noqa: E402
from tests.test_train import FAST, small_dataset  # noqa: E402

RESULT_COLUMNS = ("agent", "dataset", "seed", "steps", "normalized_score", "normalized_std", "return_mean")


def ray_processes(marker: str) -> list[str]:
    """Command lines of running processes that mention ``marker`` (Ray's session folder)."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


@pytest.fixture
def ray_home(monkeypatch, tmp_path):
    """A short session folder in /tmp (Ray's socket paths have a length limit) and a home folder for
    Ray's auth token, both removed afterwards; fails if Ray left a process behind."""
    temp = Path(tempfile.mkdtemp(prefix="rv-ray-", dir="/tmp"))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RAY_TMPDIR", str(temp))
    yield temp, home
    left = ray_processes(str(temp))
    shutil.rmtree(temp, ignore_errors=True)
    assert not left, f"Ray processes left running: {left}"
    assert not temp.exists()


def rows(path: Path) -> list[tuple]:
    return sorted(tuple(r[c] for c in RESULT_COLUMNS) for r in csv.DictReader(open(path)))


@pytest.mark.slow
def test_a_grid_on_a_local_ray_gives_the_joblib_grids_table_and_resumes(tmp_path, ray_home):
    temp, home = ray_home
    data = small_dataset(tmp_path / "hopper-tiny.hdf5")
    train = ",".join(f"'{o}'" for o in FAST[1:] + ["agent.hidden=[32,32]"] if not o.startswith("agent.hidden"))
    grid = ["bench", "agents=[td3bc,mopo]", f"datasets=['{data}']", "seeds=[0,1]", "size=null", "steps=30",
            f"train_overrides=[{train}]"]
    assert main([*grid, f"out={tmp_path / 'joblib'}"]) == 0
    # the Ray grid runs in a child process, as a user's would: the CLI starts Ray, runs 4 cells, stops it
    ray_grid = [*grid, f"out={tmp_path / 'ray'}", "launcher=ray", "ray.num_cpus=2", f"ray.temp_dir={temp}"]
    proc = subprocess.run([sys.executable, "-m", "eval.cli", *ray_grid], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "4 finished cells" in proc.stdout and "Ray Launcher is launching 4 jobs" in proc.stderr + proc.stdout
    assert rows(tmp_path / "ray" / "results.csv") == rows(tmp_path / "joblib" / "results.csv")
    table = (tmp_path / "ray" / "results.md").read_text()
    assert "| hopper-tiny |" in table and "(2)" in table and table.rstrip().endswith("none")
    assert (home / ".ray" / "auth_token").is_file()          # Ray's token went to the given home
    assert any(temp.glob("session_*")), "Ray did not use the given session folder"
    assert not ray_processes(str(temp)), "the grid's local Ray was not shut down"
    # finished cells are skipped: a second Ray run trains nothing
    result = tmp_path / "ray" / "cells" / "mopo" / "hopper-tiny" / "seed1" / "result.json"
    stamp = result.stat().st_mtime
    proc = subprocess.run([sys.executable, "-m", "eval.cli", *ray_grid], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert result.stat().st_mtime == stamp


def test_evaluation_on_ray_matches_the_serial_run_exactly(tmp_path, ray_home):
    temp, _ = ray_home
    data = small_dataset(tmp_path / "hopper-tiny.hdf5", n=2000)
    fit = ["world_model.members=3", "world_model.elites=2", "world_model.hidden=[32,32]",
           "world_model.weight_decay=[0,0,0]", "world_model.max_epochs=2"]
    assert main(["fit", f"dataset={data}", *fit, f"run_dir={tmp_path / 'fit'}"]) == 0
    common = ["evaluate", f"dataset={data}", f"world_model.checkpoint={tmp_path / 'fit' / 'world_model.pt'}",
              "policies=[zoo]", "rows=6", "horizon=40", "open_loop_rows=8", "open_loop_horizon=8",
              "bootstrap=50", "threads=2"]
    assert main([*common, f"run_dir={tmp_path / 'serial'}"]) == 0
    assert main([*common, "parallel=ray", "ray.num_cpus=2", f"ray.temp_dir={temp}",
                 f"run_dir={tmp_path / 'ray'}"]) == 0
    assert any(temp.glob("session_*")), "the evaluation did not start its local Ray"
    serial, on_ray = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("serial", "ray"))
    timing = ("simulator_seconds", "model_seconds", "imagined_transitions_per_second")
    strip = [{k: v for k, v in p.items() if k not in timing} for p in serial["policies"]]
    assert len(strip) == 12 and len({p["real_return"] for p in strip}) > 1     # the zoo, of different quality
    assert [{k: v for k, v in p.items() if k not in timing} for p in on_ray["policies"]] == strip
    assert on_ray["ranking"] == serial["ranking"] and on_ray["closed_loop"] == serial["closed_loop"]


def test_ray_options_are_checked(capsys, tmp_path):
    code = main(["evaluate", "parallel=threads", f"run_dir={tmp_path / 'x'}"])
    assert code == 2 and "option 'parallel': expected 'serial' or 'ray'" in capsys.readouterr().err
    code = main(["evaluate", "parallel=ray", "ray.num_cpus=-1", f"run_dir={tmp_path / 'x'}"])
    assert code == 2 and "ray.num_cpus: expected a non-negative integer" in capsys.readouterr().err
    code = main(["bench", "launcher=pbs", f"out={tmp_path / 'g'}"])
    assert code == 2 and "option 'launcher': expected one of joblib, ray, slurm, got 'pbs'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "g").exists()


def test_the_slurm_launcher_is_config_only(tmp_path):
    """``launcher=slurm`` hands the grid to Hydra's submitit launcher with our shipped settings and
    the user's ``hydra_overrides``; the composed launcher is submitit's SLURM one (nothing submitted)."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    from omegaconf import OmegaConf

    from eval.bench import multirun_command

    cfg = OmegaConf.load(Path(__file__).resolve().parents[1] / "configs" / "bench.yaml")
    cfg.launcher, cfg.out = "slurm", str(tmp_path / "grid")
    cfg.hydra_overrides = ["hydra.launcher.partition=cpu"]
    cmd = multirun_command(cfg, ["launcher=slurm", "hydra_overrides=[hydra.launcher.partition=cpu]"],
                           [("mopo", "hopper-medium", 0)])
    assert "hydra/launcher=slurm" in cmd and "hydra.launcher.partition=cpu" in cmd
    # compose it (one job's view, --cfg hydra prints instead of submitting)
    single = [a for a in cmd if a not in ("--multirun",) and not a.startswith("cell=")]
    shown = subprocess.run([*single, "cell={agent:mopo,dataset:'hopper-medium',seed:0}", "--cfg", "hydra"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr[-2000:]
    launcher = OmegaConf.create(shown.stdout).hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher") and launcher.partition == "cpu"
    assert launcher.cpus_per_task == 1 and launcher.timeout_min == 360
