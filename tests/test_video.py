"""The video world model: the step contract on frames, a fit that learns, persistence, bad input refused."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from envs.errors import ReverieError
from envs.manipulation_data import Episode, ManipulationDataset, collect_episodes
from worldmodels.judge import HOLDS
from worldmodels.registry import check_video_model, fit_video_model, load_model
from worldmodels.rollout import StartStates, rollout
from worldmodels.video import frames_to_obs, obs_to_frames

SMALL = {"name": "video", "latent": 32, "channels": 16, "ae_epochs": 40, "ae_batch": 32, "ae_lr": 3e-3,
         "motion_weight": 0.0, "max_epochs": 8, "head_epochs": 4,
         "hidden": [64, 64], "members": 3, "elites": 2, "judge_steps": 100}


@pytest.fixture(scope="module")
def reach():
    eps = collect_episodes("metaworld-reach", "expert", 3, seed=0, image_size=32)
    eps += collect_episodes("metaworld-reach", "poor", 3, seed=1, image_size=32)
    ds = ManipulationDataset(eps, {"task": "metaworld-reach", "image_size": 32})
    model, metrics = fit_video_model([ds], SMALL, seed=0)
    return ds, model, metrics


class Replay:
    """Recorded actions ``[T, B, 4]``, one step per call."""

    def __init__(self, actions):
        self.actions = actions

    def initial_state(self, batch_size):
        return 0

    def act(self, state, obs, first, *, deterministic, generator=None, prev_reward=None):
        return state + 1, self.actions[state]


def test_frames_and_observations_round_trip():
    images = torch.randint(0, 256, (5, 16, 16, 3), dtype=torch.uint8)
    obs = frames_to_obs(images, torch.randn(5, 4))
    assert obs.shape == (5, 3 * 16 * 16 + 4) and obs.dtype == torch.float32
    torch.testing.assert_close(obs_to_frames(obs, 16), images.permute(0, 3, 1, 2).float() / 255)


def test_the_autoencoder_learns_the_scene(reach):
    ds, model, metrics = reach
    frames = torch.cat([torch.from_numpy(e.images) for e in ds.episodes]).float() / 255
    mean_frame_mse = (frames - frames.mean(0)).pow(2).mean().item()
    assert metrics["reconstruction_mse"] < 0.5 * mean_frame_mse, (metrics, mean_frame_mse)


def test_steps_keep_the_contract_on_frames(reach):
    ds, model, _ = reach
    e = ds.episodes[0]
    start = frames_to_obs(e.images[:4], e.states[:4])
    g = torch.Generator().manual_seed(0)
    state = model.init_state(start, g, context=frames_to_obs(e.images[:4], e.states[:4]))
    state, out = model.step(state, torch.from_numpy(e.actions[:4]), generator=g)
    assert out.obs.shape == (4, 3 * 32 * 32 + 4) and out.obs[:, :-4].min() >= 0 and out.obs[:, :-4].max() <= 1
    assert out.reward.shape == (4,) and (out.uncertainty >= 0).all() and ((out.success >= 0) & (out.success <= 1)).all()
    held = model.init_state(start, g, member=torch.full((4,), 1))
    a, _ = model.step(held, torch.from_numpy(e.actions[:4]), generator=g, deterministic=True)
    b, _ = model.step(held, torch.from_numpy(e.actions[:4]), generator=g, deterministic=True)
    torch.testing.assert_close(a["latent"], b["latent"])
    actions = torch.from_numpy(e.actions[:40])[:, None].expand(-1, 4, -1)
    ro = rollout(model, Replay(actions), StartStates(start), 40, g, deterministic=True)
    assert ro.nonfinite_rows == 0 and ro.lengths().min() == 40


def test_saved_model_predicts_the_same_and_refuses_other_tasks_and_sizes(reach, tmp_path):
    ds, model, _ = reach
    model.save(tmp_path / "video.pt")
    back = load_model(tmp_path / "video.pt")
    obs = frames_to_obs(ds.episodes[0].images[:3], ds.episodes[0].states[:3])
    act = torch.from_numpy(ds.episodes[0].actions[:3])
    torch.testing.assert_close(back.predict(obs, act)[0], model.predict(obs, act)[0])
    check_video_model(back, "video.pt", "metaworld-reach", 32)
    with pytest.raises(ReverieError, match="trained on metaworld-reach, not metaworld-push"):
        check_video_model(back, "video.pt", "metaworld-push", 32)
    with pytest.raises(ReverieError, match="takes 32x32 frames, got 64x64"):
        check_video_model(back, "video.pt", "metaworld-reach", 64)
    big = ManipulationDataset(collect_episodes("metaworld-reach", "expert", 1, image_size=48),
                              {"task": "metaworld-reach", "image_size": 48})
    with pytest.raises(ReverieError, match=r"frames of different sizes \[32, 48\]"):
        fit_video_model([ds, big], SMALL, seed=0)


def test_imagined_episodes_are_kept_only_where_the_success_head_says_so(reach):
    from agents.vla import Tokenizer, VLAConfig, VLAPolicy
    from agents.vla_finetune import FinetuneConfig, imagine

    ds, model, _ = reach
    vla = VLAPolicy(VLAConfig(image_size=32, channels=8, hidden=32), Tokenizer.from_texts(["reach the red target"]))
    starts = ds.episodes[:4]
    g = torch.Generator().manual_seed(0)
    kept, rate = imagine(vla, model, starts, FinetuneConfig(horizon=12, threshold=0.0, hold=1, tail=3), g)
    assert rate == 1.0 and len(kept) == 4
    for e, start in zip(kept, starts):   # judged successful at the first step: it and three more are kept
        assert len(e) == 4 and e.images.shape == (5, 32, 32, 3) and e.images.dtype == np.uint8
        assert e.actions.shape == (4, 4) and e.states.shape == (5, 4) and e.instruction == start.instruction
    held3, _ = imagine(vla, model, starts, FinetuneConfig(horizon=12, threshold=0.0, hold=3, tail=3), g)
    assert [len(e) for e in held3] == [6] * 4             # a success once held for three steps: the third
    none, rate = imagine(vla, model, starts, FinetuneConfig(horizon=12, threshold=1.0), g)
    assert none == [] and rate == 0.0


def test_reverie_evaluate_ranks_vla_policies_in_the_video_model(reach, tmp_path, capsys):
    from agents.vla import Tokenizer, VLAConfig, VLAPolicy
    from envs.manipulation import TASKS
    from envs.manipulation_data import write_manipulation
    from eval.cli import main

    ds, model, _ = reach
    model.save(tmp_path / "video.pt")
    data = tmp_path / "reach.hdf5"
    write_manipulation(data, ds.episodes, {"task": "metaworld-reach", "image_size": 32, "level": "expert",
                                           "camera": "corner"})
    tok = Tokenizer.from_texts(TASKS["metaworld-reach"].templates("all"))
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    for k in range(3):
        torch.manual_seed(k)
        torch.save(VLAPolicy(VLAConfig(image_size=32, channels=8, hidden=32), tok).save_blob(), zoo / f"vla{k}.pt")
    argv = ["evaluate", "task=metaworld-reach", f"world_model.checkpoint={tmp_path / 'video.pt'}",
            f"policies=[{zoo}]", f"dataset={data}", "rows=2", "horizon=12", "open_loop_rows=4",
            "open_loop_horizon=8", "bootstrap=50", "threads=1"]
    assert main([*argv, f"run_dir={tmp_path / 'report'}"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "MMRV" in out and "report:" in out
    result = json.loads((tmp_path / "report" / "results.json").read_text())
    assert [p["policy"] for p in result["policies"]] == ["vla0", "vla1", "vla2"]
    assert all(0 <= p["real_score"] <= 100 and 0 <= p["imagined_score"] <= 100 for p in result["policies"])
    assert "PSNR / SSIM at step 1" in (tmp_path / "report" / "report.md").read_text()
    page = (tmp_path / "report" / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 6                 # 3 plots and a frame strip a policy
    assert (tmp_path / "report" / "strip_vla0.png").read_bytes()[:4] == b"\x89PNG"
    big = tmp_path / "big"
    big.mkdir()
    torch.save(VLAPolicy(VLAConfig(image_size=64, channels=8, hidden=32), tok).save_blob(), big / "vla64.pt")
    # judged only before the inverse-dynamics error passes its dataset median: never longer, never more success
    assert main([*argv, "truncate_quantile=0.5", "uncertainty=inverse_dynamics",
                 f"run_dir={tmp_path / 'cut'}"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    cut = json.loads((tmp_path / "cut" / "results.json").read_text())
    assert cut["truncate_quantile"] == 0.5 and set(cut["cuts"]) == {"0.5", "0.9", "0.95", "0.99", "1.0"}
    for whole, part in zip(result["policies"], cut["policies"]):
        assert part["imagined_length"] <= whole["imagined_length"] == 12
        assert part["imagined_score"] <= part["sweep"]["1.0"] and part["imagined_score"] == part["sweep"]["0.5"]
    assert "(chosen)" in (tmp_path / "cut" / "report.md").read_text()
    # the verdict at the judge's own hold by default; a longer hold never finds more success
    assert result["hold"] == int(model.judge.hold)
    for p in result["policies"]:
        assert p["imagined_score"] == p["holds"][str(result["hold"])]
        assert [p["holds"][str(k)] for k in HOLDS] == sorted((p["holds"][str(k)] for k in HOLDS), reverse=True)
    assert main([*argv, "hold=3", f"run_dir={tmp_path / 'hold3'}"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    three = json.loads((tmp_path / "hold3" / "results.json").read_text())
    assert three["hold"] == 3 and all(p["imagined_score"] == p["holds"]["3"] for p in three["policies"])
    assert "for 3 steps in a row" in (tmp_path / "hold3" / "report.md").read_text()
    for extra, message in ((["policies=[zoo]"], "manipulation tasks ship no zoo"),
                           (["truncate_quantile=1.5"], "option 'truncate_quantile': expected a quantile in (0, 1]"),
                           (["uncertainty=entropy"], "option 'uncertainty': expected model, inverse_dynamics"),
                           (["hold=0"], "option 'hold': expected a positive number of steps or null"),
                           ([f"policies=[{big}]"], "policy takes 64x64 frames, the world model 32x32"),
                           (["task=metaworld-push"], "trained on metaworld-reach, not metaworld-push")):
        code = main([*argv, *extra, f"run_dir={tmp_path / ('bad' + str(len(message)))}"])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_cutting_an_imagined_rollout_afterwards_keeps_what_truncating_it_keeps(reach):
    """The video evaluation cuts uncut rollouts afterwards, at several thresholds from one pass: the
    steps it trusts are the steps a rollout truncated at that threshold keeps."""
    from eval.video_evaluate import dataset_uncertainty, trusted_steps
    from worldmodels.rollout import UncertaintyThreshold

    ds, model, _ = reach
    model.cfg.uncertainty = "inverse_dynamics"
    try:
        unc = dataset_uncertainty(model, ds.episodes, torch.Generator().manual_seed(0))
        assert unc.shape == (sum(len(e) - 1 for e in ds.episodes),) and np.all(unc >= 0)
        start = frames_to_obs(np.stack([e.images[0] for e in ds.episodes]), np.stack([e.states[0] for e in ds.episodes]))
        acts = torch.from_numpy(np.stack([e.actions[:20] for e in ds.episodes], 1)).float()      # [20, B, 4]
        whole = rollout(model, Replay(acts), start, 20, torch.Generator().manual_seed(1), deterministic=True,
                        sample_model=False)
        assert whole.valid.all()
        for q in (0.5, 0.9, 1.0):
            threshold = float(np.quantile(unc, q))
            cut = rollout(model, Replay(acts), start, 20, torch.Generator().manual_seed(1), deterministic=True,
                          sample_model=False, truncate=UncertaintyThreshold(threshold))
            np.testing.assert_array_equal(trusted_steps(whole.uncertainty.numpy(), threshold),
                                          cut.valid.sum(0).numpy())
    finally:
        model.cfg.uncertainty = "disagreement"


def test_trusted_steps_stop_before_the_first_step_over_the_threshold():
    from eval.video_evaluate import trusted_steps

    unc = np.array([[0.1, 0.9, 0.1], [0.2, 0.1, 0.1], [0.8, 0.1, 0.1]])      # [T=3, B=3]
    np.testing.assert_array_equal(trusted_steps(unc, 0.5), [2, 0, 3])
    np.testing.assert_array_equal(trusted_steps(unc, None), [3, 3, 3])


def test_training_on_unrolled_predictions_lowers_the_unrolled_error(reach):
    """The anti-drift stage: the dynamics trained on their own 4-step predictions predict 4 steps
    ahead better on held-out windows than the one-step fit did (by 10-15% on this tiny model)."""
    import copy

    ds, model, _ = reach
    model = copy.deepcopy(model)
    metrics = model.train_unrolled(ds.episodes, steps=4, epochs=8, generator=torch.Generator().manual_seed(0),
                                   lr=1e-3, batch=64)
    assert metrics["unrolled4_holdout_after"] < 0.95 * metrics["unrolled4_holdout_before"], metrics
    with pytest.raises(ReverieError, match="unroll_steps=500: no episode is longer"):
        model.train_unrolled(ds.episodes, steps=500, epochs=1, generator=torch.Generator())


def test_success_is_judged_on_the_frame_the_model_shows(reach):
    """success_on=judge (the default): the frame judge reads the decoded frame beside the episode's first
    frame, at every step; success_on=frame: the head reads the decoded frame's latent; latent: the predicted
    latent. The step's prediction is the same in every mode."""
    from worldmodels.video import VideoConfig

    ds, model, metrics = reach
    assert model.cfg.success_on == "judge" and metrics["judge_holdout_episodes"] == 1     # of 6
    assert metrics["judge_hold"] in HOLDS and int(model.judge.hold) == metrics["judge_hold"]
    e = ds.episodes[0]
    start = frames_to_obs(e.images[:4], e.states[:4])
    act = torch.from_numpy(e.actions[:4]).float()
    outs = {}
    for mode in ("judge", "latent", "frame"):
        model.cfg.success_on = mode
        state = model.init_state(start, torch.Generator().manual_seed(0))
        state, _ = model.step(state, act, generator=torch.Generator().manual_seed(0), deterministic=True)
        _, outs[mode] = model.step(state, act, generator=torch.Generator().manual_seed(1), deterministic=True)
    model.cfg.success_on = "judge"
    for out in outs.values():
        assert out.success.shape == (4,) and ((out.success >= 0) & (out.success <= 1)).all()
        torch.testing.assert_close(outs["latent"].obs, out.obs)                 # only the judge differs
    shown = outs["frame"].obs
    with torch.no_grad():
        z = model.encode_obs(shown, obs_to_frames(start, 32))        # relative to the episode's first frame
        head = torch.sigmoid(model.success_head(torch.cat([model.latent_norm(z), shown[:, -4:]], 1))).squeeze(1)
        judged = model.judge.probability(obs_to_frames(start, 32), obs_to_frames(shown, 32))
    torch.testing.assert_close(outs["frame"].success, head)               # the head read the shown frame
    torch.testing.assert_close(outs["judge"].success, judged)             # the judge: shown frame, first frame
    with pytest.raises(ReverieError, match="world_model.success_on: expected judge, latent, frame or objects"):
        VideoConfig(success_on="pixels").validate()


def test_a_checkpoint_from_before_the_judge_loads_only_where_the_judge_is_not_used(reach, tmp_path):
    ds, model, _ = reach
    blob_path = tmp_path / "video.pt"
    model.save(blob_path)
    blob = torch.load(blob_path, weights_only=True)
    blob["state_dict"] = {k: v for k, v in blob["state_dict"].items() if not k.startswith("judge.")}
    torch.save(blob, blob_path)
    with pytest.raises(ReverieError, match=r"video.pt: field 'state_dict': missing judge\.prior_logit, judge\.net"):
        load_model(blob_path)
    blob["config"]["success_on"] = "latent"
    torch.save(blob, blob_path)
    assert load_model(blob_path).cfg.success_on == "latent"
    del blob["config"]["success_on"]                        # written before the key existed: the head's
    torch.save(blob, blob_path)
    assert load_model(blob_path).cfg.success_on == "latent"


def test_real_rollouts_are_kept_and_reused_only_for_the_same_policy_file_and_protocol(tmp_path, monkeypatch):
    import agents.vla
    from agents.vla import Tokenizer, VLAConfig, VLAPolicy
    from envs.manipulation import TASKS
    from eval.video_evaluate import real_rollouts

    tok = Tokenizer.from_texts(TASKS["metaworld-reach"].templates("all"))
    torch.manual_seed(0)
    policy = VLAPolicy(VLAConfig(image_size=32, channels=8, hidden=32), tok)
    source = tmp_path / "vla.pt"
    torch.save(policy.save_blob(), source)
    cache = tmp_path / "real"
    wins, lengths, frames = real_rollouts(policy, str(source), "metaworld-reach", [20000, 20001], 32, 5, cache)
    assert len(list(cache.glob("*.npz"))) == 1 and len(frames) == lengths[0] + 1
    monkeypatch.setattr(agents.vla, "real_episodes", lambda *a, **k: pytest.fail("the simulator ran again"))
    again = real_rollouts(policy, str(source), "metaworld-reach", [20000, 20001], 32, 5, cache)
    np.testing.assert_array_equal(again[0], wins)
    np.testing.assert_array_equal(again[1], lengths)
    np.testing.assert_array_equal(np.stack(again[2]), np.stack(frames))
    for changed in ({"horizon": 6}, {"seeds": [20000]}):            # another protocol: the simulator runs
        kw = {"seeds": [20000, 20001], "horizon": 5, **changed}
        with pytest.raises(pytest.fail.Exception, match="the simulator ran again"):
            real_rollouts(policy, str(source), "metaworld-reach", kw["seeds"], 32, kw["horizon"], cache)
    torch.save({**policy.save_blob(), "note": "other weights"}, source)       # another policy file, too
    with pytest.raises(pytest.fail.Exception, match="the simulator ran again"):
        real_rollouts(policy, str(source), "metaworld-reach", [20000, 20001], 32, 5, cache)


def test_drawing_from_the_first_frame_keeps_the_scene_details_the_mean_frame_loses(reach):
    """The goal marker is a few pixels that differ from scene to scene: a decoder drawing from the data's mean
    frame must carry it through the latent, and loses it; drawing from the episode's first frame keeps it."""
    ds, model, _ = reach
    mean_model, _ = fit_video_model([ds], {**SMALL, "reference": "mean"}, seed=0)
    frames = torch.cat([torch.from_numpy(e.images) for e in ds.episodes]).permute(0, 3, 1, 2).float() / 255
    firsts = torch.cat([torch.from_numpy(e.images[:1]).expand(len(e.images), -1, -1, -1) for e in ds.episodes])
    firsts = firsts.permute(0, 3, 1, 2).float() / 255
    scenes = torch.stack([torch.from_numpy(e.images[0]) for e in ds.episodes]).float() / 255
    varies = scenes.std(0).amax(-1) > 0.1                      # [S, S]: pixels that differ from scene to scene
    detail = varies[None, None] & ((frames - firsts).abs().amax(1, keepdim=True) < 0.05)
    assert detail.sum() > 100                                   # ... where the arm has not come (yet)
    errors = {}
    for name, m in (("first", model), ("mean", mean_model)):
        err = (m.reconstruct(frames, firsts) - frames).abs().amax(1, keepdim=True)
        errors[name] = err[detail].mean().item()
    assert errors["first"] < 0.5 * errors["mean"], errors


def test_a_fit_cut_short_resumes_to_the_weights_of_one_that_never_stopped(reach, tmp_path):
    ds = reach[0]
    values = {**SMALL, "ae_epochs": 3, "max_epochs": 3, "patience": 10, "head_epochs": 1, "judge_steps": 10}
    whole, _ = fit_video_model([ds], values, seed=0)

    class Cut(Exception):
        pass

    def cut_after(stage_name, n):
        def progress(stage, epoch, value):
            if stage == stage_name and epoch == n:
                raise Cut
        return progress

    for stage, n in (("autoencoder", 2), ("dynamics", 2)):           # killed mid-autoencoder, then mid-dynamics
        with pytest.raises(Cut):
            fit_video_model([ds], values, seed=0, checkpoint=tmp_path / "fit", progress=cut_after(stage, n))
    resumed, _ = fit_video_model([ds], values, seed=0, checkpoint=tmp_path / "fit")
    for key, value in whole.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[key], value, rtol=0, atol=0, msg=key)


def test_reverie_fit_writes_a_video_model_with_its_judge_and_hold(reach, tmp_path, capsys):
    from envs.manipulation_data import write_manipulation
    from eval.cli import main

    ds, _, _ = reach
    data = tmp_path / "reach.hdf5"
    write_manipulation(data, ds.episodes, {"task": "metaworld-reach", "image_size": 32, "level": "mixed",
                                           "camera": "corner"})
    small = [f"world_model.{k}={v}" for k, v in SMALL.items() if k != "name" and k != "hidden"]
    argv = ["fit", "world_model=video", f"dataset={data}", *small, "world_model.ae_epochs=2",
            "world_model.max_epochs=2", "world_model.hidden=[32,32]", "threads=1", f"run_dir={tmp_path / 'fit'}"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "success judge on 1 held-out episodes" in out and "in a row" in out, out
    model = load_model(tmp_path / "fit" / "world_model.pt")
    assert model.cfg.success_on == "judge" and int(model.judge.hold) in HOLDS


def test_objects_in_the_latent_state_are_read_from_the_start_frame_and_carry_success(reach, tmp_path):
    """world_model.objects: the simulator's object and goal positions join the latent state (the dynamics predict
    them, a reader finds them in a start frame) and success_on=objects reads success from them."""
    from envs.manipulation import OBJECT_DIM

    ds, model, _ = reach
    obj = model.over_encoder(objects=True, success_on="objects", success_inputs="state", reader_steps=300,
                             head_epochs=300)                     # reach: success is the hand's, so the state
    torch.testing.assert_close(obj.ae.dec_in.weight, model.ae.dec_in.weight)           # the same frame encoder
    metrics = obj.fit_latent(ds.episodes, torch.Generator().manual_seed(0))
    assert {"reader_error_object_m", "reader_error_goal_m", "objects_success_tpr"} <= metrics.keys()

    starts = torch.cat([frames_to_obs(e.images[:1], e.states[:1]) for e in ds.episodes])
    truth = torch.from_numpy(np.stack([e.objects[0] for e in ds.episodes]))
    read = obj.reader.read(obs_to_frames(starts, 32))
    guess = truth.mean(0)                                                     # where a reader that sees nothing looks
    assert (read - truth).norm(dim=1).mean() < 0.5 * (guess - truth).norm(dim=1).mean()

    g = torch.Generator().manual_seed(0)
    state = obj.init_state(starts, g)
    assert state["latent"].shape == (len(starts), 2 * 32 + 4 + OBJECT_DIM)
    torch.testing.assert_close(state["latent"][:, -OBJECT_DIM:], read)
    state, out = obj.step(state, torch.from_numpy(np.stack([e.actions[0] for e in ds.episodes])), generator=g,
                          deterministic=True)
    torch.testing.assert_close(out.success, obj.objects_success(state["latent"][:, 2 * 32:]))
    # on the recorded positions, the head tells the successful steps from the others (reach: hand at the goal)
    p = torch.cat([obj.objects_success(obj.episode_extra(e)[1:]) for e in ds.episodes])
    label = torch.from_numpy(np.concatenate([e.success for e in ds.episodes]))
    assert ((p > 0.5) == label).float().mean() > 0.85 and p[label].mean() > p[~label].mean() + 0.4

    obj.save(tmp_path / "video.pt")
    back = load_model(tmp_path / "video.pt")
    assert back.cfg.objects and back.cfg.success_on == "objects"
    torch.testing.assert_close(back.reader.read(obs_to_frames(starts, 32)), read)
    e = ds.episodes[0]
    bare = Episode(e.images, e.states, e.actions, e.rewards, e.success, e.instruction, e.seed)     # no objects
    with pytest.raises(ReverieError, match="world_model.objects=true: episode seed 0 has no privileged/objects"):
        obj.fit_latent([bare], g)
    with pytest.raises(ReverieError, match="success_on=objects needs world_model.objects=true"):
        model.over_encoder(success_on="objects")
    with pytest.raises(ReverieError, match="success_inputs=relation: the success of metaworld-reach is the hand's"):
        model.over_encoder(objects=True, success_on="objects").fit_latent(ds.episodes, g)   # before any fitting
    with pytest.raises(ReverieError, match="object_mover=true needs world_model.objects=true"):
        model.over_encoder(object_mover=True)


def test_imagined_proprioception_stays_in_the_box_the_data_fill(reach):
    """MetaWorld clips the hand to its workspace; latent dynamics pushed by one action held for long may walk it
    out. Imagined x (proprioception) is kept within a box: the data's per-dimension range, set at fit."""
    ds, model, _ = reach
    states = np.concatenate([e.states for e in ds.episodes])
    torch.testing.assert_close(model.x_low, torch.from_numpy(states.min(0)))
    torch.testing.assert_close(model.x_high, torch.from_numpy(states.max(0)))
    e = ds.episodes[0]
    start = frames_to_obs(e.images[:1], e.states[:1]).expand(2, -1)
    push = torch.tensor([[1.0, 1.0, 1.0, 1.0], [-1.0, -1.0, -1.0, -1.0]])
    fitted = model.x_low.clone(), model.x_high.clone()
    low, high = start[0, -4:] - 0.01, start[0, -4:] + 0.01                 # a box the hand would soon leave
    for bounded in (True, False):
        model.x_low.copy_(low if bounded else torch.full((4,), -np.inf))
        model.x_high.copy_(high if bounded else torch.full((4,), np.inf))
        g = torch.Generator().manual_seed(0)
        state, seen = model.init_state(start, g), []
        for _ in range(50):
            state, out = model.step(state, push, generator=g, deterministic=True)
            seen.append(out.obs[:, -4:])
        inside = ((torch.stack(seen) >= low) & (torch.stack(seen) <= high)).all()
        assert inside if bounded else not inside
    model.x_low.copy_(fitted[0]), model.x_high.copy_(fitted[1])


def test_the_object_mover_moves_the_object_by_contact_alone_and_keeps_the_goal(reach):
    """object_mover: the object's change comes from the hand relative to the object, the gripper and the action
    only, so where the goal is cannot move it; the goal stays put; in reach the hand never touches the object
    and the mover learns to leave it where it is."""
    from envs.manipulation import OBJECT_DIM

    ds, model, _ = reach
    torch.manual_seed(0)                     # the new heads' initialisation, whatever ran before
    obj = model.over_encoder(objects=True, object_mover=True, success_on="objects", success_inputs="state",
                             reader_steps=300, head_epochs=30)
    metrics = obj.fit_latent(ds.episodes, torch.Generator().manual_seed(0))
    assert np.isfinite(metrics["object_mover_mse"])
    e = ds.episodes[0]
    x = obj.episode_extra(e)[:5]
    act = torch.from_numpy(e.actions[:5])
    moved_goal = x.clone()
    moved_goal[:, -3:] += 0.2
    hand = torch.zeros(5, 3)       # the free mover does not use the hand's change
    torch.testing.assert_close(obj.object_move(x, act, hand), obj.object_move(moved_goal, act, hand))
    g = torch.Generator().manual_seed(0)
    state = obj.init_state(frames_to_obs(e.images[:1], e.states[:1]), g)
    start = state["latent"][:, -OBJECT_DIM:].clone()
    for t in range(40):
        state, _ = obj.step(state, torch.from_numpy(e.actions[t:t + 1]), generator=g, deterministic=True)
    end = state["latent"][:, -OBJECT_DIM:]
    box = obj.x_low[-3:], obj.x_high[-3:]                                     # the read goal, kept in the box
    torch.testing.assert_close(end[:, 3:], torch.maximum(torch.minimum(start[:, 3:], box[1]), box[0]))
    # the untouched object, nearly: the free mover drifts 2-10 mm here over 40 steps, by the heads' initialisation
    assert (end[:, :3] - start[:, :3]).norm() < 0.02


def test_the_carry_mover_keeps_an_untouched_object_still_and_carries_a_held_one(reach):
    """mover=carry: the object's change is a gated share of the hand's. In reach, where the hand never touches
    it, the object stays put (far closer than the free mover's centimetre); on episodes where a closed gripper
    holds it, the object goes where the hand goes, a lift included."""
    from envs.manipulation import OBJECT_DIM

    ds, model, _ = reach
    g = torch.Generator().manual_seed(0)
    carry = model.over_encoder(objects=True, object_mover=True, mover="carry", success_on="objects",
                               success_inputs="state", reader_steps=300, head_epochs=30)
    assert np.isfinite(carry.fit_latent(ds.episodes, g)["object_mover_mse"])
    e = ds.episodes[0]
    state = carry.init_state(frames_to_obs(e.images[:1], e.states[:1]), g)
    for t in range(40):
        state, _ = carry.step(state, torch.from_numpy(e.actions[t:t + 1]), generator=g, deterministic=True)
        if t == 0:          # where the first step put it: the read position, brought into the data's box
            start = state["latent"][:, -OBJECT_DIM:].clone()
    assert (state["latent"][:, -OBJECT_DIM:-3] - start[:, :3]).norm() < 1e-3

    # held (gripper closed, the object at the hand) or not (gripper open, the object 30 cm away), hands wandering
    rng = np.random.default_rng(0)
    episodes, xs = [], []
    for k in range(40):
        T, held = 60, k % 2 == 0
        hand = np.cumsum(rng.normal(0, 0.01, (T + 1, 3)), 0) + [0.0, 0.6, 0.1]
        grip = np.full((T + 1, 1), 1.0 if held else -1.0)
        obj = hand.copy() if held else np.broadcast_to(hand[0] + [0.3, 0.0, 0.0], hand.shape)
        x = np.concatenate([hand, grip, obj, np.broadcast_to([0.1, 0.8, 0.2], (T + 1, 3))], 1).astype(np.float32)
        actions = np.concatenate([np.diff(hand, axis=0) * 100, grip[1:]], 1).astype(np.float32)
        episodes.append(Episode(None, x[:, :4], actions, np.zeros(T, np.float32), np.zeros(T, bool), "", k, x[:, 4:]))
        xs.append(torch.from_numpy(x))
    carry.fit_mover(episodes, g, xs)
    lift = torch.tensor([[0.0, 0.0, 0.02]])
    x_held, x_free = xs[0][:1], xs[1][:1]
    a_held = torch.tensor([[0.0, 0.0, 2.0, 1.0]])
    a_free = torch.tensor([[0.0, 0.0, 2.0, -1.0]])
    torch.testing.assert_close(carry.object_move(x_held, a_held, lift), lift, atol=2e-3, rtol=0)
    assert carry.object_move(x_free, a_free, lift).abs().max() < 2e-3
    with pytest.raises(ReverieError, match="world_model.mover: expected free, carry or matrix, got 'drag'"):
        model.over_encoder(objects=True, object_mover=True, mover="drag")

    # trained on its own predictions, the dynamics are scored on what a step takes from them (latents and the
    # proprioception), not on positions the mover and the goal own: within one episode the goal and the untouched
    # puck do not move at all, and the least error there, in units of that spread, would be in the thousands
    unrolled = carry.train_unrolled(ds.episodes[:1], 3, 1, g)
    assert 0 < unrolled["unrolled3_holdout_before"] < 1 and 0 < unrolled["unrolled3_holdout_after"] < 1


def hinged_episodes(n: int = 40, T: int = 40, radius: float = 0.2, seed: int = 0):
    """Episodes of a door's handle on a hinge: the hand holds the handle (gripper closed) and moves at random, and
    the handle takes only the part of the hand's move along the arc's tangent. The hinge is fixed relative to the
    goal, so the handle's offset from the goal says the door's angle, and so the tangent. Returns the episodes and
    the hinge."""
    rng = np.random.default_rng(seed)
    goal, hinge = np.array([0.0, 0.5, 0.1]), np.array([-0.2, 0.5, 0.1])
    episodes = []
    for k in range(n):
        angle = rng.uniform(0, np.pi / 2)
        handle = hinge + radius * np.array([np.cos(angle), np.sin(angle), 0.0])
        hand = handle + rng.normal(0, 0.005, 3)
        rows, actions = [], []
        for _ in range(T):
            rows.append(np.concatenate([hand, [0.3], handle, goal]))
            move = rng.normal(0, 0.01, 3)
            tangent = np.array([-np.sin(angle), np.cos(angle), 0.0])
            angle += tangent @ move / radius
            hand = hand + move
            handle = hinge + radius * np.array([np.cos(angle), np.sin(angle), 0.0])
            actions.append(np.concatenate([move * 100, [1.0]]))
        rows.append(np.concatenate([hand, [0.3], handle, goal]))
        x = np.array(rows, np.float32)
        episodes.append(Episode(None, x[:, :4], np.array(actions, np.float32), np.zeros(T, np.float32),
                                np.zeros(T, bool), "", k, x[:, 4:]))
    return episodes, hinge


def test_the_hand_movers_are_fitted_apart_and_averaged_and_an_older_single_one_still_loads(reach, tmp_path):
    """hand_members: several hand movers, each from its own initial weights and batch order, and the hand moves by
    their mean (one fit's closed-loop quirks are not the model's). A checkpoint from before, with its one net under
    hand_net.<layer>, loads as one member and moves the hand as it did."""
    _, model, _ = reach
    episodes, _ = hinged_episodes(n=10, T=20)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    hm = model.over_encoder(objects=True, success_on="objects", hand_mover=True, hand_members=3, head_epochs=3,
                            hand_unroll_updates=3)
    mse = hm.fit_hand(episodes, g)
    assert len(hm.hand_net) == 3 and np.isfinite(mse)
    first = [net[0].weight for net in hm.hand_net]
    assert not torch.equal(first[0], first[1]) and not torch.equal(first[1], first[2])
    x = hm.episode_extra(episodes[0])[:5]
    a = torch.from_numpy(episodes[0].actions[:5])
    with torch.no_grad():
        each = [hm.hand_out.inverse(net(hm.hand_in(hm.hand_input(x, a)))) for net in hm.hand_net]
        torch.testing.assert_close(hm.hand_move(x, a), torch.stack(each).mean(0))
    hm.save(tmp_path / "three.pt")
    with torch.no_grad():
        torch.testing.assert_close(load_model(tmp_path / "three.pt").hand_move(x, a), hm.hand_move(x, a))

    one = model.over_encoder(objects=True, success_on="objects", hand_mover=True, hand_members=1, head_epochs=3,
                             hand_horizon=1)
    one.fit_hand(episodes, g)
    one.save(tmp_path / "one.pt")
    blob = torch.load(tmp_path / "one.pt", weights_only=False)         # as written before hand_members existed
    for key in ("hand_members", "hand_horizon", "hand_unroll_updates"):
        del blob["config"][key]
    blob["state_dict"] = {k.replace("hand_net.0.", "hand_net.", 1): v for k, v in blob["state_dict"].items()}
    assert "hand_net.0.weight" in blob["state_dict"]
    torch.save(blob, tmp_path / "older.pt")
    older = load_model(tmp_path / "older.pt")
    assert older.cfg.hand_members == 1 and older.cfg.hand_horizon == 1
    with torch.no_grad():
        torch.testing.assert_close(older.hand_move(x, a), one.hand_move(x, a))
    with pytest.raises(ReverieError, match="world_model.hand_members: expected an integer >= 1, got 0"):
        model.over_encoder(objects=True, hand_mover=True, hand_members=0)


def lagging_hand_episodes(n: int = 30, T: int = 60, seed: int = 0):
    """A hand that lags its target, as MetaWorld's follows its mocap: each action moves the target by 1 cm per
    unit and the hand closes half its distance to the target per step. Actions are drawn afresh each step, so
    one step's change shows only half the action's stride; the rest comes later, by way of a lag no input shows.
    Returns the episodes and their ``x`` (hand, gripper, a still object, the goal)."""
    rng = np.random.default_rng(seed)
    episodes, xs = [], []
    for k in range(n):
        actions = rng.uniform(-1, 1, (T, 4)).astype(np.float32)
        hand = target = np.array([0.0, 0.6, 0.2])
        rows = [hand]
        for a in actions:
            target = target + 0.01 * a[:3]
            hand = hand + 0.5 * (target - hand)
            rows.append(hand)
        hand = np.array(rows)
        x = np.concatenate([hand, np.full((T + 1, 1), 1.0), np.broadcast_to([0.1, 0.7, 0.0], (T + 1, 3)),
                            np.broadcast_to([0.0, 0.8, 0.0], (T + 1, 3))], 1).astype(np.float32)
        episodes.append(Episode(None, x[:, :4], actions, np.zeros(T, np.float32), np.zeros(T, bool), "", k, x[:, 4:]))
        xs.append(torch.from_numpy(x))
    return episodes, xs


def test_a_hand_mover_fine_tuned_on_unrolls_keeps_a_lagging_hand_s_stride_open_loop(reach):
    """hand_horizon: a hand mover fitted one step at a time learns half the stride of a hand that lags its target
    (the rest of each action's move shows in later steps, which that step's inputs cannot foresee), so driven open
    loop by its own predictions it falls behind the real hand. Fine-tuned on 16-step unrolls it keeps the stride:
    on episodes it has not seen, its hand ends 60 steps later at most half as far from the real one."""
    _, model, _ = reach
    train, train_x = lagging_hand_episodes()
    test, test_x = lagging_hand_episodes(n=20, seed=1)
    ends = {}
    for horizon in (1, 16):
        torch.manual_seed(0)
        hm = model.over_encoder(objects=True, success_on="objects", hand_mover=True, hand_horizon=horizon,
                                hand_unroll_updates=300, head_epochs=30)
        hm.fit_hand(train, torch.Generator().manual_seed(0), train_x)
        X = torch.stack(test_x, 1)                                   # [T+1, n, 10]
        A = torch.stack([torch.from_numpy(e.actions) for e in test], 1)
        with torch.no_grad():
            hand = X[0, :, :4]
            for t in range(len(A)):
                hand = hand + hm.hand_move(torch.cat([hand, X[t, :, 4:]], 1), A[t])
        ends[horizon] = (hand[:, :3] - X[-1, :, :3]).norm(dim=1).mean().item()
    assert ends[16] < 0.5 * ends[1], ends
    with pytest.raises(ReverieError, match="world_model.hand_horizon, hand_unroll_updates: expected integers"):
        model.over_encoder(objects=True, hand_mover=True, hand_horizon=0)


def test_the_matrix_mover_turns_a_held_handle_along_its_hinge_where_the_carry_gate_cannot(reach, tmp_path):
    """mover=matrix: the object's change is a 3x3 map of the hand's, the map read off the contact features and the
    object's offset from the goal. On a hinged handle it learns the projection on the arc's tangent, which turns
    as the door opens: a pull along the radius moves the handle hardly at all, a push along the tangent moves it
    the whole way. A gate per axis can only scale the hand's move along x, y and z, so it misses the turned tangent
    by far more. ``add_object_mover`` gives a fitted model the mover, and it survives a save and load."""
    ds, model, _ = reach
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    episodes, hinge = hinged_episodes()
    base = model.over_encoder(objects=True, success_on="objects", success_inputs="state", head_epochs=60)
    errors = {form: base.add_object_mover(episodes, g, form) for form in ("carry", "matrix")}
    assert base.cfg.mover == "matrix" and base.cfg.object_mover
    assert errors["matrix"] < 0.01 and errors["carry"] > 20 * errors["matrix"], errors

    goal = torch.tensor([0.0, 0.5, 0.1])
    for angle in (0.3, 1.2):
        radial = torch.tensor([np.cos(angle), np.sin(angle), 0.0], dtype=torch.float32)
        tangent = torch.tensor([-np.sin(angle), np.cos(angle), 0.0], dtype=torch.float32)
        handle = torch.from_numpy(hinge).float() + 0.2 * radial
        x = torch.cat([handle, torch.tensor([0.3]), handle, goal])[None]
        for move, share in ((tangent, 1.0), (radial, 0.0)):
            hand_change = 0.01 * move[None]
            action = torch.cat([hand_change * 100, torch.ones(1, 1)], 1)
            with torch.no_grad():
                got = base.object_move(x, action, hand_change)
            torch.testing.assert_close(got, share * hand_change, atol=2.5e-3, rtol=0)

    path = tmp_path / "matrix.pt"
    base.save(path)
    loaded = load_model(path)
    with torch.no_grad():
        torch.testing.assert_close(loaded.object_move(x, action, hand_change), base.object_move(x, action, hand_change))


def test_the_relation_head_reads_success_off_the_object_and_goal_not_a_closed_gripper(reach):
    """success_inputs=relation: MetaWorld's success (push, drawer-open, ...) is the object's distance to the goal.
    In data where the gripper closes exactly when the drawer is being opened, the gripper says success as well
    as the handle does; a policy that closes the gripper without opening the drawer must still fail. The head on
    the relation reads no gripper and no hand, so it calls success on the handle's distance alone."""
    from worldmodels.base import fit_identity
    from worldmodels.video import VideoConfig

    ds, model, _ = reach
    head = model.over_encoder(objects=True, success_on="objects", head_epochs=60)
    head.spec = dataclasses.replace(head.spec, task="metaworld-drawer-open")
    rng = np.random.default_rng(0)

    def episode(k, opened):
        T = 40
        goal = np.array([rng.uniform(-0.1, 0.1), rng.uniform(0.5, 0.6), 0.09])
        pull = np.clip(np.arange(T + 1) / 30, 0, 1)[:, None] if opened else np.zeros((T + 1, 1))
        handle = goal + [0, 0.16, 0] - pull * [0, 0.16, 0]
        hand = handle + rng.normal(0, 0.01, (T + 1, 3))
        grip = np.where(np.arange(T + 1)[:, None] >= 5, 0.3, 1.0) if opened else np.ones((T + 1, 1))
        x = np.concatenate([hand, grip, handle, np.broadcast_to(goal, (T + 1, 3))], 1).astype(np.float32)
        success = np.linalg.norm(handle - goal, axis=1)[1:] <= 0.03
        return Episode(None, x[:, :4], np.zeros((T, 4), np.float32), np.zeros(T, np.float32), success, "", k,
                       x[:, 4:]), torch.from_numpy(x)

    episodes, xs = zip(*(episode(k, k % 2 == 0) for k in range(40)))
    metrics = head.fit_object_success(list(episodes), list(xs), list(range(32)), list(range(32, 40)),
                                      torch.Generator().manual_seed(0))
    assert metrics["objects_success_tpr"] == 1.0 and metrics["objects_success_fpr"] == 0.0
    # the gripper closed at the handle, the drawer shut: not a success; the drawer pulled out: a success
    shut = torch.cat([x[10:] for x in xs[1::2]])
    shut[:, 3] = 0.3
    assert (head.objects_success(shut) < 0.5).all()
    opened = torch.cat([x[32:] for x in xs[::2]])
    opened[:, 3] = 1.0
    assert (head.objects_success(opened) > 0.5).all()
    # whatever the hand and the gripper do, the verdict is the same (the older head's is not)
    every = torch.cat(xs)
    moved = every.clone()
    moved[:, :4] = torch.from_numpy(rng.uniform([-0.2, 0.4, 0.0, 0.0], [0.2, 0.9, 0.3, 1.0], (len(every), 4))).float()
    torch.testing.assert_close(head.objects_success(moved), head.objects_success(every))
    # a model fitted with the older head takes the relation head by refitting the head alone
    older = model.over_encoder(objects=True, success_on="objects", success_inputs="state", head_epochs=60)
    older.spec = head.spec
    metrics = older.refit_object_success(list(episodes), torch.Generator().manual_seed(0), success_inputs="relation")
    assert older.cfg.success_inputs == "relation" and older.object_success[0].in_features == 7
    assert (older.objects_success(shut) < 0.5).all() and (older.objects_success(opened) > 0.5).all()
    # an option with no effect leaves a fit's name alone: models cached before it keep their keys
    assert "success_inputs" not in fit_identity(VideoConfig()) and "success_inputs" in fit_identity(
        VideoConfig(objects=True))


def test_the_hand_mover_follows_the_action_slowed_by_what_it_holds(reach):
    """hand_mover: the proprioception's change comes from a net on the action, the gripper, the hand relative to
    the object and the object relative to the goal. A step's imagined proprioception is exactly that change
    (kept in the data's box); fitted where a held object drags on the hand, it moves a free hand by the whole
    action and a holding one by a third of it, as MetaWorld's drawer slows the hand that pulls it."""
    ds, model, _ = reach
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    hm = model.over_encoder(objects=True, success_on="objects", success_inputs="state", hand_mover=True,
                            hand_horizon=1, reader_steps=300, head_epochs=100)
    metrics = hm.fit_latent(ds.episodes, g)
    assert np.isfinite(metrics["hand_mover_mse"]) and metrics["hand_mover_mse"] < 0.5
    e = ds.episodes[0]
    state = hm.init_state(frames_to_obs(e.images[:1], e.states[:1]), g)
    x_now, act = state["latent"][:, 2 * 32:], torch.from_numpy(e.actions[:1])
    state, out = hm.step(state, act, generator=g, deterministic=True)
    expected = torch.maximum(torch.minimum(x_now[:, :4] + hm.hand_move(x_now, act), hm.x_high[:4]), hm.x_low[:4])
    torch.testing.assert_close(state["latent"][:, 2 * 32:2 * 32 + 4], expected)
    torch.testing.assert_close(out.obs[:, -4:], expected)
    # unrolled, the dynamics are scored on the latents alone: the positions and the hand are the movers'
    unrolled = hm.train_unrolled(ds.episodes[:1], 3, 1, g)
    assert 0 < unrolled["unrolled3_holdout_before"] < 1

    rng = np.random.default_rng(0)
    episodes, xs = [], []
    for k in range(40):
        T, held = 60, k % 2 == 0
        actions = rng.uniform(-1, 1, (T, 4)).astype(np.float32)
        actions[:, 3] = 1.0 if held else -1.0
        hand = np.cumsum(np.concatenate([[[0.0, 0.6, 0.1]], actions[:, :3] * (0.003 if held else 0.01)]), 0)
        grip = np.full((T + 1, 1), 0.3 if held else 1.0)
        obj = hand.copy() if held else hand + [0.3, 0.0, 0.0]
        goal = np.broadcast_to([0.0, 0.5, 0.1], (T + 1, 3))
        x = np.concatenate([hand, grip, obj, goal], 1).astype(np.float32)
        episodes.append(Episode(None, x[:, :4], actions, np.zeros(T, np.float32), np.zeros(T, bool), "", k, x[:, 4:]))
        xs.append(torch.from_numpy(x))
    hm.fit_hand(episodes, g, xs)
    pull = torch.tensor([[0.0, -1.0, 0.0, 1.0]])
    free_pull = torch.tensor([[0.0, -1.0, 0.0, -1.0]])
    with torch.no_grad():
        held_move = hm.hand_move(xs[0][30:31], pull)[0, :3]
        free_move = hm.hand_move(xs[1][30:31], free_pull)[0, :3]
    torch.testing.assert_close(free_move, torch.tensor([0.0, -0.01, 0.0]), atol=1.5e-3, rtol=0)
    torch.testing.assert_close(held_move, torch.tensor([0.0, -0.003, 0.0]), atol=1.5e-3, rtol=0)
    with pytest.raises(ReverieError, match="hand_mover=true needs world_model.objects=true"):
        model.over_encoder(hand_mover=True)


def test_a_bfloat16_autoencoder_fit_reconstructs_as_the_float32_one_does(reach):
    """``world_model.precision=bfloat16`` runs the autoencoder's updates under autocast (twice the frames a
    second on a CPU with bfloat16: tests/bench/bench_video.py); the weights stay float32 and contiguous, so the
    fitted model rolls out as a float32 one does. The fixture's fit is the float32 one, with the same settings."""
    from worldmodels.video import VideoConfig, VideoWorldModel

    ds, _, metrics = reach
    small = {k: v for k, v in SMALL.items() if k != "name"} | {"hidden": (64, 64), "precision": "bfloat16"}
    torch.manual_seed(0)                # as fit_video_model seeds the fixture's: the same initial weights
    model = VideoWorldModel(3 * 32 * 32 + 4, 4, VideoConfig(**small), task="metaworld-reach")
    error = model.fit_autoencoder(ds.episodes, torch.Generator().manual_seed(0))
    assert all(p.dtype == torch.float32 and p.is_contiguous() for p in model.ae.parameters())
    frames = torch.cat([torch.from_numpy(e.images) for e in ds.episodes]).float() / 255
    mean_frame_mse = (frames - frames.mean(0)).pow(2).mean().item()
    assert error < 0.5 * mean_frame_mse, (error, mean_frame_mse)
    assert error < 1.5 * metrics["reconstruction_mse"], (error, metrics)
    with pytest.raises(ReverieError, match="world_model.precision: expected float32, bfloat16 or auto, got 'half'"):
        VideoConfig(precision="half").validate()
