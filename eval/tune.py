"""``reverie tune``: hyper-parameter search with Hydra's Optuna sweeper, on two objectives.

The search is a Hydra multirun (``python -m eval.tune --multirun hydra/sweeper=optuna ...``)
whose search space comes from ``configs/search_space/<agent>.yaml``; Optuna's TPE proposes each trial's
values and Hydra's launcher (joblib or Ray) runs it. A trial is one ``reverie train`` at the
search's budget, in its own folder ``<out>/trials/<key>/`` keyed by everything that decides its
result, and its ``result.json`` records both objectives:

- ``simulator``: the trained policy's final normalized score in the simulator (the benchmark's
  own verdict, which needs a simulator);
- ``offline``: the policy's normalized score as ``reverie evaluate`` imagines it in a *held-out*
  world model (the same ensemble configuration fitted with another seed, so another bootstrap
  and initialisation than the model the learner trained in), from the dataset's episode starts.
  No simulator is touched.

A trial already run is read back, not rerun, and the sampler is seeded, so rerunning a search
replays it to where it stopped and goes on. ``collect`` writes ``tune.md``: the default
configuration, the best by each objective with its true (simulator) score, every trial, and how
well the offline objective ranks the trials.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sys
from pathlib import Path

import hydra
import numpy as np
from omegaconf import DictConfig, OmegaConf

from envs.atomic_io import write_json, write_text
from envs.errors import ReverieError

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
OBJECTIVES = ("simulator", "offline")
TRIAL_KEYS = ("agent.", "world_model.", "world_model=")   # overrides that reach a trial's `reverie train`


def search_space(name: str) -> dict[str, str]:
    """``configs/search_space/<name>.yaml``: override key -> Optuna sweep expression."""
    path = CONFIG_DIR / "search_space" / f"{name}.yaml"
    if not path.is_file():
        options = ", ".join(sorted(p.stem for p in (CONFIG_DIR / "search_space").glob("*.yaml")))
        raise ReverieError(f"search: no search space '{name}' (configs/search_space/{name}.yaml); "
                           f"expected one of {options}")
    space = OmegaConf.to_container(OmegaConf.load(path))
    if not isinstance(space, dict) or not space or not all(isinstance(v, str) for v in space.values()):
        raise ReverieError(f"{path}: expected a mapping of override keys to sweep expressions, e.g. "
                           "'agent.penalty_coef: tag(log, interval(0.1, 10.0))'")
    return space


def trial_key(cfg: DictConfig, overrides: list[str]) -> str:
    """Everything that decides a trial's result, hashed: its overrides, budget, seed and data."""
    ident = {"overrides": sorted(overrides), "agent": cfg.agent.name, "dataset": str(cfg.dataset),
             "size": cfg.size, "dataset_seed": cfg.dataset_seed, "seed": cfg.seed, "steps": cfg.steps,
             "train_overrides": sorted(map(str, cfg.train_overrides or [])), "holdout": str(cfg.holdout.checkpoint)}
    return hashlib.blake2b(json.dumps(ident, sort_keys=True).encode(), digest_size=6).hexdigest()


def run_trial(cfg: DictConfig, params: dict[str, str], fixed: list[str], cwd: Path) -> dict:
    """One trial: ``reverie train`` with ``params`` (the searched values) and ``fixed`` (the user's
    own agent./world_model. overrides), then the policy judged in the held-out model. Finished
    trials are read back."""
    from eval.bench import cell_lock, train_args, train_in_subprocess

    out = (cwd / Path(str(cfg.out))).resolve()
    overrides = [*fixed, *(f"{k}={v}" for k, v in sorted(params.items()))]
    key = trial_key(cfg, overrides)
    trial_dir = out / "trials" / key
    if (trial_dir / "result.json").is_file():
        return json.loads((trial_dir / "result.json").read_text())
    with cell_lock(trial_dir) as mine:
        if not mine:
            raise ReverieError(f"{trial_dir}: this trial is running in another process")
        train_dir = trial_dir / "train"
        args = train_args(cfg.agent.name, cfg.dataset, cfg.seed, cfg.size, cfg.steps, train_dir, cfg.threads,
                          [f"dataset_seed={cfg.dataset_seed}", *overrides, *map(str, cfg.train_overrides or [])])
        trial_dir.mkdir(parents=True, exist_ok=True)
        code = train_in_subprocess(args, trial_dir / "train.log", cwd)
        if code != 0:
            raise ReverieError(f"trial {key}: reverie train failed (exit {code}); see {trial_dir / 'train.log'}")
        trained = json.loads((train_dir / "result.json").read_text())
        offline = offline_value(cfg, train_dir)
        result = {"key": key, "params": params, "fixed": fixed, "simulator_score": trained["normalized_score"],
                  "simulator_std": trained.get("normalized_std"), "simulator_episodes": trained.get("eval_episodes"),
                  "offline_score": offline["score"], "offline_length": offline["length"],
                  "offline_nonfinite_rows": offline["nonfinite_rows"], "steps": int(cfg.steps),
                  "seed": int(cfg.seed), "dataset": str(cfg.dataset), "train_seconds": trained.get("train_seconds"),
                  "command": "reverie " + " ".join(args)}
        write_json(trial_dir / "result.json", result)
    return result


def offline_value(cfg: DictConfig, train_dir: Path) -> dict:
    """The trained policy's imagined normalized score in the held-out model, from ``holdout.rows``
    episode starts of the dataset, ``holdout.horizon`` steps, as ``reverie evaluate`` rolls it."""
    import torch

    from agents.registry import load_learner
    from agents.training import acting_policy
    from envs.sources import load_source
    from envs.tasks import get_task, normalized_score
    from eval.evaluate import EvalConfig, imagine
    from worldmodels.registry import load_world_model

    ds = load_source(str(cfg.dataset), size=cfg.size, seed=cfg.dataset_seed)
    task = get_task(ds.task)
    model = load_world_model(Path(str(cfg.holdout.checkpoint)), ds)
    _, learner = load_learner(train_dir, task.obs_dim, task.act_dim)
    starts = ds.episode_starts()
    rng = np.random.default_rng(int(cfg.seed))
    pick = np.sort(rng.choice(starts, size=min(int(cfg.holdout.rows), len(starts)), replace=False))
    ecfg = EvalConfig(horizon=int(cfg.holdout.horizon), rows=len(pick), seed=int(cfg.seed)).validate()
    imag = imagine(model, acting_policy(learner), torch.from_numpy(ds.observations[pick]), ecfg)
    returns = imag.returns().double().numpy()
    return {"score": float(np.mean(normalized_score(task, returns))),
            "length": float(imag.lengths().float().mean()), "nonfinite_rows": int(imag.nonfinite_rows)}


@hydra.main(config_path="../configs", config_name="tune", version_base="1.3")
def trial(cfg: DictConfig) -> float:
    """One Hydra job of the search: the trial's objective value (maximized)."""
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    cwd = Path(hc.runtime.cwd)    # a Ray worker runs elsewhere: paths mean what they meant at the start
    searched = set(cfg.searched or search_space(str(cfg.search)))
    given = [str(o) for o in hc.overrides.task]
    params = {k: v for k, v in (o.split("=", 1) for o in given) if k in searched}
    fixed = [o for o in given if o.startswith(TRIAL_KEYS) and o.split("=", 1)[0] not in searched]
    result = run_trial(cfg, params, fixed, cwd)
    out = (cwd / Path(str(cfg.out))).resolve()
    write_json(out / "searches" / str(cfg.objective) / f"{result['key']}.json",
               {"key": result["key"], "job": int(hc.job.num)})
    return float(result[f"{cfg.objective}_score"])


def multirun_command(cfg: DictConfig, passthrough: list[str], space: dict[str, str]) -> list[str]:
    """The Hydra multirun of one search: the Optuna sweeper (TPE, seeded) over ``space``."""
    from eval.bench import launcher_overrides

    searched = searched_keys(space, passthrough)
    out = Path(str(cfg.out)).resolve()
    return [sys.executable, "-m", "eval.tune", "--multirun", "hydra/sweeper=optuna",
            "hydra.sweeper.direction=maximize", f"hydra.sweeper.n_trials={cfg.trials}",
            f"hydra.sweeper.n_jobs={cfg.jobs}", f"hydra.sweeper.sampler.seed={cfg.sampler_seed}",
            f"hydra.sweeper.sampler.n_startup_trials={cfg.startup_trials}",
            f"hydra.sweeper.study_name={cfg.objective}", *launcher_overrides(cfg),
            f"hydra.sweep.dir={out / 'hydra' / str(cfg.objective)}", "hydra.job.chdir=false",
            *passthrough, f"searched=[{','.join(searched)}]", *(f"{k}={space[k]}" for k in searched)]


def searched_keys(space: dict[str, str], overrides: list[str]) -> list[str]:
    """The search space's keys less those the user fixed on the command line."""
    fixed = {o.split("=", 1)[0] for o in overrides}
    return [k for k in space if k not in fixed]


def collect(cfg: DictConfig, command: str) -> Path:
    """``tune.md`` and ``trials.csv`` from the finished trials of every search in ``<out>``."""
    from scipy.stats import spearmanr

    out = Path(str(cfg.out)).resolve()
    trials = {p.parent.name: json.loads(p.read_text()) for p in sorted(out.glob("trials/*/result.json"))}
    searches = {}
    for objective in OBJECTIVES:
        members = sorted((json.loads(p.read_text()) for p in (out / "searches" / objective).glob("*.json")),
                         key=lambda r: r["job"])
        keys = [m["key"] for m in members if m["key"] in trials]
        if keys:
            searches[objective] = keys
    default = next((t for t in trials.values() if not t["params"]), None)

    def value(v: str) -> str:
        try:
            return f"{float(v):.3g}" if "." in v else v
        except ValueError:
            return v

    def params_text(t):
        return ", ".join(f"{k.split('.', 1)[1] if '.' in k else k}={value(str(v))}"
                         for k, v in sorted(t["params"].items())) or "(the shipped defaults)"

    def row(label, t):
        return (f"| {label} | {params_text(t)} | **{t['simulator_score']:.1f}** ± {t['simulator_std'] or 0:.1f} | "
                f"{t['offline_score']:.1f} |")

    lines = [f"# Hyper-parameter search: {cfg.agent.name} on {cfg.dataset}", "",
             f"Each trial: `reverie train` at {cfg.steps:,} updates, seed {cfg.seed}, then scored two ways: the "
             "true score (normalized, the simulator's final evaluation of the trained policy) and the offline "
             f"objective (normalized score imagined in a held-out ensemble fitted with seed {cfg.holdout.seed}, "
             f"{cfg.holdout.rows} dataset episode starts, {cfg.holdout.horizon} steps; no simulator). Optuna TPE, "
             f"sampler seed {cfg.sampler_seed}, {cfg.startup_trials} random startup trials; search space "
             f"`configs/search_space/{cfg.search}.yaml`.", "", f"Command: `{command}` (objective=simulator and "
             "objective=offline)", "",
             "One training seed per trial: the true score's ± is over its final evaluation episodes, not over "
             "seeds, and a few points between configurations are within seed-to-seed noise.", "",
             "| configuration | values | true score (simulator) | offline objective |", "|---|---|---:|---:|"]
    if default:
        lines.append(row("default", default))
    for objective, keys in searches.items():
        best = max(keys, key=lambda k: trials[k][f"{objective}_score"])
        lines.append(row(f"best by the {objective} objective ({len(keys)} trials)", trials[best]))
    if len(trials) >= 3:
        sim = [t["simulator_score"] for t in trials.values()]
        off = [t["offline_score"] for t in trials.values()]
        rho = spearmanr(sim, off).statistic
        lines += ["", f"Across all {len(trials)} trials, the offline objective ranks the configurations with "
                  f"Spearman ρ = {rho:.2f} against their true scores."]
    lines += ["", "## Every trial", "", "| trial | searched by | values | true score | offline objective | "
              "imagined length |", "|---|---|---|---:|---:|---:|"]
    by = {k: [o for o, ks in searches.items() if k in ks] for k in trials}
    for k, t in sorted(trials.items(), key=lambda kv: -kv[1]["simulator_score"]):
        lines.append(f"| {k} | {', '.join(by[k]) or ('default' if not t['params'] else '-')} | {params_text(t)} | "
                     f"{t['simulator_score']:.1f} | {t['offline_score']:.1f} | {t['offline_length']:.0f} |")
    write_text(out / "tune.md", "\n".join(lines) + "\n")
    cols = ["key", "simulator_score", "simulator_std", "offline_score", "offline_length", "steps", "seed", "params"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    for t in trials.values():
        w.writerow({**{c: t.get(c) for c in cols}, "params": json.dumps(t["params"], sort_keys=True)})
    write_text(out / "trials.csv", buf.getvalue())
    return out / "tune.md"


if __name__ == "__main__":
    trial()
