"""The VLA policy: tokenizer, LeRobot-style API, chunked targets, behaviour cloning that fits demonstrations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.vla import Tokenizer, VLAConfig, VLAPolicy, bc_tensors, chunk_targets, success_rate, train_bc
from envs.errors import ReverieError
from envs.manipulation import TASKS
from envs.manipulation_data import collect_episodes


def test_tokenizer_knows_the_templates_and_maps_the_rest_to_unknown():
    tok = Tokenizer.from_texts(t for task in TASKS.values() for t in task.instructions)
    ids = tok(["open the drawer", "open the flux capacitor"], length=5)
    assert ids.shape == (2, 5) and (ids[0, :3] > 1).all() and ids[0, 3:].eq(0).all()
    assert ids[1, 2].item() == 1 and ids[1, 3].item() == 1          # unknown words share one id


def test_chunk_targets_mask_steps_past_the_end():
    actions = np.arange(8, dtype=np.float32).reshape(4, 2)
    tgt, mask = chunk_targets(actions, 3)
    assert tgt.shape == (4, 3, 2) and tgt[0, 2].tolist() == [4.0, 5.0] and tgt[3, 2].tolist() == [6.0, 7.0]
    assert mask.tolist() == [[True] * 3, [True] * 3, [True, True, False], [True, False, False]]


def test_select_action_executes_chunks_from_a_queue():
    tok = Tokenizer.from_texts(["reach the red target"])
    policy = VLAPolicy(VLAConfig(image_size=32, chunk=6, execute=3, channels=8, hidden=32), tok)
    obs = {"image": np.zeros((32, 32, 3), np.uint8), "state": np.zeros(4, np.float32),
           "instruction": "reach the red target"}
    chunk = policy.predict_action_chunk(obs)
    assert chunk.shape == (1, 6, 4) and chunk.abs().max() <= 1
    first = [policy.select_action(obs) for _ in range(3)]
    for k in range(3):
        torch.testing.assert_close(first[k], chunk[:, k])
    policy.select_action(obs)                                          # a new chunk after `execute` steps
    assert len(policy._queue) == 2
    with pytest.raises(ReverieError, match=r"this policy takes \[32, 32, 3\] frames, got \[64, 64, 3\]"):
        policy.predict_action_chunk({**obs, "image": np.zeros((64, 64, 3), np.uint8)})
    back = VLAPolicy.from_blob(policy.save_blob())
    torch.testing.assert_close(back.predict_action_chunk(obs), chunk)


def test_action_noise_makes_a_noisier_copy_drawn_from_the_reset_seed():
    tok = Tokenizer.from_texts(["reach the red target"])
    clean = VLAPolicy(VLAConfig(image_size=32, chunk=4, execute=4, channels=8, hidden=32), tok)
    blob = clean.save_blob()
    blob["config"]["action_noise"] = 0.5
    noisy = VLAPolicy.from_blob(blob)
    obs = {"image": np.zeros((4, 32, 32, 3), np.uint8), "state": np.zeros((4, 4), np.float32),
           "instruction": "reach the red target"}

    def episode(policy, seed):
        policy.reset(seed)
        return torch.stack([policy.select_action(obs) for _ in range(8)])

    base, a, b, c = episode(clean, 1), episode(noisy, 1), episode(noisy, 1), episode(noisy, 2)
    torch.testing.assert_close(a, b)                                   # the seed fixes the noise
    assert not torch.allclose(a, c) and a.abs().max() <= 1             # another seed, other noise; still in range
    assert 0.3 < (a - base).std().item() < 0.6                         # about the std asked for (clamping trims it)
    assert VLAPolicy.from_blob(noisy.save_blob()).cfg.action_noise == 0.5
    with pytest.raises(ReverieError, match="action_noise"):
        VLAConfig(action_noise=-0.1).validate()


def test_behaviour_cloning_fits_the_demonstrations():
    eps = collect_episodes("metaworld-reach", "expert", 3, seed=0, image_size=32)
    tok = Tokenizer.from_texts(TASKS["metaworld-reach"].templates("all"))
    torch.manual_seed(0)
    policy = VLAPolicy(VLAConfig(image_size=32, channels=8, hidden=64, batch_size=32, lr=1e-3), tok)
    data = bc_tensors(eps, policy.cfg.chunk)
    g = torch.Generator().manual_seed(0)
    tokens = tok(data["texts"])
    frames = data["images"].permute(0, 3, 1, 2).float() / 255
    with torch.no_grad():
        before = policy.bc_loss(frames, data["states"], tokens, data["targets"], data["masks"]).item()
    train_bc(policy, data, 400, g)
    with torch.no_grad():
        after = policy.bc_loss(frames, data["states"], tokens, data["targets"], data["masks"]).item()
    assert after < 0.5 * before, (before, after)
    result = success_rate(policy, "metaworld-reach", [0], image_size=32, max_steps=20)
    assert result["episodes"] == 1 and 0.0 <= result["success_rate"] <= 1.0


def test_the_loop_refuses_more_policy_demonstrations_than_it_makes(tmp_path, capsys):
    from eval.manipulation_loop import main

    with pytest.raises(SystemExit) as exit_:
        main(["--out", str(tmp_path / "loop"), "--episodes", "5", "--bc-episodes", "6"])
    assert exit_.value.code == 2 and "--bc-episodes: expected 1..5 (--episodes), got 6" in capsys.readouterr().err
    assert not (tmp_path / "loop").exists()                            # refused before anything is written


def test_the_loop_fits_a_ranking_model_again_when_its_recipe_changed(tmp_path):
    """A kept ranking fit counts as done only if it was made with the loop's ranking settings as they are now: one
    made before a setting or default changed (here, hand movers fitted one step at a time) is named stale, so
    the loop fits it and ranks with it again instead of reporting the old recipe's verdict under the new one."""
    from dataclasses import replace

    from eval.manipulation_loop import RANKING_MODEL, stale_fits
    from worldmodels.video import VideoConfig, VideoWorldModel

    base = VideoWorldModel(3 * 16 * 16 + 4, 4, VideoConfig(latent=8, channels=8, hidden=(16,), members=2, elites=1),
                           task="metaworld-push")
    base.save(tmp_path / "video.pt")
    paths = [tmp_path / f"rank_video_fit{k}.pt" for k in range(3)]
    assert stale_fits(tmp_path / "video.pt", paths, RANKING_MODEL, 60) == []        # none made yet
    current = base.over_encoder(**RANKING_MODEL, max_epochs=60)
    current.save(paths[0])
    older = base.over_encoder(**RANKING_MODEL, max_epochs=60)
    older.cfg = replace(older.cfg, hand_horizon=1)
    older.save(paths[1])
    assert stale_fits(tmp_path / "video.pt", paths, RANKING_MODEL, 60) == [1]
    assert stale_fits(tmp_path / "video.pt", paths, RANKING_MODEL, 30) == [0, 1]    # other epochs: both


def test_the_loop_report_names_its_video_model_s_arithmetic(tmp_path, monkeypatch):
    """The report says how the video model was fitted: float32, or ``auto`` and what that meant here (bfloat16
    only on a machine with bfloat16 kernels of its own); the precision travels in the saved config."""
    import agents.networks as networks
    from eval.manipulation_loop import fit_precision
    from worldmodels.video import VideoConfig, VideoWorldModel

    small = dict(latent=8, channels=8, hidden=(16,), members=2, elites=1)
    for precision in ("float32", "auto"):
        VideoWorldModel(3 * 16 * 16 + 4, 4, VideoConfig(**small, precision=precision),
                        task="metaworld-push").save(tmp_path / f"{precision}.pt")
    assert fit_precision(tmp_path / "float32.pt") == "float32"
    for native, meant in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(networks, "native_bfloat16", lambda device_type="cpu", native=native: native)
        assert fit_precision(tmp_path / "auto.pt") == f"auto ({meant} on this machine)"


def test_the_loop_refuses_to_rank_a_task_it_does_not_run(tmp_path, capsys):
    from eval.manipulation_loop import main

    with pytest.raises(SystemExit) as exit_:
        main(["--out", str(tmp_path / "loop"), "--tasks", "metaworld-reach,metaworld-push",
              "--rank-tasks", "metaworld-push,metaworld-door-open"])
    assert exit_.value.code == 2
    assert "--rank-tasks: expected tasks among --tasks, got metaworld-door-open" in capsys.readouterr().err
    assert not (tmp_path / "loop").exists()


def test_a_stage_cut_short_keeps_its_time_and_adds_the_resumed_attempts(tmp_path):
    """The loop's stage times span sessions: while a stage runs its time so far is on disk (a session's end kills
    the process without warning), and a resumed stage adds to it rather than starting the count again."""
    import json
    import time

    from eval.manipulation_loop import StageClock

    path = tmp_path / "stages.json"
    with pytest.raises(KeyboardInterrupt):
        with StageClock(path, every=0.02).running("video world model"):
            time.sleep(0.15)
            assert json.loads(path.read_text())["video world model"] >= 0.05    # written while it runs
            raise KeyboardInterrupt
    first = json.loads(path.read_text())["video world model"]
    assert first >= 0.15
    clock = StageClock(path, every=60.0)
    with clock.running("video world model"):
        time.sleep(0.05)
    with clock.running("behaviour cloning"):
        pass
    times = json.loads(path.read_text())
    assert times["video world model"] >= first + 0.05 and list(times) == ["video world model", "behaviour cloning"]


def test_the_loop_reports_each_change_with_an_interval_paired_over_seeds():
    from eval.manipulation_loop import change_table

    seeds = list(range(40))
    def table(rate_a, rate_b):       # two tasks: "a" and "b", each seed's outcome
        return {t: {"success_rate": r, "seeds": seeds, "wins": [i < 40 * r for i in seeds]}
                for t, r in (("a", rate_a), ("b", rate_b))}
    lines = change_table(table(0.25, 0.5), table(0.75, 0.5), ["a", "b"])
    row_a = next(l for l in lines if l.startswith("| a |"))
    assert "| 25% | 75% | +50 [+35, +65] |" in row_a                   # 20 seeds won after, none lost: a sure gain
    assert "| 50% | 50% | +0 [+0, +0] |" in next(l for l in lines if l.startswith("| b |"))
    assert "Raised on 1 of 2 tasks; on 1 the whole 95% interval of the change is above zero." in lines
    unpaired = {t: {k: v for k, v in row.items() if k != "wins"} for t, row in table(0.25, 0.5).items()}
    assert "Raised on 1 of 2 tasks." in change_table(unpaired, table(0.75, 0.5), ["a", "b"])
