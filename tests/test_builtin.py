"""Built-in datasets from a zoo: deterministic, cached with a manifest, atomic."""

import json

import numpy as np
import pytest

from envs.builtin import make_builtin, parse_builtin_name, recipe
from envs.d4rl_format import read_d4rl
from envs.errors import ReverieError
from envs.policies import load_zoo


def test_make_is_deterministic_cached_and_described(tiny_zoo, tmp_path):
    cache = tmp_path / "c"
    path, manifest, reused = make_builtin("hopper", "medium", size=700, seed=3, num_envs=4, cache_root=cache, zoo_root=tiny_zoo)
    ds = read_d4rl(path)
    assert not reused and len(ds) == 700 and ds.has_states and ds.task == "hopper"
    assert ds.terminals[-1] or ds.timeouts[-1]          # the cut episode ends in a timeout
    for key in ("sha256", "task", "level", "policies", "seed", "reverie", "mujoco", "size"):
        assert key in manifest
    assert manifest["policies"][0]["name"] == "step_0000001"   # the zoo's "medium" role
    assert json.loads(path.with_suffix(".json").read_text()) == manifest

    again = make_builtin("hopper", "medium", size=700, seed=3, num_envs=4, cache_root=cache, zoo_root=tiny_zoo)
    assert again.reused and again.manifest == manifest and again.path == path

    _, remade, _ = make_builtin("hopper", "medium", size=700, seed=3, num_envs=4, cache_root=tmp_path / "c2",
                                 zoo_root=tiny_zoo)
    assert remade["sha256"] == manifest["sha256"]       # same seed, same bytes
    _, other, _ = make_builtin("hopper", "medium", size=700, seed=4, num_envs=4, cache_root=cache, zoo_root=tiny_zoo)
    assert other["sha256"] != manifest["sha256"]


def test_worker_count_does_not_change_the_data(tiny_zoo, tmp_path):
    one = make_builtin("hopper", "medium-replay", size=700, seed=1, num_envs=2, cache_root=tmp_path / "a",
                       zoo_root=tiny_zoo, chunk=300)
    two = make_builtin("hopper", "medium-replay", size=700, seed=1, num_envs=2, cache_root=tmp_path / "b",
                       zoo_root=tiny_zoo, chunk=300, workers=2)
    assert one.manifest["sha256"] == two.manifest["sha256"]
    ds = read_d4rl(one.path)
    assert len(ds) == 700 and ds.continuity_breaks() == 0


def test_corrupted_cache_entry_is_remade(tiny_zoo, tmp_path):
    path, manifest, _ = make_builtin("hopper", "random", size=300, num_envs=2, cache_root=tmp_path, zoo_root=tiny_zoo)
    path.write_bytes(path.read_bytes()[:100])
    path2, manifest2, reused = make_builtin("hopper", "random", size=300, num_envs=2, cache_root=tmp_path,
                                            zoo_root=tiny_zoo)
    assert not reused and manifest2["sha256"] == manifest["sha256"] and len(read_d4rl(path2)) == 300


def test_failed_make_leaves_no_partial_file(tiny_zoo, tmp_path, monkeypatch):
    import h5py

    real_create = h5py.Group.create_dataset

    def crash_midway(self, name, *args, **kwargs):
        if name == "rewards":   # some datasets already written
            raise OSError("simulated disk failure while writing")
        return real_create(self, name, *args, **kwargs)

    monkeypatch.setattr(h5py.Group, "create_dataset", crash_midway)
    cache = tmp_path / "cache-under-test"
    with pytest.raises(OSError, match="simulated"):
        make_builtin("hopper", "expert", size=200, num_envs=2, cache_root=cache, zoo_root=tiny_zoo)
    assert [p for p in cache.rglob("*") if p.is_file()] == []   # no dataset, manifest or temp file


def test_recipes_follow_the_levels(tiny_zoo):
    zoo = load_zoo("hopper", tiny_zoo)
    replay = recipe(zoo, "medium-replay", 1001)
    assert [s.entry.name for s in replay] == ["step_0000000", "step_0000001"]   # every snapshot up to medium
    assert sum(s.transitions for s in replay) == 1001
    me = recipe(zoo, "medium-expert", 1000)
    assert [set(s.entry.roles) for s in me] == [{"medium"}, {"expert"}]
    assert recipe(zoo, "random", 10)[0].noise_std > recipe(zoo, "expert", 10)[0].noise_std
    with pytest.raises(ReverieError, match="unknown level 'mediocre'"):
        recipe(zoo, "mediocre", 10)


def test_medium_expert_concatenates_both_halves(tiny_zoo, tmp_path):
    path, manifest, _ = make_builtin("hopper", "medium-expert", size=600, num_envs=2, cache_root=tmp_path,
                                  zoo_root=tiny_zoo)
    ds = read_d4rl(path)
    assert len(ds) == 600 and [p["transitions"] for p in manifest["policies"]] == [300, 300]
    assert ds.terminals[299] or ds.timeouts[299]        # the halves do not run into each other
    assert ds.continuity_breaks() == 0


def test_names_and_bad_options(tiny_zoo, tmp_path):
    assert parse_builtin_name("walker2d-medium-replay") == ("walker2d", "medium-replay")
    assert parse_builtin_name("hopper-medium-v2") is None
    with pytest.raises(ReverieError, match="option 'size'"):
        make_builtin("hopper", "medium", size=-5, cache_root=tmp_path, zoo_root=tiny_zoo)
    with pytest.raises(ReverieError, match="no shipped behaviour policies for task 'ant'"):
        make_builtin("ant", "medium", size=10, cache_root=tmp_path, zoo_root=tiny_zoo)
