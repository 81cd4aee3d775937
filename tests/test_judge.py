"""The success judge: it learns success from frames alone, reads the episode's first frame, and reports
held-out rates per frame and per episode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from envs.manipulation_data import Episode
from worldmodels.judge import HOLDS, SuccessJudge, choose_hold, fit_judge, held, judge_rates, split_episodes

S = 16


def episode(rng: np.random.Generator, success: bool, T: int = 12) -> Episode:
    """A gray table with a green goal marker and a red puck that slides along a row; success: the puck on
    the marker (the last frames of a successful episode); a failed episode's puck stops one cell short."""
    goal = rng.integers(2, S - 4, size=2)
    images = np.full((T + 1, S, S, 3), 90, np.uint8)
    images += rng.integers(0, 20, size=images.shape, dtype=np.uint8)
    images[:, goal[0]:goal[0] + 2, goal[1]:goal[1] + 2] = (0, 200, 0)
    end = goal[1] if success else goal[1] - 3
    cols = np.clip(np.round(np.linspace(0, end, T + 1)).astype(int), 0, S - 2)
    cols[-4:] = end
    for t, c in enumerate(cols):
        images[t, goal[0]:goal[0] + 2, max(c, 0):max(c, 0) + 2] = (200, 0, 0)
    hit = np.array([success and t >= T + 1 - 4 for t in range(1, T + 1)])
    return Episode(images, np.zeros((T + 1, 4), np.float32), np.zeros((T, 4), np.float32),
                   np.zeros(T, np.float32), hit, "push the puck to the goal", 0)


def test_the_judge_learns_success_from_frames_and_reports_held_out_rates():
    rng = np.random.default_rng(0)
    episodes = [episode(rng, success=i % 2 == 0) for i in range(60)]
    torch.manual_seed(0)
    judge = SuccessJudge(S, channels=8)
    hold, train = split_episodes(episodes, 0.2, torch.Generator().manual_seed(0))
    assert len(hold) == 12 and len(train) == 48 and not {id(e) for e in hold} & {id(e) for e in train}
    fit_judge(judge, train, torch.Generator().manual_seed(0), steps=400, batch=32, lr=3e-3)
    frames = [len(e.images) for e in train]
    rate = sum(int(e.success.sum()) for e in train) / sum(frames)
    assert judge.prior_logit.item() == pytest.approx(np.log(rate / (1 - rate)), rel=1e-5)   # odds of the data
    rates = judge_rates(judge, hold)
    assert rates["holdout_episodes"] == 12
    assert rates["episode_tpr"] >= 0.9 and rates["episode_fpr"] <= 0.1, rates
    assert rates["frame_tpr"] >= 0.8 and rates["frame_fpr"] <= 0.1, rates
    # the rates count what they claim: a judge that calls everything a success has frame FPR 1
    always = SuccessJudge(S, channels=8)
    torch.nn.init.zeros_(always.net[-1].weight)
    torch.nn.init.constant_(always.net[-1].bias, 5.0)
    fresh = [episode(rng, success=i % 2 == 0) for i in range(6)]
    assert judge_rates(always, fresh) == {"holdout_episodes": 6.0, "frame_tpr": 1.0, "frame_fpr": 1.0,
                                          "episode_tpr": 1.0, "episode_fpr": 1.0}
    shown = judge_rates(always, fresh, view=lambda f, first: f)
    assert shown["frame_fpr_shown"] == 1.0
    # with holds: 12 judged frames an episode hold 10 in a row, not 20
    holding = judge_rates(always, fresh, view=lambda f, first: f, holds=HOLDS)
    assert holding["episode_fpr_hold10"] == holding["episode_tpr_shown_hold10"] == 1.0
    assert holding["episode_tpr_hold20"] == holding["episode_fpr_shown_hold20"] == 0.0


def test_a_success_must_hold_for_as_many_steps_in_a_row_as_asked():
    hit = np.array([[1, 1, 0, 1],
                    [0, 1, 0, 1],
                    [1, 1, 0, 0],
                    [1, 0, 1, 1]], bool)              # [T=4, episodes=4]; longest runs 2, 3, 1, 2
    assert held(hit, 1).tolist() == [True, True, True, True]
    assert held(hit, 2).tolist() == [True, True, False, True]
    assert held(hit, 3).tolist() == [False, True, False, False]
    assert held(hit[:, 0], 2) and not held(hit[:, 0], 3)                 # one episode: [T]


def test_the_fit_keeps_the_hold_that_separates_held_out_episodes_best():
    def rates(tpr, fpr):
        keys = {}
        for k, t, f in zip(HOLDS, tpr, fpr):
            suffix = "" if k == 1 else f"_hold{k}"
            keys[f"episode_tpr_shown{suffix}"], keys[f"episode_fpr_shown{suffix}"] = t, f
        return keys

    # a slipping judge: one frame says success on most failures, five in a row seldom
    assert choose_hold(rates([1.0, 1.0, 0.95, 0.8, 0.5], [0.6, 0.3, 0.1, 0.05, 0.0]), "_shown") == 5
    assert choose_hold(rates([1.0, 1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0]), "_shown") == 1   # a tie
    assert choose_hold({}, "_shown") == 1


def test_the_judge_needs_both_kinds_of_frame():
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match="need both successful and unsuccessful frames"):
        fit_judge(SuccessJudge(S, 8), [episode(rng, False) for _ in range(4)], torch.Generator(), steps=1)
