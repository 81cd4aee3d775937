"""The command line: help, config composition, and one-line errors for bad input."""

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest

from eval.cli import COMMANDS, main

from conftest import transitions


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_top_level_help_lists_every_command(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name, cmd in COMMANDS.items():
        assert f"  {name}" in out and cmd.summary in out


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_has_help_and_prints_its_config(capsys, name):
    code, out, _ = run(capsys, *name.split(), "--help")
    assert code == 0 and out.startswith("usage: ") and COMMANDS[name].summary in out
    code, out, _ = run(capsys, *name.split(), "--cfg", "job")
    assert code == 0 and out.strip()


def test_overrides_reach_the_composed_config(capsys):
    code, out, _ = run(capsys, "dataset", "make", "task=walker2d", "level=expert", "size=123", "--cfg", "job")
    assert code == 0
    assert "name: walker2d" in out and "level: expert" in out and "size: 123" in out


def write_hdf5(path, arrays):
    with h5py.File(path, "w") as f:
        for k, v in arrays.items():
            f[k] = v
    return path


def bad_inputs(tmp_path):
    good = transitions()
    cases = {}
    cases["missing path"] = ([str(tmp_path / "nope.hdf5")], "nope.hdf5: file not found")
    text = tmp_path / "text.hdf5"
    text.write_text("hello")
    cases["not hdf5"] = ([str(text)], "text.hdf5: not an HDF5 file")
    full = write_hdf5(tmp_path / "full.hdf5", {k: np.repeat(v, 400, axis=0) for k, v in good.items()})
    cut = tmp_path / "cut.hdf5"
    cut.write_bytes(full.read_bytes()[:3000])
    cases["truncated"] = ([str(cut)], "cut.hdf5")
    cases["missing key"] = ([str(write_hdf5(tmp_path / "nokey.hdf5", {k: v for k, v in good.items() if k != "rewards"}))],
                            "nokey.hdf5: field 'rewards': missing")
    cases["lengths"] = ([str(write_hdf5(tmp_path / "len.hdf5", {**good, "actions": good["actions"][:-2]}))],
                        "len.hdf5: field 'actions': expected shape (10, 2), got (8, 2)")
    nan = {**good, "rewards": good["rewards"].copy()}
    nan["rewards"][5] = np.nan
    cases["nan"] = ([str(write_hdf5(tmp_path / "nan.hdf5", nan))], "nan.hdf5: field 'rewards': expected finite values")
    cases["dtype"] = ([str(write_hdf5(tmp_path / "dtype.hdf5", {**good, "observations": np.zeros((10, 3), np.int64)}))],
                      "dtype.hdf5: field 'observations': expected a floating-point array")
    cases["unknown name"] = (["hopper-mediocre-v9"], "dataset 'hopper-mediocre-v9' not found")
    return cases


def test_bad_dataset_input_gets_one_line_and_exit_2(capsys, tmp_path):
    for label, (args, expected) in bad_inputs(tmp_path).items():
        code, out, err = run(capsys, "dataset", "info", *args)
        assert code == 2, label
        assert err.count("\n") == 1 and err.startswith("reverie: error: "), (label, err)
        assert expected in err, (label, err)
        assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("argv,expected", [
    (["dataset", "make", "task=cartpole"], "unknown task 'cartpole': expected one of ant, halfcheetah, hopper, metaworld-button-press-topdown"),
    (["dataset", "make", "level=mediocre", "size=10"], "unknown level 'mediocre'"),
    (["dataset", "make", "size=-1"], "option 'size'"),
    (["dataset", "convert", "x.hdf5", "out=y", "format=parquet"], "option 'format'"),
    (["dataset", "info"], "option 'source' is required"),
    (["datasets"], "unknown command 'datasets'"),
    (["dataset", "info", "a", "b"], "unexpected argument 'b'"),
])
def test_bad_options_get_one_line_and_exit_2(capsys, argv, expected):
    code, _, err = run(capsys, *argv)
    assert code == 2 and expected in err and err.count("\n") == 1


@pytest.mark.parametrize("value", ["many", "0", "1.5", "true"])
def test_a_bad_thread_count_is_refused_before_any_output(capsys, tmp_path, value):
    code, out, err = run(capsys, "fit", "dataset=hopper-medium-replay", f"threads={value}", f"run_dir={tmp_path / 'fit'}")
    assert code == 2 and "option 'threads': expected a positive whole number or auto" in err and err.count("\n") == 1
    assert not (tmp_path / "fit").exists()


def test_debug_shows_the_traceback(tmp_path):
    from envs.errors import DatasetError
    with pytest.raises(DatasetError):
        main(["dataset", "info", str(tmp_path / "nope.hdf5"), "--debug"])


def test_info_json_and_convert_round_trip(capsys, tmp_path):
    unfinished = write_hdf5(tmp_path / "hopper-open.hdf5", transitions(10, obs_dim=11, act_dim=3))
    code, out, _ = run(capsys, "dataset", "info", str(unfinished), "--json")
    info = json.loads(out)
    assert code == 0 and info["transitions"] == 10 and info["episodes"] == 2 and info["unfinished_episode"]
    assert info["task"] == "hopper" and info["return_mean"] == pytest.approx((6 + 22) / 2)
    assert info["normalized_score"] == pytest.approx(100 * (14 + 20.272305) / (3234.3 + 20.272305))

    # Every episode finished: the formats hold exactly the same data.
    src = write_hdf5(tmp_path / "hopper-tiny.hdf5", transitions(10, obs_dim=11, act_dim=3, ends=(3, 9)))
    code, out, _ = run(capsys, "dataset", "info", str(src), "--json")
    info = json.loads(out)
    for fmt, out_name in (("neorl", "t.npz"), ("minari", "t-minari"), ("d4rl", "t.hdf5")):
        code, _, err = run(capsys, "dataset", "convert", str(src), f"out={tmp_path / out_name}", f"format={fmt}")
        assert code == 0, err
        code, out, _ = run(capsys, "dataset", "info", str(tmp_path / out_name), "--json")
        assert json.loads(out)["return_mean"] == info["return_mean"], fmt
    code, _, err = run(capsys, "dataset", "convert", str(src), f"out={tmp_path / 't.hdf5'}")
    assert code == 2 and "output exists" in err


def test_unknown_task_info_has_null_score(capsys, tmp_path):
    src = write_hdf5(tmp_path / "mystery.hdf5", transitions())
    code, out, _ = run(capsys, "dataset", "info", str(src), "--json")
    assert code == 0 and json.loads(out)["normalized_score"] is None


def test_console_script_exit_code_and_stderr(tmp_path):
    exe = [sys.executable, "-m", "eval.cli"]
    ok = subprocess.run(exe + ["--help"], capture_output=True, text=True)
    assert ok.returncode == 0 and "dataset make" in ok.stdout
    bad = subprocess.run(exe + ["dataset", "info", str(tmp_path / "missing.hdf5")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().endswith("missing.hdf5: file not found")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_fit_writes_a_checkpoint_and_reports_members(capsys, tmp_path):
    from envs.d4rl_format import write_d4rl
    from envs.dataset import OfflineDataset
    from worldmodels.ensemble import GaussianEnsemble

    raw = transitions(600, obs_dim=11, act_dim=3, ends=(299, 599), terminal_at=())
    write_d4rl(OfflineDataset.from_arrays(raw), tmp_path / "hopper-small.hdf5")
    argv = ["fit", f"dataset={tmp_path / 'hopper-small.hdf5'}", "world_model.members=3", "world_model.elites=2",
            "world_model.hidden=[16,16]", "world_model.weight_decay=[0,0,0]", "world_model.max_epochs=3",
            f"run_dir={tmp_path / 'fit'}"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert out.count("  member ") == 3 and out.count("elite") == 2
    assert "epoch 1 of at most 3: mean holdout MSE" in out
    assert not (tmp_path / "fit" / "fit-checkpoint.pt").exists()     # only a fit cut short leaves one
    model = GaussianEnsemble.load(tmp_path / "fit" / "world_model.pt")
    assert model.spec.obs_dim == 11 and model.spec.task == "hopper"
    code, _, err = run(capsys, *argv[:-1], "world_model.elites=5", f"run_dir={tmp_path / 'fit2'}")
    assert code == 2 and "elites <= members" in err
    assert not (tmp_path / "fit2").exists()      # a refused run leaves no run directory
