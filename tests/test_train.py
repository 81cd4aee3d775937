"""``reverie train``: a real run end to end, exact resume after kill -9 or SIGTERM, and bad input refused."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from agents.networks import TanhActor
from envs.builtin import collect
from envs.d4rl_format import write_d4rl
from envs.tasks import get_task
from eval.cli import main

FAST = ["agent.hidden=[32,32]", "world_model.members=3", "world_model.elites=2", "world_model.hidden=[32,32]",
        "world_model.weight_decay=[0,0,0]", "world_model.max_epochs=2", "train.rollout_batch=200",
        "train.rollout_every=50", "train.eval_every=100", "train.eval_episodes=2", "train.final_eval_episodes=2",
        "train.log_every=50"]


def small_dataset(path, task="hopper", n=3000, seed=0):
    t = get_task(task)
    torch.manual_seed(seed)
    ds = collect(t, TanhActor(t.obs_dim, t.act_dim, (32, 32)), n, noise_std=0.3, seed=seed, num_envs=8)
    ds.name = path.stem
    write_d4rl(ds, path)
    return path


@pytest.fixture(scope="module")
def hopper_file(tmp_path_factory):
    return small_dataset(tmp_path_factory.mktemp("data") / "hopper-tiny.hdf5")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_train_writes_result_checkpoint_and_tensorboard(capsys, tmp_path, hopper_file):
    code, out, err = run(capsys, "train", "agent=mopo", f"dataset={hopper_file}", "train.steps=120", *FAST,
                         "train.precision=auto", "world_model.fit_precision=auto", f"run_dir={tmp_path / 'run'}")
    assert code == 0, err
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["agent"] == "mopo" and result["steps"] == 120 and result["eval_episodes"] == 2
    assert result["dataset"] == "hopper-tiny" and "normalized_score" in result
    assert "reverie train agent=mopo" in result["command"]
    # the recorded command repeats the run on any machine: auto is written out as what it chose here
    assert result["precision"] in ("float32", "bfloat16")
    assert f"train.precision=auto: the updates ran in {result['precision']}" in out
    assert f"train.precision={result['precision']}" in result["command"] and "auto" not in result["command"]
    assert f"world_model.fit_precision={result['precision']}" in result["command"]     # the same machine's choice
    assert "world model fit epoch 1 of at most 2: mean holdout MSE" in out     # the fit shows how it goes
    from envs.info import dataset_info
    from envs.sources import load_source
    from worldmodels.registry import dataset_fingerprint
    data = load_source(str(hopper_file))
    assert result["dataset_fingerprint"] == dataset_fingerprint(data)          # which data it learned from
    assert result["behaviour_score"] == dataset_info(data)["normalized_score"]
    for name in ("world_model.pt", "checkpoint.pt", "progress.json", "learner.pt", "config.yaml"):
        assert (tmp_path / "run" / name).is_file()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    tags = EventAccumulator(str(tmp_path / "run" / "tb")).Reload().Tags()["scalars"]
    for tag in ("rollout/penalty_mean", "rollout/length_mean", "rollout/nonfinite_rows", "train/critic_loss",
                "train/q_mean", "model/holdout_mse_elites", "fit/holdout_mse_mean", "eval/normalized_score", "final/normalized_score"):
        assert tag in tags, tag
    # a finished run_dir is not trained again
    code, out, _ = run(capsys, "train", "agent=mopo", f"dataset={hopper_file}", "train.steps=120", *FAST,
                       "train.precision=auto", "world_model.fit_precision=auto", f"run_dir={tmp_path / 'run'}")
    assert code == 0 and "has finished" in out


def _train_process(hopper_file, run_dir, checkpoint_every=100):
    argv = [sys.executable, "-m", "eval.cli", "train", "agent=mopo", f"dataset={hopper_file}", "train.steps=1500",
            f"train.checkpoint_every={checkpoint_every}", *FAST, f"run_dir={run_dir}"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, hopper_file):
    """The learner of a run that never stopped."""
    run_dir = tmp_path_factory.mktemp("straight") / "run"
    straight = _train_process(hopper_file, run_dir)
    assert straight.wait(timeout=600) == 0, straight.stdout.read()
    return torch.load(run_dir / "learner.pt", weights_only=False)


def assert_same_learner(a: dict, b: dict) -> None:
    for part in ("actor", "critic", "critic_target"):
        for k in a[part]:
            assert torch.equal(a[part][k], b[part][k]), f"{part}.{k} differs"
    assert torch.equal(a["log_alpha"], b["log_alpha"])


def test_kill_9_and_resume_gives_the_weights_of_an_uninterrupted_run(tmp_path, hopper_file, uninterrupted):
    victim = _train_process(hopper_file, tmp_path / "killed")
    checkpoint = tmp_path / "killed" / "checkpoint.pt"
    deadline = time.time() + 300
    while not checkpoint.is_file() and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    assert not (tmp_path / "killed" / "result.json").exists(), "the run finished before it was killed"
    step = torch.load(checkpoint, weights_only=False)["step"]
    assert 0 < step < 1500

    resumed = _train_process(hopper_file, tmp_path / "killed")
    out = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0 and "resuming" in out, out
    assert_same_learner(uninterrupted, torch.load(tmp_path / "killed" / "learner.pt", weights_only=False))


def test_sigterm_saves_the_update_it_reached_and_the_run_resumes_to_the_same_weights(tmp_path, hopper_file,
                                                                                      uninterrupted):
    """A scheduler's (or a dying ``reverie bench``'s) SIGTERM: with no periodic checkpoint due for 100,000
    updates, the run still loses nothing: it saves where it is, says so in one line and exits 128 + 15."""
    run_dir = tmp_path / "stopped"
    victim = _train_process(hopper_file, run_dir, checkpoint_every=100_000)
    seen = []
    for line in victim.stdout:                       # the first evaluation's line: updates are under way
        seen.append(line)
        if line.startswith("step 100: normalized score"):
            victim.send_signal(signal.SIGTERM)
            break
    out = "".join(seen) + victim.communicate(timeout=300)[0]
    assert victim.returncode == 128 + signal.SIGTERM, out
    stopped = re.search(r"reverie: stopped by SIGTERM after update ([\d,]+): checkpoint saved to (\S+); "
                        r"run the same command to resume", out)
    assert stopped is not None, out
    step = int(stopped[1].replace(",", ""))
    assert 100 <= step < 1500 and stopped[2] == str(run_dir / "checkpoint.pt")
    assert torch.load(run_dir / "checkpoint.pt", weights_only=False)["step"] == step
    assert not (run_dir / "result.json").exists() and not (run_dir / "learner.pt").exists()

    resumed = _train_process(hopper_file, run_dir, checkpoint_every=100_000)
    out = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0 and "resuming" in out, out
    assert_same_learner(uninterrupted, torch.load(run_dir / "learner.pt", weights_only=False))


def test_a_second_signal_acts_at_once_as_it_would_have():
    from agents.training import stop_requests

    def deliver(signum):
        os.kill(os.getpid(), signum)
        time.sleep(0.05)                                 # Python runs the handler between bytecodes

    acted = []
    outer = signal.signal(signal.SIGINT, lambda signum, frame: acted.append(signum))   # what was there before
    try:
        with stop_requests() as caught:
            deliver(signal.SIGINT)
            assert caught == [signal.SIGINT] and acted == []         # noted, not acted on
            deliver(signal.SIGINT)
            assert caught == [signal.SIGINT] and acted == [signal.SIGINT]   # the handler before acts on the next
        deliver(signal.SIGINT)
        assert acted == [signal.SIGINT] * 2                           # and is back in place after
    finally:
        signal.signal(signal.SIGINT, outer if outer is not None else signal.default_int_handler)


@pytest.mark.parametrize("argv, expected", [
    (["agent=nope"], "unknown agent 'nope': expected one of"),
    (["world_model=nope"], "unknown world_model 'nope': expected one of diffusion, ensemble"),
    (["agent.penalty_coef=abc"], "agent.penalty_coef: expected a number, got 'abc'"),
    (["agent.penalty_coef=-1"], "agent.penalty_coef: expected a value >= 0, got -1.0"),
    (["agent.penalty=median"], "agent.penalty: expected one of aleatoric, disagreement, got 'median'"),
    (["+agent.bogus=1"], "agent.bogus: not an option here"),
    (["train.steps=0"], "train.steps: expected a positive integer, got 0"),
    (["agent.real_ratio=1.5"], "train.real_ratio: expected a value in [0, 1], got 1.5"),
    (["world_model.members=two"], "world_model.members: expected an integer, got 'two'"),
    (["device=tpu"], "device: expected cpu, cuda or cuda:N, got 'tpu'"),
])
def test_bad_options_are_refused_in_one_line(capsys, tmp_path, hopper_file, argv, expected):
    code, _, err = run(capsys, "train", f"dataset={hopper_file}", *argv, f"run_dir={tmp_path / 'r'}")
    assert code == 2 and expected in err, err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_world_model_from_another_task_or_size_is_refused(capsys, tmp_path, hopper_file):
    walker = small_dataset(tmp_path / "walker2d-tiny.hdf5", "walker2d", n=1500)
    cheetah = small_dataset(tmp_path / "halfcheetah-tiny.hdf5", "halfcheetah", n=1500)
    code, _, err = run(capsys, "fit", f"dataset={walker}", "world_model.members=2", "world_model.elites=1",
                       "world_model.hidden=[16]", "world_model.weight_decay=[0,0]", "world_model.max_epochs=1",
                       f"run_dir={tmp_path / 'fit'}")
    assert code == 0, err
    model = tmp_path / "fit" / "world_model.pt"
    code, _, err = run(capsys, "train", f"dataset={cheetah}", f"world_model.checkpoint={model}", *FAST,
                       f"run_dir={tmp_path / 'a'}")
    assert code == 2 and "fitted for task 'walker2d'" in err and "'halfcheetah'" in err, err
    code, _, err = run(capsys, "train", f"dataset={hopper_file}", f"world_model.checkpoint={model}", *FAST,
                       f"run_dir={tmp_path / 'b'}")
    assert code == 2 and "obs_dim=17, act_dim=6" in err and "obs_dim=11, act_dim=3" in err, err


def test_resuming_a_run_dir_with_other_options_is_refused(capsys, tmp_path, hopper_file):
    argv = ["train", "agent=td3bc", f"dataset={hopper_file}", "train.steps=20", *FAST[:1], "train.final_eval_episodes=1"]
    code, _, err = run(capsys, *argv, f"run_dir={tmp_path / 'r'}")
    assert code == 0, err
    code, _, err = run(capsys, *argv[:-1], "train.final_eval_episodes=3", f"run_dir={tmp_path / 'r'}")
    assert code == 2 and "holds a run with train.final_eval_episodes=1, not 3" in err, err
    # The thread count says where the work runs, not what it computes: a run begun on one core resumes on two.
    code, _, err = run(capsys, *argv, "threads=2", f"run_dir={tmp_path / 'r'}")
    assert code == 0, err
    # A run begun before an option existed resumes when the option is left at its shipped default.
    saved = tmp_path / "r" / "config.yaml"
    lines = saved.read_text().splitlines()
    assert any(line.startswith("device:") for line in lines)
    saved.write_text("\n".join(line for line in lines if not line.startswith("device:")) + "\n")
    code, _, err = run(capsys, *argv, f"run_dir={tmp_path / 'r'}")
    assert code == 0, err


def test_dataset_too_small_to_hold_out_is_refused(capsys, tmp_path):
    tiny = small_dataset(tmp_path / "hopper-few.hdf5", n=200)
    code, _, err = run(capsys, "train", "agent=mopo", f"dataset={tiny}", f"run_dir={tmp_path / 'r'}")
    assert code == 2 and "dataset too small to hold out: 200 transitions" in err, err


def test_packaged_defaults_are_read_from_the_shipped_configs():
    from eval.cli import _NO_DEFAULT, _packaged_default

    assert _packaged_default("device", {}) == "cpu"
    assert _packaged_default("agent.window", {"agent": {"name": "neubay"}}) == 32
    assert _packaged_default("world_model.members", {"world_model": {"name": "diffusion"}}) == 5
    assert _packaged_default("agent.no_such_key", {"agent": {"name": "mopo"}}) is _NO_DEFAULT
    # a default that refers to another option (MOBILE's schedule over train.steps) counts as off for older runs
    assert _packaged_default("agent.actor_decay_steps", {"agent": {"name": "mobile"}}) is None


@pytest.mark.parametrize("agent", ["mopo", "mobile", "neubay"])
def test_every_dataset_of_the_comparisons_has_its_papers_settings(agent):
    """Issue 3's grid and issue 4's comparison run MOPO, MOBILE and NEUBAY on each dataset with the settings its
    authors give for it; a dataset missing from a learner's `tuned` table would silently run on the defaults."""
    from eval.cli import COMMANDS, _compose, train_configs

    datasets = [f"{env}-{level}" for env in ("hopper", "halfcheetah", "walker2d")
                for level in ("random", "medium-replay", *(["medium"] if agent != "neubay" else []))]
    for dataset in datasets:
        overrides = [f"agent={agent}", f"dataset={dataset}"]
        applied = train_configs(_compose(COMMANDS["train"], overrides), overrides, dataset)[4]
        assert applied, f"{agent} has no settings of its authors' for {dataset}"
        if (agent, dataset) == ("mopo", "walker2d-random"):
            _, acfg, _, tcfg, _ = train_configs(_compose(COMMANDS["train"], overrides), overrides, dataset)
            assert tcfg.rollout_length == 1 and acfg.penalty_coef == 1.0


@pytest.mark.parametrize("agent", ["mopo", "mobile", "ravl", "mbpo", "neubay", "td3bc", "iql"])
def test_every_option_of_a_learner_is_listed_in_its_config_and_set_without_a_plus(agent):
    """A learner's yaml lists every field of its config, so `agent.KEY=VALUE` sets any of them (an option
    missing from the yaml needs Hydra's `+agent.KEY=`, which nobody guesses), and the listed value is the one
    the learner would take without it."""
    import dataclasses

    from agents.registry import AGENTS
    from eval.cli import COMMANDS, _compose, train_configs

    overrides = [f"agent={agent}", "dataset=hopper-medium", "train.steps=1000"]
    cfg = _compose(COMMANDS["train"], overrides)
    fields = dataclasses.fields(AGENTS[agent][1])
    assert {f.name for f in fields} <= set(cfg.agent), sorted({f.name for f in fields} - set(cfg.agent))
    if any(f.name == "target_entropy" for f in fields):
        assert cfg.agent.target_entropy is None                         # -|A|, the learners' own default
        overrides = [*overrides, "agent.target_entropy=-3"]
        _, acfg, _, _, _ = train_configs(_compose(COMMANDS["train"], overrides), overrides, "hopper-medium")
        assert acfg.target_entropy == -3


def test_mobile_takes_its_authors_actor_schedule_and_fixed_temperature():
    """The shipped MOBILE config: the actor's rate decays by a cosine over the run's own budget, the learned
    temperature is capped at 1 where it is used, and on hopper-medium, where the authors fix the temperature,
    it is fixed at their 0.1 (not the learned one's start)."""
    from eval.cli import COMMANDS, _compose, train_configs

    overrides = ["agent=mobile", "dataset=hopper-medium", "train.steps=1234"]
    _, acfg, _, _, applied = train_configs(_compose(COMMANDS["train"], overrides), overrides, "hopper-medium")
    assert acfg.actor_decay_steps == 1234
    assert not acfg.auto_alpha and acfg.init_alpha == 0.1 and applied["init_alpha"] == 0.1
    overrides = ["agent=mobile", "dataset=walker2d-medium", "agent.actor_decay_steps=null"]
    _, acfg, _, _, _ = train_configs(_compose(COMMANDS["train"], overrides), overrides, "walker2d-medium")
    assert acfg.actor_decay_steps is None and acfg.auto_alpha and acfg.init_alpha == 1.0 and acfg.max_alpha == 1.0


def test_neubay_takes_its_authors_learning_rates_and_per_dataset_settings():
    """The shipped NEUBAY config: heads at 1e-4, the recurrent encoders far slower, and on
    hopper-medium-replay the authors' task file (encoder 3e-7, half the batch real, a fixed alpha)."""
    from agents.neubay import NEUBAY
    from eval.cli import COMMANDS, _compose, train_configs

    overrides = ["agent=neubay", "dataset=hopper-medium-replay"]
    cfg = _compose(COMMANDS["train"], overrides)
    name, acfg, _, tcfg, applied = train_configs(cfg, overrides, "hopper-medium-replay")
    assert applied == {"encoder_lr": 3e-7, "real_ratio": 0.5, "auto_alpha": False}
    assert tcfg.real_ratio == 0.5 and not acfg.auto_alpha and acfg.init_alpha == 0.2
    agent = NEUBAY(11, 3, acfg)
    assert [g["lr"] for g in agent.actor_opt.param_groups] == [3e-7, 1e-4]
    assert [g["lr"] for g in agent.critic_opt.param_groups] == [3e-7, 1e-4]
    assert not agent.log_alpha.requires_grad
    # an explicit agent.KEY=VALUE wins over the per-dataset value
    overrides = [*overrides, "agent.encoder_lr=0.001"]
    _, acfg, _, _, applied = train_configs(_compose(COMMANDS["train"], overrides), overrides, "hopper-medium-replay")
    assert acfg.encoder_lr == 0.001 and "encoder_lr" not in applied
