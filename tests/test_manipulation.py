"""MetaWorld manipulation tasks from pixels and language: the environment, the experts, the dataset file."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from envs.errors import ReverieError
from envs.manipulation import (LEVELS, MISDIRECT_OFFSET, TASKS, ManipulationEnv, check_instruction, get_manipulation_task,
                               instruction)
from envs.manipulation_data import (Episode, collect_episodes, manipulation_info, read_manipulation,
                                    write_manipulation)
from eval.cli import main


def test_eight_tasks_with_train_and_held_out_instructions():
    assert len(TASKS) >= 6
    rng = np.random.default_rng(0)
    for t in TASKS.values():
        assert len(t.instructions) >= 3 and len(t.held_out) >= 1
        assert not set(t.instructions) & set(t.held_out)
        assert instruction(t, rng) in t.instructions and instruction(t, rng, "test") in t.held_out
    with pytest.raises(ReverieError, match="unknown manipulation task 'metaworld-juggle'"):
        get_manipulation_task("metaworld-juggle")
    with pytest.raises(ReverieError, match="instruction 'dance': not a template of metaworld-reach"):
        check_instruction(TASKS["metaworld-reach"], "dance")


def test_frames_proprioception_and_an_upright_camera():
    env = ManipulationEnv("metaworld-push", image_size=48)
    obs = env.reset(seed=3)
    assert obs["image"].shape == (48, 48, 3) and obs["image"].dtype == np.uint8
    assert obs["state"].shape == (4,) and obs["state"].dtype == np.float32
    assert obs["image"].std() > 10                                 # a scene, not a blank frame
    # upright: the plain backdrop wall fills the top right corner; the table's edge the bottom right one
    assert obs["image"][:6, -12:].std() < 5 < obs["image"][-6:, -12:].std()
    again = env.reset(seed=3)
    assert np.array_equal(again["image"], obs["image"])            # a seed fixes the scene ...
    other = ManipulationEnv("metaworld-push", image_size=48)
    assert np.array_equal(other.reset(seed=3)["image"], obs["image"])   # ... in another instance too
    objects = []
    for s in (3, 4, 53):
        other.reset(seed=s)
        objects.append(tuple(np.round(other.full_state[4:7], 4)))          # the object's placement
    assert len(set(objects)) == 3                                  # and every seed is its own scene
    with pytest.raises(ReverieError, match="seed: expected a reset seed >= 0"):
        other.reset(seed=-1)
    other.close()
    obs2, reward, terminated, truncated, info = env.step(np.array([1.0, 0.0, 0.0, 0.0]))
    assert not np.array_equal(obs2["state"], obs["state"]) and isinstance(info["success"], bool)
    with pytest.raises(ValueError, match=r"action: expected shape \(4,\)"):
        env.step(np.zeros(3))
    env.close()


def test_the_scripted_expert_succeeds_and_noise_grades_quality():
    expert = collect_episodes("metaworld-reach", "expert", 2, seed=0, image_size=32)
    assert all(e.success.any() for e in expert) and all(len(e) < 150 for e in expert)
    rand = collect_episodes("metaworld-reach", "random", 2, seed=0, image_size=32)
    assert not any(e.success.any() for e in rand) and all(len(e) == 150 for e in rand)
    assert set(LEVELS) == {"expert", "medium", "poor", "misdirected", "random"}
    with pytest.raises(ReverieError, match="unknown level 'great'"):
        collect_episodes("metaworld-reach", "great", 1)


def test_misdirected_episodes_replay_another_scenes_expert_and_miss():
    from envs.manipulation_data import _expert_actions

    eps = collect_episodes("metaworld-push", "misdirected", 3, seed=0, image_size=32)
    env = ManipulationEnv("metaworld-push", image_size=32)
    for e in eps:
        np.testing.assert_array_equal(e.actions, _expert_actions(env, e.seed + MISDIRECT_OFFSET)[:len(e)])
        assert np.abs(e.states[-1, :3] - e.states[0, :3]).max() > 0.05          # the arm moved with purpose
    assert sum(e.success.any() for e in eps) <= 1                               # and mostly missed
    env.close()


def test_dataset_make_and_info_on_the_command_line(capsys, tmp_path):
    argv = ["dataset", "make", "task=metaworld-drawer-close", "level=expert", "episodes=2", "image_size=32",
            f"cache_dir={tmp_path}", f"run_dir={tmp_path / 'run'}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    path = next((tmp_path / "datasets").glob("metaworld-drawer-close-expert-2ep-32px-corner-seed0.hdf5"))
    assert "made metaworld-drawer-close-expert" in out
    with h5py.File(path) as f:
        assert f.attrs["format"] == "reverie.manipulation/1" and f.attrs["episodes"] == 2
        img = f["episode_0/observations/image"]
        assert img.dtype == np.uint8 and img.compression == "gzip" and img.shape[1:] == (32, 32, 3)
        assert len(f["episode_0/actions"]) + 1 == len(img) and f["episode_0/truncations"][-1]
    assert main(["dataset", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "success      100% of episodes" in out and "32x32 RGB" in out
    assert main(["dataset", "make", *argv[2:]]) == 0 and capsys.readouterr().out.startswith("reused")


def test_damaged_files_are_refused_naming_the_field(tmp_path):
    e = Episode(np.zeros((4, 8, 8, 3), np.uint8), np.zeros((4, 4), np.float32), np.zeros((3, 4), np.float32),
                np.zeros(3, np.float32), np.zeros(3, bool), "reach the red target", 0)
    attrs = {"task": "metaworld-reach", "image_size": 8, "level": "expert", "camera": "corner"}
    good = tmp_path / "good.hdf5"
    write_manipulation(good, [e], attrs)
    assert manipulation_info(read_manipulation(good))["steps"] == 3
    bad = tmp_path / "bad.hdf5"
    write_manipulation(bad, [Episode(e.images[:, :4], *list(vars(e).values())[1:])], attrs)
    with pytest.raises(ReverieError, match=r"field 'episode_0/observations/image': expected uint8 \[4, 8, 8, 3\]"):
        read_manipulation(bad)
    with h5py.File(good, "a") as f:
        del f["episode_0/actions"]
    with pytest.raises(ReverieError, match="field 'episode_0/actions' missing"):
        read_manipulation(good)
    (tmp_path / "junk.hdf5").write_text("junk")
    with pytest.raises(ReverieError, match="not a readable HDF5 file"):
        read_manipulation(tmp_path / "junk.hdf5")


def test_episodes_keep_the_objects_positions_and_a_stale_cache_file_is_made_again(tmp_path):
    from envs.manipulation import OBJECT_DIM, SCENE_RULES
    from envs.manipulation_data import make_manipulation

    eps = collect_episodes("metaworld-push", "expert", 1, seed=0, image_size=32)
    e = eps[0]
    assert e.objects.shape == (len(e) + 1, OBJECT_DIM) and e.objects.dtype == np.float32
    assert np.linalg.norm(e.objects[-1, :3] - e.objects[-1, 3:]) < 0.05        # the expert pushed the puck home
    assert np.linalg.norm(e.objects[0, :3] - e.objects[0, 3:]) > 0.05          # from away from the goal
    np.testing.assert_array_equal(e.objects[:, 3:], np.broadcast_to(e.objects[0, 3:], e.objects[:, 3:].shape))

    path, attrs, cached = make_manipulation("metaworld-push", "expert", 1, 0, tmp_path, image_size=32)
    assert not cached and attrs["scene_rules"] == SCENE_RULES
    np.testing.assert_array_equal(read_manipulation(path).episodes[0].objects, e.objects)
    assert make_manipulation("metaworld-push", "expert", 1, 0, tmp_path, image_size=32)[2]     # reused
    with h5py.File(path, "a") as f:             # a file from before the objects, under older scene rules
        del f["episode_0/privileged"]
        f.attrs["scene_rules"] = SCENE_RULES - 1
    assert read_manipulation(path).episodes[0].objects is None                  # still readable
    path, attrs, cached = make_manipulation("metaworld-push", "expert", 1, 0, tmp_path, image_size=32)
    assert not cached and read_manipulation(path).episodes[0].objects is not None
    with h5py.File(path, "a") as f:             # current rules, but one episode without its positions
        del f["episode_0/privileged"]
    assert not make_manipulation("metaworld-push", "expert", 1, 0, tmp_path, image_size=32)[2]
    path.write_bytes(b"not hdf5")               # a damaged cache file is made again, not fatal
    path, attrs, cached = make_manipulation("metaworld-push", "expert", 1, 0, tmp_path, image_size=32)
    assert not cached and read_manipulation(path).has_objects
