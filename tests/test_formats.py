"""Loaders for D4RL HDF5, Minari and NeoRL: lossless round trips, real layouts, refusals."""

import h5py
import numpy as np
import pytest
import torch

from agents.networks import TanhActor
from envs.builtin import collect
from envs.d4rl_format import read_d4rl, write_d4rl
from envs.errors import DatasetError, ReverieError
from envs.minari_format import read_minari, write_minari
from envs.neorl_format import read_neorl, write_neorl
from envs.sources import load_source
from envs.tasks import get_task


@pytest.fixture(scope="module")
def hopper_data():
    task = get_task("hopper")
    torch.manual_seed(0)
    return collect(task, TanhActor(task.obs_dim, task.act_dim, (32, 32)), 1500, 0.5, seed=3, num_envs=4)


def assert_same(a, b, fields=None):
    for k in fields or a.arrays():
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype == y.dtype and np.array_equal(x, y), k


def test_d4rl_round_trip_is_lossless(hopper_data, tmp_path):
    path = write_d4rl(hopper_data, tmp_path / "h.hdf5")
    back = read_d4rl(path)
    assert_same(hopper_data, back)
    assert back.task == "hopper" and back.has_states
    with h5py.File(path) as f:  # D4RL's own layout
        assert {"observations", "actions", "rewards", "next_observations", "terminals", "timeouts"} <= set(f)
        assert f["infos/qpos"].shape == (len(hopper_data), 6)


def test_minari_round_trip_with_and_without_the_package(hopper_data, tmp_path):
    folder = write_minari(hopper_data, tmp_path / "hopper-test")
    for use_package in (True, False):
        back = read_minari(folder, use_package=use_package)
        assert_same(hopper_data, back)
        assert back.task == "hopper"
    import minari
    ds = minari.MinariDataset(folder / "data")   # Minari itself opens what we wrote
    assert ds.total_steps == len(hopper_data)
    assert ds.total_episodes == len(hopper_data.episode_ends())


def test_neorl_round_trip(hopper_data, tmp_path):
    back = read_neorl(write_neorl(hopper_data, tmp_path / "hopper-low.npz"))
    assert_same(hopper_data, back, ["observations", "actions", "rewards", "next_observations",
                                    "terminals", "timeouts"])


def test_neorl_layout_read_from_raw_arrays(tmp_path):
    n = 6
    obs = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    np.savez(tmp_path / "Walker2d-v3-low.npz", obs=obs, next_obs=obs + 1, action=np.zeros((n, 1), np.float32),
             reward=np.ones((n, 1), np.float32), done=np.array([[0], [0], [1], [0], [0], [0]], np.float32),
             index=np.array([0, 3]))
    ds = read_neorl(tmp_path / "Walker2d-v3-low.npz")
    assert ds.task == "walker2d"
    assert ds.terminals.tolist() == [False, False, True, False, False, False]
    assert ds.timeouts.tolist() == [False, False, False, False, False, True]   # cut by the time limit


def test_d4rl_uses_stored_next_observations_never_a_shift(tmp_path):
    obs = np.arange(12, dtype=np.float32).reshape(6, 2)
    nxt = obs + 100.0    # not obs shifted by one
    with h5py.File(tmp_path / "x.hdf5", "w") as f:
        for k, v in dict(observations=obs, next_observations=nxt, actions=np.zeros((6, 1), np.float32),
                         rewards=np.ones(6, np.float32), terminals=np.zeros(6, bool),
                         timeouts=np.array([0, 0, 1, 0, 0, 1], bool)).items():
            f[k] = v
    ds = read_d4rl(tmp_path / "x.hdf5")
    assert np.array_equal(ds.next_observations, nxt)
    assert ds.timeouts.sum() == 2 and ds.terminals.sum() == 0


def test_d4rl_without_next_observations_is_refused(tmp_path):
    with h5py.File(tmp_path / "old.hdf5", "w") as f:
        f["observations"] = np.zeros((3, 2), np.float32)
        f["actions"] = np.zeros((3, 1), np.float32)
        f["rewards"] = np.zeros(3, np.float32)
        f["terminals"] = np.zeros(3, bool)
        f["timeouts"] = np.zeros(3, bool)
    with pytest.raises(DatasetError, match="field 'next_observations': missing"):
        read_d4rl(tmp_path / "old.hdf5")


def test_truncated_and_foreign_files_are_refused(hopper_data, tmp_path):
    path = write_d4rl(hopper_data, tmp_path / "full.hdf5")
    data = path.read_bytes()
    cut = tmp_path / "cut.hdf5"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match="cut.hdf5: .*(truncated or corrupt)"):
        read_d4rl(cut)
    text = tmp_path / "notes.hdf5"
    text.write_text("this is not HDF5")
    with pytest.raises(DatasetError, match="not an HDF5 file"):
        read_d4rl(text)
    with pytest.raises(DatasetError, match="not a readable .npz"):
        read_neorl(text.rename(tmp_path / "notes.npz"))


def test_sources_resolve_d4rl_cache_names_and_minari_ids(hopper_data, tmp_path):
    d4rl_dir = tmp_path / "d4rl"     # conftest points D4RL_DATASET_DIR here
    write_d4rl(hopper_data, d4rl_dir / "hopper_medium_replay-v2.hdf5")
    assert len(load_source("hopper-medium-replay-v2")) == len(hopper_data)
    write_minari(hopper_data, tmp_path / "minari" / "mujoco" / "hopper" / "medium-v0",
                 dataset_id="mujoco/hopper/medium-v0")
    assert load_source("mujoco/hopper/medium-v0").task == "hopper"
    with pytest.raises(ReverieError, match="dataset 'walker2d-weird-v2' not found"):
        load_source("walker2d-weird-v2")
    with pytest.raises(DatasetError, match="file not found"):
        load_source(str(tmp_path / "absent.hdf5"))


def test_minari_layout_missing_field_and_bad_neorl_flags_are_refused(hopper_data, tmp_path):
    folder = write_minari(hopper_data, tmp_path / "m")
    with h5py.File(folder / "data" / "main_data.hdf5", "a") as f:
        del f["episode_1/rewards"]
    with pytest.raises(DatasetError, match="field 'rewards': missing in episode_1"):
        read_minari(folder, use_package=False)
    n = 4
    np.savez(tmp_path / "bad.npz", obs=np.zeros((n, 2), np.float32), next_obs=np.zeros((n, 2), np.float32),
             action=np.zeros((n, 1), np.float32), reward=np.zeros(n, np.float32), done=np.full(n, 0.5),
             index=np.array([0]))
    with pytest.raises(DatasetError, match="bad.npz: field 'done': expected 0/1"):
        read_neorl(tmp_path / "bad.npz")
