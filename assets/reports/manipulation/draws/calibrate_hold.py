"""Choose the judge's hold per task on the model's own imagination of labelled episodes, not on real frames.

The fit chooses the hold (success frames in a row) on held-out real episodes seen through the autoencoder
(``VideoWorldModel.fit_judge``). The false verdicts of a ranking come from imagined frames, which the dynamics
draw; this chooses the hold where they arise. For each task, on 20 fresh scenes (reset seeds 40000-40019, in
no dataset the model or the judge saw, and apart from the ranking's 20000-20049), four 150-step action
sequences are played open loop in MetaWorld, which labels each (success at some step), and in the model from
the same first frame at its mean: the scripted expert's actions; those with Gaussian noise of std 0.5 and
of std 1 (clipped); and the expert's actions for another scene (seed + 20), which move with purpose and
mostly miss. At each hold the imagined verdicts' true and false positive rates against the labels; the hold
with the best Youden's J (the shorter on a tie) is the task's. Nothing here sees the ranked zoo.

With ``--apply DIR``, the zoo's ranking in ``DIR/<task>/results.json`` (``reverie evaluate``, which records
every policy's imagined success at each hold) is recomputed at the task's calibrated hold.

Usage (repository root): python assets/reports/manipulation/draws/calibrate_hold.py MODEL OUT.json TASK...
    [--apply RANK_DIR]
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
from envs.atomic_io import write_json
from envs.manipulation import ManipulationEnv
from eval import metrics
from worldmodels.judge import HOLDS, choose_hold, episode_key, held
from worldmodels.registry import load_model
from worldmodels.video import frames_to_obs

H, SEEDS, OTHER = 150, list(range(40000, 40020)), 20


def play(env: ManipulationEnv, seed: int, actions: np.ndarray | None):
    """The expert closed loop (``actions`` None) or ``actions`` open loop from the reset of ``seed``:
    (actions taken, first frame, first proprioception, success at some step)."""
    obs, expert = env.reset(seed), env.expert()
    first, acts, success = obs, [], False
    for t in range(H):
        a = np.clip(expert.get_action(env.full_state), -1, 1) if actions is None else actions[t]
        _, _, _, _, info = env.step(a)
        acts.append(a)
        success |= info["success"]
    return np.asarray(acts, np.float32), first["image"], first["state"], success


def imagined_runs(model, images: np.ndarray, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``[T, B]``: the success signal past 0.5 at each imagined step, for B sequences at once."""
    g = torch.Generator().manual_seed(0)
    state = model.init_state(frames_to_obs(images, states), g)
    hits = []
    with torch.no_grad():
        for t in range(actions.shape[1]):
            state, out = model.step(state, torch.from_numpy(actions[:, t]), generator=g, deterministic=True)
            hits.append((out.success > 0.5).numpy())
    return np.stack(hits)


def calibrate(model, task: str) -> dict:
    env = ManipulationEnv(f"metaworld-{task}", 64, max_episode_steps=H)
    rng = np.random.default_rng(0)
    expert = {s: play(env, s, None) for s in SEEDS + [s + OTHER for s in SEEDS]}
    noisy = lambda a, std: np.clip(a + rng.normal(0, std, a.shape), -1, 1).astype(np.float32)  # noqa: E731
    sequences = {"expert": {s: expert[s][0] for s in SEEDS},
                 "expert + noise 0.5": {s: noisy(expert[s][0], 0.5) for s in SEEDS},
                 "expert + noise 1.0": {s: noisy(expert[s][0], 1.0) for s in SEEDS},
                 "expert, other scene": {s: expert[s + OTHER][0] for s in SEEDS}}
    labels, runs, names = [], [], []
    for name, acts in sequences.items():
        for s in SEEDS:
            labels.append(expert[s][3] if name == "expert" else play(env, s, acts[s])[3])
            names.append(name)
        runs.append(imagined_runs(model, np.stack([expert[s][1] for s in SEEDS]),
                                  np.stack([expert[s][2] for s in SEEDS]), np.stack([acts[s] for s in SEEDS])))
    env.close()
    labels, names, hits = np.array(labels), np.array(names), np.concatenate(runs, axis=1)
    rates = {}
    for k in HOLDS:
        verdict = held(hits, k)
        rates[k] = {"tpr": float(verdict[labels].mean()) if labels.any() else float("nan"),
                    "fpr": float(verdict[~labels].mean()) if (~labels).any() else float("nan"),
                    "per_sequence": {n: float(verdict[names == n].mean()) for n in sequences}}
    keyed = {episode_key(rate, "", k): r[rate] for k, r in rates.items() for rate in ("tpr", "fpr")}
    finite = any(np.isfinite(r["tpr"] - r["fpr"]) for r in rates.values())
    hold = choose_hold(keyed) if finite else int(model.success_hold())      # the fit's own rule, on these rates
    return {"hold": hold, "fit_hold": int(model.success_hold()), "positives": int(labels.sum()),
            "negatives": int((~labels).sum()), "real_per_sequence": {n: float(labels[names == n].mean())
                                                                   for n in sequences}, "rates": rates}


def apply(rank_dir: Path, task: str, hold: int) -> dict:
    blob = json.loads((rank_dir / task / "results.json").read_text())
    real = np.array([p["real_score"] for p in blob["policies"]]) / 100
    imagined = np.array([p["holds"][str(hold)] for p in blob["policies"]]) / 100
    return {name: metrics.bootstrap(f, imagined, real) for name, f in
            (("pearson", metrics.pearson), ("spearman", metrics.spearman), ("mmrv", metrics.mmrv))}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--apply", type=Path, default=None)
    args = ap.parse_args()
    model = load_model(args.model)
    result = json.loads(args.out.read_text()) if args.out.is_file() else {}
    for task in args.tasks:
        if task not in result:                           # resumable: a finished task is kept
            result[task] = calibrate(model, task)
            write_json(args.out, result)
        r = result[task]
        print(f"{task}: {r['positives']} real successes, {r['negatives']} failures; real success per sequence "
              + ", ".join(f"{n} {v:.0%}" for n, v in r["real_per_sequence"].items()))
        for k, rk in r["rates"].items():
            print(f"  hold {int(k):2d}: TPR {rk['tpr']:.2f}  FPR {rk['fpr']:.2f}  imagined per sequence "
                  + ", ".join(f"{v:.0%}" for v in rk["per_sequence"].values()))
        print(f"  calibrated hold {r['hold']} (the fit's: {r['fit_hold']})")
        if args.apply is not None and (args.apply / task / "results.json").is_file():
            for h, label in ((r["fit_hold"], "fit's hold"), (r["hold"], "calibrated hold")):
                m = apply(args.apply, task, h)
                print(f"  zoo at the {label} {h}: " + ", ".join(
                    f"{n} {v['value']:.2f} [{v['low']:.2f}, {v['high']:.2f}]" for n, v in m.items()))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
