"""The real episodes the loop's judge learns from (every task's expert 50, medium 25, poor 25 and misdirected 25,
seeds 0-3, the loop's cached files) and the fifth held out, as ``add_judge.py`` split them."""
import torch

from envs.builtin import cache_dir
from envs.manipulation import TASKS
from envs.manipulation_data import make_manipulation, read_manipulation
from worldmodels.judge import split_episodes


# the loop's cached files per task: (level, episodes, seed)
LOOP_LEVELS = (("expert", 50, 0), ("medium", 25, 1), ("poor", 25, 2), ("misdirected", 25, 3))


def loop_episodes(task: str) -> list:
    """Every level's episodes of ``task`` (``metaworld-…``), from the cache (a stale file is made again)."""
    return [e for level, n, seed in LOOP_LEVELS
            for e in read_manipulation(make_manipulation(task, level, n, seed, cache_dir())[0]).episodes]


def judge_episodes(generator: torch.Generator) -> tuple[list, list, dict]:
    """(held-out, training, task of each episode by ``id``), split with ``generator`` (add_judge.py: seeded 0)."""
    episodes, task_of = [], {}
    for t in TASKS:
        for e in loop_episodes(t):
            episodes.append(e)
            task_of[id(e)] = t
    hold, train = split_episodes(episodes, 0.2, generator)
    return hold, train, task_of
