import numpy as np
import pytest

from envs.dataset import OfflineDataset
from envs.errors import DatasetError

from conftest import transitions


def test_episode_structure_from_flags():
    ds = OfflineDataset.from_arrays(transitions(10, ends=(3, 7), terminal_at=(3,)))
    assert ds.episode_ends().tolist() == [4, 8, 10]        # last episode unfinished
    assert ds.episode_starts().tolist() == [0, 4, 8]
    assert ds.episode_returns().tolist() == [0 + 1 + 2 + 3, 4 + 5 + 6 + 7, 8 + 9]
    assert ds.continuity_breaks() == 0
    assert ds.terminals.sum() == 1 and ds.timeouts.sum() == 1


def test_flags_as_numbers_are_converted_and_rewards_flattened():
    raw = transitions()
    raw["terminals"] = raw["terminals"].astype(np.float32)
    raw["timeouts"] = raw["timeouts"].astype(np.int64)[:, None]
    raw["rewards"] = raw["rewards"][:, None]
    ds = OfflineDataset.from_arrays(raw)
    assert ds.terminals.dtype == bool and ds.timeouts.shape == (10,) and ds.rewards.shape == (10,)


def test_continuity_breaks_counted_inside_episodes_only():
    raw = transitions(10, ends=(3, 7))
    raw["next_observations"][5] += 1.0     # inside an episode: a break
    raw["next_observations"][3] += 1.0     # at an episode end: not a break
    assert OfflineDataset.from_arrays(raw).continuity_breaks() == 1


@pytest.mark.parametrize("mutate,field,message", [
    (lambda r: r.pop("timeouts"), "timeouts", "missing"),
    (lambda r: r.update(rewards=r["rewards"][:-1]), "rewards", r"expected shape \(10,\)"),
    (lambda r: r.update(next_observations=r["next_observations"][:, :2]), "next_observations", "expected shape"),
    (lambda r: r["observations"].__setitem__((4, 1), np.nan), "observations", "NaN or inf at row 4"),
    (lambda r: r["actions"].__setitem__((2, 0), np.inf), "actions", "NaN or inf at row 2"),
    (lambda r: r.update(observations=r["observations"].astype(np.int32)), "observations", "floating-point"),
    (lambda r: r.update(rewards=np.array(["a"] * 10)), "rewards", "floating-point"),
    (lambda r: r.update(terminals=np.full(10, 2)), "terminals", "only 0 and 1"),
    (lambda r: r["timeouts"].__setitem__(3, True), "timeouts", "both terminal and a timeout"),
    (lambda r: r.update(qpos=np.zeros((10, 4))), "qvel", "together"),
])
def test_validation_names_field_and_expectation(mutate, field, message):
    raw = transitions()
    mutate(raw)
    with pytest.raises(DatasetError, match=message) as err:
        OfflineDataset.from_arrays(raw, source="data.hdf5")
    assert err.value.field == field
    assert str(err.value).startswith(f"data.hdf5: field '{field}'")
    assert "\n" not in str(err.value)


def test_concatenate_and_select_keep_fields():
    a = OfflineDataset.from_arrays(transitions(10, seed=0))
    b = OfflineDataset.from_arrays(transitions(6, ends=(5,), seed=1))
    both = OfflineDataset.concatenate([a, b])
    assert len(both) == 16 and both.episode_ends().tolist() == [4, 8, 10, 16]
    picked = both.select(np.arange(4))
    assert len(picked) == 4 and np.array_equal(picked.observations, a.observations[:4])
