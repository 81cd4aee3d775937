import numpy as np
import pytest

from envs.errors import ReverieError
from envs.tasks import TASKS, get_task, normalized_score, task_from_name


@pytest.mark.parametrize("name", list(TASKS))
def test_task_sizes_match_the_simulator(name):
    task = get_task(name)
    env = task.make_env()
    obs, _ = env.reset(seed=0)
    assert obs.shape == (task.obs_dim,)
    assert env.action_space.shape == (task.act_dim,)
    assert np.allclose(env.action_space.low, -1) and np.allclose(env.action_space.high, 1)
    assert env.unwrapped.model.nq == task.nq and env.unwrapped.model.nv == task.nv
    assert env.spec.max_episode_steps == task.max_episode_steps
    env.close()


def test_normalized_score_uses_d4rl_references():
    assert normalized_score("hopper", -20.272305) == pytest.approx(0.0)
    assert normalized_score("hopper", 3234.3) == pytest.approx(100.0)
    assert normalized_score("walker2d", (4592.3 + 1.629008) / 2) == pytest.approx(50.0)
    out = normalized_score("halfcheetah", np.array([-280.178953, 12135.0]))
    assert np.allclose(out, [0.0, 100.0])
    assert normalized_score("ant", 3879.7) == pytest.approx(100.0)


def test_normalized_score_neorl_and_errors():
    assert normalized_score("hopper", 3294.0, reference="neorl") == pytest.approx(100.0)
    assert normalized_score("halfcheetah", -298.0, reference="neorl") == pytest.approx(0.0)
    with pytest.raises(ReverieError, match="no NeoRL"):
        normalized_score("ant", 1.0, reference="neorl")
    with pytest.raises(ReverieError, match="unknown task 'cartpole'"):
        normalized_score("cartpole", 1.0)


@pytest.mark.parametrize("name,task", [("hopper-medium-replay-v2", "hopper"), ("Walker2d-v5", "walker2d"),
                                       ("mujoco/halfcheetah/expert-v0", "halfcheetah"), ("Hopper-v3-low", "hopper"),
                                       ("door-human-v1", None)])
def test_task_from_name(name, task):
    found = task_from_name(name)
    assert (found.name if found else None) == task


def test_known_mujoco_deprecation_leaves_no_log_file(tmp_path, monkeypatch, recwarn):
    monkeypatch.chdir(tmp_path)
    get_task("halfcheetah").make_env().close()
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert not [w for w in recwarn if "MuJoCo" in str(w.message)]
