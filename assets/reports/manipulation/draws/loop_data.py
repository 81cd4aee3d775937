"""The real episodes the loop's judge learns from (every task's expert 50, medium 25, poor 25 and misdirected 25,
seeds 0-3, the loop's cached files) and the fifth held out, as ``add_judge.py`` split them."""
import numpy as np
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


def expert_steps(model, episodes: list, n: int = 16, cap: int = 100):
    """The first ``n`` of a task's ``loop_episodes`` (its expert episodes come first), cut to the shortest of them
    (at most ``cap`` steps), for driving a model open loop with their own actions. Returns (the episodes, ``x`` along
    them ``[T+1, n, extra]`` (``model.episode_extra``), the actions ``[T, n, 4]``, and the steps at a quarter, half,
    three quarters and the end, ``T`` last)."""
    chosen = episodes[:n]
    T = min(cap, min(len(e) for e in chosen))
    X = torch.stack([model.episode_extra(e)[:T + 1] for e in chosen], 1)
    A = torch.stack([torch.from_numpy(e.actions[:T]).float() for e in chosen], 1)
    return chosen, X, A, [T * k // 4 for k in (1, 2, 3, 4)]


def last_changes(x: torch.Tensor) -> torch.Tensor:
    """The proprioception's change into each step of ``x`` ``[T+1, extra]`` (none into the first)."""
    from worldmodels.video import PROPRIO

    d = x[1:, :PROPRIO] - x[:-1, :PROPRIO]
    return torch.cat([torch.zeros_like(d[:1]), d])


def fit_hand_net(model, pairs: list, momentum: bool, seed: int):
    """A hand mover of ``VideoWorldModel.hand_move``'s form (with ``momentum``, also reading the proprioception's
    last change) fitted one step at a time as ``fit_hand`` does, on ``pairs`` of (episode, its ``episode_extra``);
    its initial weights and batches seeded ``seed``. Returns (the net, ``step(x, last, action)`` -> the hand's
    change, the output normaliser, the one-step error in units of the change's spread, the generator)."""
    import torch.nn.functional as F

    from worldmodels.ensemble import Normalizer
    from worldmodels.video import PROPRIO, _mlp

    def inputs(x, last, a):
        return torch.cat([model.hand_input(x, a)] + ([last] if momentum else []), 1)

    torch.manual_seed(seed)
    inp = torch.cat([inputs(x[:-1], last_changes(x)[:-1], torch.from_numpy(e.actions).float()) for e, x in pairs])
    out = torch.cat([x[1:, :PROPRIO] - x[:-1, :PROPRIO] for _, x in pairs])
    net, n_in, n_out = _mlp(inp.shape[1], PROPRIO), Normalizer(inp.shape[1]), Normalizer(PROPRIO)
    n_in.fit(inp)
    n_out.fit(out)
    generator = torch.Generator().manual_seed(seed)
    with torch.enable_grad():
        mse = model._train_head(net, n_in(inp), n_out(out), F.mse_loss, generator)
    return net, lambda x, last, a: n_out.inverse(net(n_in(inputs(x, last, a)))), n_out, mse, generator


def amend_model(argv: list[str], amend, seed: int = 0) -> dict:
    """``argv`` = MODEL OUT TASK ...: load MODEL, call ``amend(model, episodes, generator)`` on the real episodes of
    those tasks (every level, ``loop_episodes``; the generator and any new part's initial weights seeded ``seed``),
    which changes part of the model and returns its figures; save the model at OUT and the figures, with the
    seconds taken, beside it."""
    import json
    import time
    from pathlib import Path

    from worldmodels.registry import load_model

    base, out, tasks = Path(argv[0]), Path(argv[1]), argv[2:]
    model = load_model(base)
    episodes = [e for task in tasks for e in loop_episodes(f"metaworld-{task}")]
    t0 = time.perf_counter()
    torch.manual_seed(seed)         # any new part's initial weights, so that a rerun makes the same model
    metrics = dict(amend(model, episodes, torch.Generator().manual_seed(seed)))
    metrics["seconds"] = time.perf_counter() - t0
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    (out.parent / "metrics.json").write_text(json.dumps(metrics, indent=1))
    print(json.dumps(metrics, indent=1))
    return metrics


def judge_episodes(generator: torch.Generator) -> tuple[list, list, dict]:
    """(held-out, training, task of each episode by ``id``), split with ``generator`` (add_judge.py: seeded 0)."""
    episodes, task_of = [], {}
    for t in TASKS:
        for e in loop_episodes(t):
            episodes.append(e)
            task_of[id(e)] = t
    hold, train = split_episodes(episodes, 0.2, generator)
    return hold, train, task_of


def probe_args(argv: list[str], needs: str, ok) -> tuple:
    """``argv`` = TASK MODEL POLICY [RESETS] of a one-policy probe (``where.py``, ``replay_movers.py``): (the task,
    the model's path, the model, the policy's path, the reset seeds: RESETS of them from 20000, default 20). The
    model must pass ``ok(model)`` (``needs`` says what it must be)."""
    from pathlib import Path

    from worldmodels.registry import load_model

    task, model_path, policy_path = argv[:3]
    n = int(argv[3]) if len(argv) > 3 else 20
    model = load_model(Path(model_path))
    if not ok(model):
        raise SystemExit(f"{model_path}: expected {needs}")
    return task, model_path, model, policy_path, list(range(20000, 20000 + n))


def real_rollouts(task: str, policy_path: str, seeds: list[int], steps: int):
    """One VLA policy closed loop in MetaWorld (``task`` without its ``metaworld-`` prefix), acting
    deterministically from each of ``seeds`` for ``steps`` steps. Returns (the policy's name, its start frames and
    proprioception and instructions as ``reset_starts`` gives them, ``x`` ``[steps, n, 10]``: the proprioception,
    object and goal after each step, the actions ``[steps, n, 4]``, MetaWorld's success ``[steps, n]``)."""
    from envs.manipulation import ManipulationEnv
    from eval.video_evaluate import load_vla_policies, reset_starts

    name, _, vla = load_vla_policies([policy_path])[0]
    frames0, states0, texts = reset_starts(f"metaworld-{task}", seeds, 64)
    env = ManipulationEnv(f"metaworld-{task}", 64, max_episode_steps=steps)
    n = len(seeds)
    x, actions, success = np.zeros((steps, n, 10), np.float32), np.zeros((steps, n, 4), np.float32), \
        np.zeros((steps, n), bool)
    for b, seed in enumerate(seeds):
        obs = env.reset(seed)
        vla.reset(seed=0)
        for t in range(steps):
            a = vla.select_action({"image": torch.from_numpy(obs["image"])[None],
                                   "state": torch.from_numpy(obs["state"])[None], "instruction": [texts[b]]})[0].numpy()
            actions[t, b] = a
            obs, _, _, _, info = env.step(a)
            x[t, b] = np.concatenate([obs["state"], env.objects()])
            success[t, b] = info["success"]
    env.close()
    return name, (frames0, states0, texts), x, actions, success
