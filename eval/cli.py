"""The ``reverie`` command line.

``reverie <command> [SOURCE] [key=value ...] [--cfg job] [--json] [--debug]``

Every command composes its config from ``configs/`` with Hydra (one primary
config per command, groups such as ``task/``), so any key can be overridden
as ``key=value`` and ``--cfg job`` prints what a run would use. Commands that
do work write a run directory holding ``config.yaml`` (resolved),
``overrides.yaml`` and TensorBoard events.

Bad input is reported on one line on stderr with exit status 2; ``--debug``
shows the traceback instead.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig, OmegaConf

import configs as _configs_pkg
from envs.allocator import retain_freed_memory
from envs.errors import ReverieError, Stopped

CONFIG_DIR = Path(_configs_pkg.__file__).resolve().parent
EXIT_BAD_INPUT = 2


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    config: str
    run: Callable[[DictConfig, "RunContext"], int | None]
    positional: str | None = None   # a bare argument fills this config key
    writes_run: bool = False        # creates a run directory with config snapshot and TensorBoard
    resumable: bool = False         # an existing run directory with a checkpoint is resumed, not renamed
    usage: str = ""


class RunContext:
    """What a command gets besides its config: where to write, how to log."""

    def __init__(self, run_dir: Path | None, overrides: list[str]):
        self.run_dir = run_dir
        self.overrides = overrides
        self._writer = None

    @property
    def writer(self):
        if self._writer is None and self.run_dir is not None:
            from torch.utils.tensorboard import SummaryWriter
            self._writer = SummaryWriter(str(self.run_dir / "tb"))
        return self._writer

    def log(self, metrics: dict[str, float], step: int = 0) -> None:
        if self.writer is not None:
            for k, v in metrics.items():
                if v is not None:
                    self.writer.add_scalar(k, v, step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


# --------------------------------------------------------------------------- commands

# what a video model's success signal is, in a report's words (``world_model.success_on``)
SUCCESS_SIGNALS = {"judge": "frame judge", "latent": "success head", "frame": "success head on the shown frame",
                   "objects": "success head on the predicted object and goal positions"}

def _set_threads(cfg: DictConfig) -> int:
    import torch

    from eval.threads import resolve_threads
    threads = resolve_threads(cfg.get("threads", 1))
    torch.set_num_threads(threads)
    return threads


def run_tasks(cfg: DictConfig, ctx: RunContext) -> None:
    from envs.policies import ZOO_DIR
    from envs.tasks import TASKS

    rows = []
    for t in TASKS.values():
        zoo = ZOO_DIR / t.name / "zoo.json"
        policies = json.loads(zoo.read_text())["policies"] if zoo.is_file() else []
        expert = max((p["return_mean"] for p in policies), default=None)
        rows.append({"task": t.name, "gym_id": t.gym_id, "obs_dim": t.obs_dim, "act_dim": t.act_dim,
                     "nq": t.nq, "nv": t.nv, "max_episode_steps": t.max_episode_steps,
                     "d4rl_min": t.d4rl_min, "d4rl_max": t.d4rl_max, "neorl_min": t.neorl_min,
                     "neorl_max": t.neorl_max, "zoo_policies": len(policies), "zoo_best_return": expert})
    if cfg.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'task':<12} {'gym id':<15} {'obs':>4} {'act':>4}  {'D4RL random..expert':<24} "
          f"{'NeoRL random..expert':<22} {'shipped zoo'}")
    for r in rows:
        neorl = f"{r['neorl_min']:.0f}..{r['neorl_max']:.0f}" if r["neorl_min"] is not None else "-"
        zoo = f"{r['zoo_policies']} policies, best {r['zoo_best_return']:.0f}" if r["zoo_policies"] else "none"
        print(f"{r['task']:<12} {r['gym_id']:<15} {r['obs_dim']:>4} {r['act_dim']:>4}  "
              f"{r['d4rl_min']:.1f}..{r['d4rl_max']:.1f}".ljust(61) + f" {neorl:<22} {zoo}")


def run_dataset_make(cfg: DictConfig, ctx: RunContext) -> None:
    from envs.builtin import make_builtin

    _set_threads(cfg)
    if str(cfg.task.name).startswith("metaworld-"):
        return _make_manipulation(cfg, ctx)
    path, manifest, reused = make_builtin(
        cfg.task.name, cfg.level, size=cfg.size, seed=cfg.seed, num_envs=cfg.num_envs, force=cfg.force,
        cache_root=Path(cfg.cache_dir) if cfg.cache_dir else None, progress=sys.stderr.isatty(),
        workers=cfg.workers or os.cpu_count() or 1)
    print(f"{'reused' if reused else 'made'} {manifest['name']}: {manifest['size']:,} transitions, "
          f"{manifest['episodes']:,} episodes -> {path}")
    if not reused:
        print(f"took {manifest['seconds']:.1f} s ({manifest['transitions_per_second']:,.0f} transitions/s)")
    ctx.log({"dataset/transitions_per_second": manifest["transitions_per_second"],
             "dataset/seconds": manifest["seconds"]})


def _make_manipulation(cfg: DictConfig, ctx: RunContext) -> None:
    from envs.builtin import cache_dir
    from envs.manipulation_data import make_manipulation

    def progress(i, n):
        if sys.stderr.isatty():
            print(f"\r  episode {i}/{n}", end="" if i < n else "\n", file=sys.stderr, flush=True)

    root = Path(cfg.cache_dir) if cfg.cache_dir else cache_dir()
    path, attrs, reused = make_manipulation(cfg.task.name, str(cfg.level), int(cfg.episodes), int(cfg.seed), root,
                                            image_size=int(cfg.image_size), camera=str(cfg.camera),
                                            force=bool(cfg.force), progress=progress)
    print(f"{'reused' if reused else 'made'} {path.stem}: {attrs['episodes']:,} episodes, "
          f"{attrs['total_steps']:,} steps -> {path}")
    if not reused:
        print(f"took {attrs['seconds']:.1f} s ({attrs['frames_per_second']:,.0f} frames/s, simulation and rendering)")
    ctx.log({"dataset/frames_per_second": attrs["frames_per_second"], "dataset/seconds": attrs["seconds"]})


def _is_manipulation_file(source: str) -> bool:
    import h5py

    from envs.manipulation_data import FORMAT

    path = Path(source).expanduser()
    if not path.is_file() or path.suffix not in (".hdf5", ".h5"):
        return False
    try:
        with h5py.File(path, "r") as f:
            return f.attrs.get("format") == FORMAT
    except OSError:
        return False


def run_dataset_info(cfg: DictConfig, ctx: RunContext) -> None:
    from envs.info import dataset_info, format_info
    from envs.sources import load_source

    if _is_manipulation_file(str(cfg.source)):
        from envs.manipulation_data import format_manipulation_info, manipulation_info, read_manipulation

        info = manipulation_info(read_manipulation(Path(str(cfg.source)).expanduser()))
        print(json.dumps(info) if cfg.json else format_manipulation_info(info))
        return
    ds = load_source(cfg.source, task=cfg.task, size=cfg.size, seed=cfg.seed, progress=sys.stderr.isatty())
    info = dataset_info(ds)
    print(json.dumps(info) if cfg.json else format_info(info))


def run_dataset_convert(cfg: DictConfig, ctx: RunContext) -> None:
    import shutil

    from envs.d4rl_format import write_d4rl
    from envs.minari_format import write_minari
    from envs.neorl_format import write_neorl
    from envs.sources import load_source

    writers = {"d4rl": write_d4rl, "neorl": write_neorl, "minari": write_minari}
    if cfg.format not in writers:
        raise ReverieError(f"option 'format': expected one of {', '.join(writers)}, got '{cfg.format}'")
    out = Path(cfg.out).expanduser()
    if out.exists():
        if not cfg.force:
            raise ReverieError(f"{out}: output exists; pass force=true to overwrite")
        shutil.rmtree(out) if out.is_dir() else out.unlink()
    ds = load_source(cfg.source, task=cfg.task)
    if cfg.format == "minari":
        write_minari(ds, out, dataset_id=cfg.dataset_id)
    else:
        writers[cfg.format](ds, out)
    print(f"wrote {len(ds):,} transitions of {ds.name} as {cfg.format} -> {out}")


def run_dataset_train_behavior(cfg: DictConfig, ctx: RunContext) -> None:
    from envs.behavior import BehaviorConfig, publish_zoo, train_behavior
    from envs.builtin import cache_dir
    from envs.policies import ZOO_DIR

    fields = BehaviorConfig.__dataclass_fields__
    bcfg = BehaviorConfig(**{k: (tuple(v) if k == "hidden" else v) for k, v in
                             OmegaConf.to_container(cfg, resolve=True).items() if k in fields and k != "task"},
                          task=cfg.task.name)
    workdir = Path(cfg.workdir) if cfg.workdir else cache_dir() / "behavior" / f"{bcfg.task}-seed{bcfg.seed}"
    if cfg.train:
        print(f"training TD3 on {bcfg.task} in {workdir} (resumes from its checkpoint)")
        summary = train_behavior(bcfg, workdir, progress=sys.stderr.isatty())
        print(json.dumps(summary))
        ctx.log({"behavior/best_return": summary["best_return"],
                 "behavior/steps_per_second": summary["steps_per_second"]}, summary["step"])
    if cfg.publish:
        command = "reverie dataset train-behavior " + " ".join(ctx.overrides)
        manifest = publish_zoo(bcfg.task, workdir, Path(cfg.zoo_dir) if cfg.zoo_dir else ZOO_DIR,
                               n_policies=cfg.zoo_policies, eval_episodes=cfg.zoo_eval_episodes, command=command)
        for p in manifest["policies"]:
            print(f"  {p['name']}  return {p['return_mean']:8.1f} ± {p['return_std']:6.1f}  "
                  f"normalized {p['normalized_score']:6.1f}  {' '.join(p['roles'])}")


def _fit_reporter(ctx: RunContext, wcfg, every: int = 5, prefix: str = ""):
    """The per-epoch report of an ensemble's fit: TensorBoard every epoch, a line after the first and every
    ``every`` epochs (a large posterior's fit runs for hours, and a log file should show how it goes)."""
    t0 = time.perf_counter()

    def on_epoch(epoch: int, mse) -> None:
        ctx.log({"fit/holdout_mse_mean": mse.mean().item()}, epoch)
        if epoch % every == 0 or epoch == 1:
            print(f"{prefix}epoch {epoch} of at most {wcfg.max_epochs}: mean holdout MSE {mse.mean().item():.4f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return on_epoch


def run_fit(cfg: DictConfig, ctx: RunContext) -> None:
    from envs.sources import load_source
    from worldmodels.registry import fit_world_model, world_model_config

    _set_threads(cfg)
    values = OmegaConf.to_container(cfg.world_model, resolve=True)
    wcfg = world_model_config(values)
    if values["name"] == "video":
        return _fit_video(cfg, ctx, values)
    ds = load_source(cfg.dataset, size=cfg.size, seed=cfg.seed, progress=sys.stderr.isatty())
    print(f"fitting {wcfg.members} members on {ds.name}: {len(ds):,} transitions")

    partial = ctx.run_dir / "fit-checkpoint.pt"      # the same command and run_dir resume a fit cut short
    model, metrics = fit_world_model(ds, values, cfg.seed, progress=_fit_reporter(ctx, wcfg), checkpoint=partial)
    path = ctx.run_dir / "world_model.pt"
    model.save(path)
    partial.unlink(missing_ok=True)
    elites = set(model.elites.tolist())
    print(f"stopped after {int(metrics['epochs'])} epochs; holdout MSE (normalised targets) per member:")
    for e in range(wcfg.members):
        print(f"  member {e}: {model.holdout_mse[e].item():.4f}" + ("  elite" if e in elites else ""))
    print(f"saved {path}")
    ctx.log({k: v for k, v in metrics.items()})


def _fit_video(cfg: DictConfig, ctx: RunContext, values: dict) -> None:
    from envs.manipulation_data import read_manipulation
    from worldmodels.judge import episode_key
    from worldmodels.registry import fit_video_model

    sources = list(cfg.dataset) if OmegaConf.is_list(cfg.dataset) else [str(cfg.dataset)]
    datasets = []
    for src in sources:
        if not _is_manipulation_file(src):
            raise ReverieError(f"dataset: {src}: world_model=video needs a manipulation file "
                               "(reverie dataset make task=metaworld-...)")
        datasets.append(read_manipulation(Path(src).expanduser()))
    steps = sum(len(e) for ds in datasets for e in ds.episodes)
    print(f"fitting a video world model on {', '.join(ds.task for ds in datasets)}: {steps:,} steps", flush=True)
    t0 = time.perf_counter()

    def progress(stage, epoch, value):
        ctx.log({f"fit/{stage}_holdout": value}, epoch)
        print(f"  {stage} epoch {epoch}: holdout {value:.4f}", flush=True)

    model, metrics = fit_video_model(datasets, values, int(cfg.seed), progress=progress)
    path = ctx.run_dir / "world_model.pt"
    model.save(path)
    print(f"fitted in {time.perf_counter() - t0:.0f} s: reconstruction MSE {metrics['reconstruction_mse']:.4f}, "
          f"latent dynamics holdout MSE (elites) {metrics['holdout_mse_elites']:.4f}, inverse dynamics MSE "
          f"{metrics['inverse_dynamics_mse']:.4f}, success BCE {metrics['success_bce']:.4f}")
    if "judge_episode_fpr" in metrics:
        print(f"success judge on {metrics['judge_holdout_episodes']:.0f} held-out episodes: true positives "
              f"{metrics['judge_episode_tpr']:.0%}, false positives {metrics['judge_episode_fpr']:.0%} "
              f"(frames as the model shows them: {metrics['judge_episode_tpr_shown']:.0%}, "
              f"{metrics['judge_episode_fpr_shown']:.0%}); a success must hold {metrics['judge_hold']:.0f} step(s) in a "
              f"row (there: {metrics['judge_' + episode_key('tpr', '_shown', int(metrics['judge_hold']))]:.0%}, "
              f"{metrics['judge_' + episode_key('fpr', '_shown', int(metrics['judge_hold']))]:.0%})")
    print(f"saved {path}")
    ctx.log({k: v for k, v in metrics.items()})


def _explicit_keys(overrides: list[str], group: str) -> set[str]:
    """The keys of ``group`` that the command line set (``group.KEY=...``, with or without + or ~)."""
    keys = (o.split("=", 1)[0].lstrip("+~") for o in overrides)
    return {k.removeprefix(group + ".") for k in keys if k.startswith(group + ".")}


def agent_world_model(cfg: DictConfig, overrides: list[str]) -> dict:
    """The world model's values: its config group, then the agent's own needs (NEUBAY's larger
    LayerNorm ensemble), then what the command line says."""
    values = OmegaConf.to_container(cfg.world_model, resolve=True)
    wanted = OmegaConf.to_container(cfg.agent, resolve=True).get("world_model") or {}
    explicit = _explicit_keys(overrides, "world_model")
    return {**values, **{k: v for k, v in wanted.items() if k not in explicit}}


def train_configs(cfg: DictConfig, overrides: list[str], dataset_key: str | None):
    """The learner's config and the loop's config, with the agent's per-dataset defaults applied
    unless the command line set the same key."""
    from agents.registry import agent_class, agent_config
    from agents.training import LOOP_KEYS, TrainConfig
    from envs.config import build_config

    agent = OmegaConf.to_container(cfg.agent, resolve=True)
    name = agent.pop("name")
    agent_class(name)
    tuned = agent.pop("tuned", None) or {}
    agent.pop("world_model", None)
    explicit = _explicit_keys(overrides, "agent")
    applied = {k: v for k, v in (tuned.get(dataset_key) or {}).items() if k not in explicit}
    agent.update(applied)
    loop = {k: agent.pop(k) for k in LOOP_KEYS if k in agent}
    explicit_train = _explicit_keys(overrides, "train")
    loop = {k: v for k, v in loop.items() if k not in explicit_train}   # train.KEY=VALUE beats the agent's
    train = {**OmegaConf.to_container(cfg.train, resolve=True), **loop, "seed": cfg.seed, "device": cfg.device}
    return name, agent_config(name, agent), agent, build_config(TrainConfig, train, "train"), applied


def run_train(cfg: DictConfig, ctx: RunContext) -> None:
    import torch

    from agents.data import TransitionSampler
    from agents.registry import agent_class, build_agent
    from agents.networks import native_bfloat16, resolve_precision
    from agents.training import Trainer
    from envs.atomic_io import write_json
    from envs.builtin import cache_dir
    from envs.sources import load_source
    from envs.tasks import task_from_name
    from worldmodels.registry import (cached_world_model, fit_took, fit_world_model, load_world_model,
                                      world_model_config)

    _set_threads(cfg)
    if (ctx.run_dir / "result.json").is_file():
        print(f"{ctx.run_dir} has finished: {json.loads((ctx.run_dir / 'result.json').read_text())['summary']}")
        return
    dataset_key = _dataset_key(str(cfg.dataset))
    name, _, agent_values, tcfg, applied = train_configs(cfg, ctx.overrides, dataset_key)
    wm_values = agent_world_model(cfg, ctx.overrides)
    wcfg = world_model_config(wm_values)
    ds = load_source(cfg.dataset, size=cfg.size, seed=cfg.dataset_seed, progress=sys.stderr.isatty())
    if ds.task is None and task_from_name(ds.name) is None:
        raise ReverieError(f"{ds.name}: the dataset names no simulator task; pass a dataset whose task is known")
    if applied:
        print(f"{name} defaults for {dataset_key}: " + ", ".join(f"{k}={v}" for k, v in applied.items()))
    run_dir = ctx.run_dir
    model = None
    if agent_class(name).uses_model:
        saved = run_dir / "world_model.pt"
        if saved.is_file():
            model = load_world_model(saved, ds, tcfg.device)
            print(f"world model: {saved} (resuming)")
        elif wm_values.get("checkpoint"):
            model = load_world_model(Path(wm_values["checkpoint"]).expanduser(), ds, tcfg.device)
            model.save(saved)
            print(f"world model: {wm_values['checkpoint']}")
        else:
            t0 = time.perf_counter()
            print(f"fitting the world model on {ds.name} ({len(ds):,} transitions) ...", flush=True)
            on_epoch = _fit_reporter(ctx, wcfg, every=10, prefix="  world model fit ")
            if cfg.model_cache:
                model, metrics, reused = cached_world_model(ds, wm_values, cfg.seed, cache_dir() / "world_models",
                                                            progress=on_epoch, device=tcfg.device)
            else:
                (model, metrics), reused = fit_world_model(ds, wm_values, cfg.seed, progress=on_epoch,
                                                           device=tcfg.device,
                                                           checkpoint=run_dir / "world_model.fit-checkpoint.pt"), False
            model.save(saved)
            (run_dir / "world_model.fit-checkpoint.pt").unlink(missing_ok=True)
            print(f"world model: {fit_took(reused, time.perf_counter() - t0, metrics)}; "
                  f"holdout MSE of the elites {metrics['holdout_mse_elites']:.4f}")
            ctx.log({"model/holdout_mse_elites": metrics["holdout_mse_elites"],
                     "model/holdout_mse_mean": metrics["holdout_mse_mean"],
                     **{f"model/holdout_mse_member_{e}": model.holdout_mse[e].item()
                        for e in range(model.spec.members)}})
    torch.manual_seed(cfg.seed)
    learner = build_agent(name, agent_values, ds.obs_dim, ds.act_dim, model=model,
                          sampler=TransitionSampler(ds, tcfg.device), ds=ds, device=tcfg.device)
    progress = sys.stderr.isatty()

    def log(metrics: dict, step: int) -> None:
        ctx.log(metrics, step)
        if not progress and "eval/normalized_score" in metrics:   # a log file still shows how it goes
            print(f"step {step:,}: normalized score {metrics['eval/normalized_score']:.1f} "
                  f"({tcfg.eval_episodes} episodes)", flush=True)

    trainer = getattr(learner, "trainer_class", Trainer)(learner, ds, tcfg, model=model, log=log)
    checkpoint = run_dir / "checkpoint.pt"
    if checkpoint.is_file():
        print(f"resuming {checkpoint}")
    if tcfg.precision == "bfloat16" and not native_bfloat16(trainer.device.type):
        print("warning: train.precision=bfloat16 on a machine without native bfloat16 (no AVX-512 or AMX): "
              "autocast emulates it and updates run many times slower than float32; train.precision=auto "
              "chooses per machine", file=sys.stderr)
    summary = trainer.run(checkpoint, progress=progress)
    if tcfg.precision == "auto":             # known once a resumed run has read the precision it began in
        print(f"train.precision=auto: the updates ran in {trainer.precision}")
    final = trainer.final_evaluation()
    ctx.log({f"final/{k}": v for k, v in final.items()}, trainer.step)
    line = (f"{name} on {ds.name}, seed {cfg.seed}, {trainer.step:,} updates: normalized score "
            f"{final['normalized_score']:.1f} ± {final['normalized_std']:.1f} (return {final['return_mean']:.1f}, "
            f"{tcfg.final_eval_episodes} episodes)")
    torch.save(learner.state_dict(), run_dir / "learner.pt")
    from envs.info import dataset_info
    from worldmodels.registry import dataset_fingerprint

    # the command that repeats this run anywhere: auto written out as what it chose here (a fit is this
    # machine's: its own cache's, or its run folder's)
    chosen = {"train.precision=auto": f"train.precision={trainer.precision}",
              "world_model.fit_precision=auto": f"world_model.fit_precision="
                                                f"{resolve_precision('auto', trainer.device.type)}"}
    # a built-in dataset is made on each machine, and simulators differ in their last bits between CPUs: the
    # result names the data it learned from and that data's own score
    result = {"agent": name, "dataset": ds.name, "source": str(cfg.dataset), "dataset_size": len(ds),
              "dataset_fingerprint": dataset_fingerprint(ds), "behaviour_score": dataset_info(ds)["normalized_score"],
              "seed": cfg.seed,
              "steps": trainer.step, "train_seconds": summary["total_seconds"],
              "updates_per_second": trainer.step / summary["total_seconds"] if summary["total_seconds"] else 0.0,
              "eval_episodes": tcfg.final_eval_episodes, **final, "evals": trainer.evals,
              "precision": trainer.precision, "command": "reverie train " + " ".join(
                  chosen.get(o, o) for o in ctx.overrides), "summary": line}
    write_json(run_dir / "result.json", result)
    if not cfg.keep_checkpoint:
        checkpoint.unlink(missing_ok=True)   # the learner's weights stay in learner.pt; the buffer goes
    print(line)


def run_bench(cfg: DictConfig, ctx: RunContext) -> int:
    from agents.registry import agent_class
    from eval import children
    from eval.bench import cells_left, collect, ledger_path, multirun_command, read_ledger, run_order, unfinished

    for a in cfg.agents:
        agent_class(a)
    if int(cfg.jobs) < 1:
        raise ReverieError(f"option 'jobs': expected a positive integer, got {cfg.jobs}")
    from eval.bench import cell_threads, check_launcher

    check_launcher(cfg)
    cell_threads(cfg)             # a bad `threads` is refused here, not in every cell
    out = Path(cfg.out)
    command = " ".join(["reverie bench", *(o for o in ctx.overrides if not o.startswith("collect_only="))])
    code = 0
    if not cfg.collect_only:
        cells, (begun, fresh) = len(cfg.agents) * len(cfg.datasets) * len(cfg.seeds), run_order(cfg)
        order = begun + fresh
        print(f"{cells} cells ({len(cfg.agents)} agents x {len(cfg.datasets)} datasets x {len(cfg.seeds)} seeds), "
              f"{len(order)} unfinished ({len(begun)} begun, which go first), {cfg.jobs} at a time ({cfg.launcher}), "
              f"{cfg.steps:,} updates each -> {out}/cells",
              flush=True)
        if order:
            code = children.call(multirun_command(cfg, ctx.overrides, order))
    ledger = ledger_path(cfg)
    csv_path, md_path, n = collect(out, cfg.size, cfg.steps, command, ledger)
    print(f"{n} finished cells -> {csv_path}, {md_path}" + (f" (ledger {ledger})" if ledger else ""))
    left = unfinished(cfg)
    summary = cells_left(cfg, left, read_ledger(csv_path))
    if summary:
        print(summary)
    if left and not cfg.collect_only:
        print(f"{len(left)} cells of this grid are unfinished (their logs: {out / 'logs'}), e.g. {left[0]}",
              file=sys.stderr)
        return code or 1
    return code


def run_tune(cfg: DictConfig, ctx: RunContext) -> int:
    from agents.registry import agent_class
    from envs.builtin import cache_dir
    from envs.sources import load_source
    from eval import children
    from eval.tune import (OBJECTIVES, TRIAL_KEYS, collect, multirun_command, run_trial, search_space,
                            searched_keys)
    from worldmodels.registry import cached_model_path, cached_world_model, fit_took

    _set_threads(cfg)
    agent_class(str(cfg.agent.name))
    if cfg.objective not in OBJECTIVES:
        raise ReverieError(f"option 'objective': expected 'simulator' or 'offline', got '{cfg.objective}'")
    for name in ("trials", "steps", "jobs"):
        if int(cfg[name]) < 1:
            raise ReverieError(f"option '{name}': expected a positive integer, got {cfg[name]}")
    if int(cfg.holdout.seed) == int(cfg.seed):
        raise ReverieError(f"holdout.seed: must differ from seed ({cfg.seed}): the held-out model would be the "
                           "learner's own")
    from eval.bench import check_launcher

    check_launcher(cfg)
    space = search_space(str(cfg.search))
    if not searched_keys(space, ctx.overrides):
        raise ReverieError(f"search: every key of configs/search_space/{cfg.search}.yaml is fixed on the command line; "
                           "nothing is left to search")
    command = " ".join(["reverie tune", *(o for o in ctx.overrides if not o.startswith("collect_only="))])
    if cfg.collect_only:
        print(f"-> {collect(cfg, command)}")
        return 0
    ds = load_source(str(cfg.dataset), size=cfg.size, seed=cfg.dataset_seed, progress=sys.stderr.isatty())
    wm = OmegaConf.to_container(cfg.world_model, resolve=True)
    wm.pop("checkpoint", None)
    t0 = time.perf_counter()
    print(f"held-out world model: {wm['name']} fitted on {ds.name} with seed {cfg.holdout.seed} ...", flush=True)
    _, metrics, reused = cached_world_model(ds, wm, int(cfg.holdout.seed), cache_dir() / "world_models")
    holdout = cached_model_path(ds, wm, int(cfg.holdout.seed), cache_dir() / "world_models")
    print(f"  {fit_took(reused, time.perf_counter() - t0, metrics)} -> {holdout}", flush=True)
    cfg.holdout.checkpoint = str(holdout)
    fixed = [o for o in ctx.overrides if o.startswith(TRIAL_KEYS)]
    print(f"default configuration at {cfg.steps:,} updates ...", flush=True)
    d = run_trial(cfg, {}, fixed, Path.cwd())
    print(f"  true score {d['simulator_score']:.1f}, offline objective {d['offline_score']:.1f}", flush=True)
    print(f"search: {cfg.trials} trials of {cfg.agent.name} on {cfg.dataset} by the {cfg.objective} objective, "
          f"{cfg.jobs} at a time ({cfg.launcher}) -> {Path(str(cfg.out)) / 'trials'} (finished trials are read back)",
          flush=True)
    passthrough = [o for o in ctx.overrides if not o.startswith(("collect_only=", "holdout.checkpoint=", "searched="))]
    code = children.call(multirun_command(cfg, [*passthrough, f"holdout.checkpoint={holdout}"], space))
    report = collect(cfg, command)
    print(f"-> {report}")
    return code


def _dataset_key(source: str) -> str | None:
    """``hopper-medium-replay`` from a built-in or D4RL name or a path to one (``-v2``, seeds and sizes dropped)."""
    import re

    stem = Path(source).name
    m = re.match(r"^(hopper|halfcheetah|walker2d|ant)-(random|medium-replay|medium-expert|medium|expert)", stem)
    return f"{m.group(1)}-{m.group(2)}" if m else None


def run_evaluate(cfg: DictConfig, ctx: RunContext) -> None:
    from envs.builtin import cache_dir
    from envs.sources import load_source
    from envs.tasks import get_task
    from eval.evaluate import EvalConfig, evaluate, load_candidates, start_states
    from eval.report import write_report
    from worldmodels.registry import cached_world_model, fit_took, load_world_model

    _set_threads(cfg)
    if str(cfg.task.name).startswith("metaworld-"):
        return _evaluate_video(cfg, ctx)
    task = get_task(str(cfg.task.name))
    ecfg = EvalConfig(horizon=int(cfg.horizon), rows=int(cfg.rows), member=str(cfg.member),
                      sample_model=bool(cfg.sample_model), open_loop_rows=int(cfg.open_loop_rows),
                      open_loop_horizon=int(cfg.open_loop_horizon), bootstrap=int(cfg.bootstrap),
                      seed=int(cfg.seed), max_state_std=_max_state_std(cfg)).validate()
    ray = _ray_options(cfg)
    specs = list(cfg.policies) if OmegaConf.is_list(cfg.policies) else [str(cfg.policies)]
    candidates = load_candidates(specs, task)
    ds = load_source(cfg.dataset, size=cfg.size, seed=cfg.dataset_seed, progress=sys.stderr.isatty())
    if ds.task is not None and ds.task != task.name:
        raise ReverieError(f"dataset {ds.name}: is for task '{ds.task}', not '{task.name}'")
    wm = OmegaConf.to_container(cfg.world_model, resolve=True)
    if wm.get("checkpoint"):
        path = Path(wm["checkpoint"]).expanduser()
        if not path.is_file():
            raise ReverieError(f"world_model.checkpoint: {path}: no such file")
        model = load_world_model(path, ds)
        described = str(path)
    else:
        t0 = time.perf_counter()
        print(f"fitting the world model on {ds.name} ({len(ds):,} transitions) ...", flush=True)
        model, metrics, reused = cached_world_model(ds, wm, int(cfg.seed), cache_dir() / "world_models")
        described = f"{model.cfg.members}-member ensemble fitted on {ds.name}"
        print(f"world model: {fit_took(reused, time.perf_counter() - t0, metrics)}")
    start = start_states(task, str(cfg.start), ecfg.rows, ecfg.seed, ds)
    print(f"evaluating {len(candidates)} policies from {len(start.obs)} {cfg.start} start states, "
          f"{ecfg.horizon} steps, in the simulator and in the model", flush=True)

    def progress(i, n, p):
        print(f"  [{i}/{n}] {p['policy']:<24} real {p['real_score']:7.1f}   imagined {p['imagined_score']:7.1f}",
              flush=True)

    result = evaluate(model, task, candidates, start, ecfg, ds=ds, progress=progress, ray=ray)
    result["command"] = "reverie evaluate " + " ".join(ctx.overrides)
    result["world_model"] = described
    header = (f"Task {task.name}; world model: {described} ({model.spec.members} members, "
              f"{'one elite held per row' if ecfg.member == 'held' else 'an elite drawn each step'}); "
              f"{len(start.obs)} start states ({cfg.start}) from {ds.name}, {ecfg.horizon} closed-loop steps, "
              f"policies acting deterministically; open loop: {ecfg.open_loop_rows} dataset segments of "
              f"{ecfg.open_loop_horizon} steps. Seed {ecfg.seed}. Command: `{result['command']}`")
    report = write_report(result, ctx.run_dir, header, log=ctx.log)
    rk = result["ranking"]
    if rk:
        print(f"Spearman {rk['spearman']['value']:.3f} [{rk['spearman']['low']:.3f}, {rk['spearman']['high']:.3f}]  "
              f"MMRV {rk['mmrv']['value']:.3f} [{rk['mmrv']['low']:.3f}, {rk['mmrv']['high']:.3f}]  "
              f"regret@1 {rk['regret@1']['value']:.3f}")
    print(f"report: {report}")


def _ray_options(cfg: DictConfig):
    """``RayOptions`` when ``parallel=ray``, None when serial; anything else is refused."""
    from eval.parallel import RayOptions

    mode = str(cfg.get("parallel", "serial"))
    if mode not in ("serial", "ray"):
        raise ReverieError(f"option 'parallel': expected 'serial' or 'ray', got '{mode}'")
    return RayOptions.from_config(cfg.ray) if mode == "ray" else None


def _max_state_std(cfg: DictConfig) -> float | None:
    value = cfg.get("max_state_std")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ReverieError(f"option 'max_state_std': expected a number of standard deviations or null, "
                           f"got {value!r}")
    return None if value is None else float(value)


def _evaluate_video(cfg: DictConfig, ctx: RunContext) -> None:
    from envs.manipulation import get_manipulation_task
    from envs.manipulation_data import read_manipulation
    from eval.report import write_report
    from eval.video_evaluate import evaluate_video, load_vla_policies
    from worldmodels.registry import check_video_model, load_model

    task = get_manipulation_task(str(cfg.task.name))
    if int(cfg.horizon) < 1 or int(cfg.rows) < 1:
        raise ReverieError(f"horizon and rows: expected positive integers, got horizon={cfg.horizon}, rows={cfg.rows}")
    path = cfg.world_model.get("checkpoint")
    if not path:
        raise ReverieError("world_model.checkpoint: a manipulation task needs a fitted video world model "
                           "(reverie fit world_model=video dataset=...)")
    model = load_model(Path(path).expanduser())
    if not hasattr(model, "size"):
        raise ReverieError(f"world_model.checkpoint: {path}: not a video world model")
    check_video_model(model, path, task.name, model.size)
    signal = str(cfg.get("uncertainty", "model"))
    if signal not in ("model", "inverse_dynamics", "disagreement"):
        raise ReverieError(f"option 'uncertainty': expected model, inverse_dynamics or disagreement, got '{signal}'")
    if signal != "model":
        model.cfg.uncertainty = signal
    quantile = cfg.get("truncate_quantile")
    if quantile is not None and not (isinstance(quantile, (int, float)) and 0 < float(quantile) <= 1):
        raise ReverieError(f"option 'truncate_quantile': expected a quantile in (0, 1] or null, got {quantile!r}")
    specs = list(cfg.policies) if OmegaConf.is_list(cfg.policies) else [str(cfg.policies)]
    if "zoo" in specs:
        raise ReverieError("policies: manipulation tasks ship no zoo; pass VLA policy files or folders "
                           "(python -m eval.manipulation_loop writes one in <out>/zoo)")
    policies = load_vla_policies(specs)
    episodes = (read_manipulation(Path(str(cfg.dataset)).expanduser()).episodes[:int(cfg.open_loop_rows)]
                if _is_manipulation_file(str(cfg.dataset)) else None)
    horizon = min(int(cfg.horizon), task.max_episode_steps)
    seeds = list(range(20_000 + 1000 * int(cfg.seed), 20_000 + 1000 * int(cfg.seed) + int(cfg.rows)))
    print(f"evaluating {len(policies)} policies on {task.name} from {len(seeds)} resets, {horizon} steps, in the "
          "simulator and in the video model", flush=True)

    def progress(i, n, p):
        print(f"  [{i}/{n}] {p['policy']:<24} real {p['real_score']:5.1f}%  imagined {p['imagined_score']:5.1f}%",
              flush=True)

    result, strips = evaluate_video(model, task.name, policies, seeds, horizon, episodes=episodes,
                                    open_loop_horizon=int(cfg.open_loop_horizon), bootstrap=int(cfg.bootstrap),
                                    seed=int(cfg.seed), progress=progress, sample_model=bool(cfg.sample_model),
                                    truncate_quantile=None if quantile is None else float(quantile),
                                    real_cache=Path(str(cfg.real_cache)).expanduser() if cfg.get("real_cache")
                                    else None, hold=cfg.get("hold"))
    result["command"] = "reverie evaluate " + " ".join(ctx.overrides)
    result["world_model"] = str(path)
    header = (f"Task {task.name}; video world model {path}; {len(seeds)} simulator resets (seeds {seeds[0]}.."
              f"{seeds[-1]}), {horizon} steps, policies acting deterministically, the model "
              f"{'sampled' if cfg.sample_model else 'at its mean'}; imagined success: the model's "
              f"{SUCCESS_SIGNALS[model.cfg.success_on]} above 0.5 "
              + ("at some step" if result["hold"] == 1 else f"for {result['hold']} steps in a row") + (
                  f" before its {model.cfg.uncertainty.replace('_', '-')} uncertainty first passes the {quantile:g} "
                  f"quantile of what it shows on the dataset ({result['truncate_threshold']:.3g})"
                  if quantile is not None else "") + f". Command: `{result['command']}`")
    report = write_report(result, ctx.run_dir, header, log=ctx.log, extra_figures=strips,
                          extra_heading="Real and imagined frames, side by side")
    rk = result["ranking"]
    if rk:
        print(f"Pearson {rk['pearson']['value']:.3f} [{rk['pearson']['low']:.3f}, {rk['pearson']['high']:.3f}]  "
              f"MMRV {rk['mmrv']['value']:.3f} [{rk['mmrv']['low']:.3f}, {rk['mmrv']['high']:.3f}]")
    print(f"report: {report}")


def run_demo(cfg: DictConfig, ctx: RunContext) -> int:
    from envs.builtin import make_builtin
    from envs.d4rl_format import read_d4rl
    from envs.info import dataset_info, format_info

    threads = _set_threads(cfg)
    if cfg.threads == "auto":
        from eval.threads import auto_reading
        print(f"threads=auto: {threads} torch thread{'s' * (threads > 1)}, one per idle core ({auto_reading})")
    print(f"[1/4] making {cfg.task.name}-{cfg.level} ({cfg.size:,} transitions) from the shipped policies")
    path, manifest, _ = make_builtin(cfg.task.name, cfg.level, size=cfg.size, seed=cfg.seed,
                                     num_envs=cfg.num_envs, progress=sys.stderr.isatty())
    print(f"      -> {path}  ({manifest['transitions_per_second']:,.0f} transitions/s when made)")
    print("[2/4] dataset info")
    ds = read_d4rl(path)
    info = dataset_info(ds)
    print(format_info(info))
    ctx.log({"demo/normalized_score": info["normalized_score"], "demo/coverage": info["coverage"]})
    print(f"[3/4] reverie train agent={cfg.agent}: fit the ensemble, imagine, learn, score in the simulator")
    train_dir = ctx.run_dir / "train"
    argv = ["train", f"agent={cfg.agent}", f"dataset={path}", f"seed={cfg.seed}", f"threads={cfg.threads}",
            f"world_model.max_epochs={cfg.world_model_max_epochs}", f"run_dir={train_dir}",
            *[f"train.{k}={v}" for k, v in cfg.train.items()]]
    print("      " + "reverie " + " ".join(argv[:2] + argv[2:3]) + " ...", flush=True)
    code = main(argv)
    if code:
        return code
    print(f"[4/4] reverie evaluate: the zoo and the {cfg.agent} policy in the simulator and in the world model")
    argv = ["evaluate", f"task={cfg.task.name}", f"dataset={path}", f"world_model.checkpoint={train_dir / 'world_model.pt'}",
            f"policies=[zoo,{train_dir}]", f"threads={cfg.threads}", f"seed={cfg.seed}",
            f"run_dir={ctx.run_dir / 'evaluate'}", *[f"{k}={v}" for k, v in cfg.evaluate.items()]]
    print("      " + "reverie " + " ".join(argv[:2]) + " ...", flush=True)
    return main(argv)


COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("tasks", "list the simulator tasks, their sizes, reference scores and shipped policies",
            "tasks", run_tasks),
    Command("dataset make", "make a built-in D4RL-style dataset from the shipped behaviour policies",
            "dataset_make", run_dataset_make, writes_run=True,
            usage="reverie dataset make task=hopper level=medium-replay [size=N] [seed=S]"),
    Command("dataset info", "describe a dataset: size, returns, normalized score, ranges, coverage",
            "dataset_info", run_dataset_info, positional="source",
            usage="reverie dataset info SOURCE [--json]   (a path or a name)"),
    Command("dataset convert", "write any dataset as D4RL HDF5, Minari or NeoRL npz",
            "dataset_convert", run_dataset_convert, positional="source",
            usage="reverie dataset convert SOURCE out=PATH format=d4rl|minari|neorl"),
    Command("dataset train-behavior", "train (or resume) the TD3 behaviour policies of a task; publish its zoo",
            "dataset_train_behavior", run_dataset_train_behavior, writes_run=True,
            usage="reverie dataset train-behavior task=hopper [total_steps=N] [budget_minutes=M] [publish=true]"),
    Command("fit", "fit a world model (world_model=ensemble) to a dataset; report holdout error per member",
            "fit", run_fit, writes_run=True, resumable=True, usage="reverie fit world_model=ensemble dataset=hopper-medium-replay"),
    Command("train", "train a learner (agent=mopo|mobile|ravl|neubay|mbpo|td3bc|iql) on a dataset and its world model",
            "train", run_train, writes_run=True, resumable=True,
            usage="reverie train agent=mopo dataset=hopper-medium-replay [train.steps=N] [seed=S] [run_dir=DIR]"),
    Command("bench", "run agents x datasets x seeds as a resumable Hydra multirun; write results.csv and .md",
            "bench", run_bench, usage="reverie bench [agents=[mopo,td3bc]] [datasets=[...]] [seeds=[0,1,2]] "
            "[steps=N] [jobs=J] [out=DIR]"),
    Command("evaluate", "run policies in the simulator and in a world model; how far the imagined ranking holds",
            "evaluate", run_evaluate, writes_run=True, resumable=True,
            usage="reverie evaluate task=hopper policies=[zoo,runs/train/X] [world_model.checkpoint=PATH] "
                  "[start=dataset|reset] [horizon=N]"),
    Command("tune", "search a learner's hyper-parameters with Optuna, by simulator score or by an offline "
            "objective (its value in a held-out world model)", "tune", run_tune,
            usage="reverie tune agent=mopo dataset=hopper-medium-replay objective=simulator|offline [trials=N] "
                  "[steps=N] [jobs=J] [launcher=joblib|ray]"),
    Command("demo", "the main job on the embedded default: a small hopper dataset, MOPO trained on it, the zoo and "
            "MOPO evaluated in the simulator and in the world model",
            "demo", run_demo, writes_run=True),
]}


# --------------------------------------------------------------------------- plumbing
def _top_help() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = ["usage: reverie <command> [SOURCE] [key=value ...] [--cfg job] [--json] [--debug]", "",
             "Model-based offline RL and world-model rollouts for robotics.", "", "commands:"]
    lines += [f"  {c.name:<{width}}  {c.summary}" for c in COMMANDS.values()]
    lines += ["", "Every command takes Hydra overrides (key=value); `reverie <command> --help` shows its options,",
              "`--cfg job` prints the composed config, `--debug` shows tracebacks."]
    return "\n".join(lines)


def _group_help(prefix: str) -> str:
    subs = [c for n, c in COMMANDS.items() if n.startswith(prefix + " ")]
    width = max(len(c.name) for c in subs)
    return "\n".join([f"usage: reverie {prefix} <subcommand> ...", "", "subcommands:"]
                     + [f"  {c.name:<{width}}  {c.summary}" for c in subs])


def _command_help(cmd: Command, cfg_yaml: str) -> str:
    groups = sorted(p.name for p in CONFIG_DIR.iterdir() if p.is_dir() and not p.name.startswith("_")
                    and p.name not in ("hydra", "search_space"))
    choices = {g: sorted(f.stem for f in (CONFIG_DIR / g).glob("*.yaml")) for g in groups}
    lines = [f"usage: {cmd.usage or 'reverie ' + cmd.name + ' [key=value ...]'}", "", cmd.summary, "",
             "options (override any as key=value; configs/" + cmd.config + ".yaml):", ""]
    lines += ["  " + ln for ln in cfg_yaml.rstrip().splitlines()]
    lines += ["", "config groups:"] + [f"  {g}: {', '.join(c)}" for g, c in choices.items()]
    lines += ["", "flags: --cfg job (print the composed config), --debug (tracebacks)"
              + (", --json (machine-readable output)" if cmd.name in ("tasks", "dataset info") else "")]
    return "\n".join(lines)


def _compose(cmd: Command, overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if not OmegaConf.has_resolver("now"):
        OmegaConf.register_new_resolver("now", lambda fmt: time.strftime(fmt))
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            return compose(config_name=cmd.config, overrides=overrides)
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        for ov in overrides:
            key, _, value = ov.partition("=")
            group = CONFIG_DIR / key.lstrip("+~")
            if group.is_dir() and not (group / f"{value}.yaml").is_file():
                options = ", ".join(sorted(f.stem for f in group.glob("*.yaml")))
                msg = f"unknown {key} '{value}': expected one of {options}"
        raise ReverieError(f"{cmd.name}: {msg}") from None


def _split_args(argv: list[str]) -> tuple[Command | None, str | None, list[str], dict]:
    flags = {"help": False, "debug": False, "json": False, "cfg": None}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            flags["help"] = True
        elif a == "--debug":
            flags["debug"] = True
        elif a == "--json":
            flags["json"] = True
        elif a == "--cfg" or a.startswith("--cfg="):
            if a == "--cfg":
                i += 1
                flags["cfg"] = argv[i] if i < len(argv) else ""
            else:
                flags["cfg"] = a.split("=", 1)[1]
        else:
            rest.append(a)
        i += 1
    words = [a for a in rest if "=" not in a and not a.startswith("-")]
    cmd = None
    for n in (2, 1):
        name = " ".join(words[:n])
        if len(words) >= n and name in COMMANDS:
            cmd = COMMANDS[name]
            for w in words[:n]:
                rest.remove(w)
            break
    group = words[0] if cmd is None and words else None
    return cmd, group, rest, flags


def _make_run_dir(cfg: DictConfig, overrides: list[str], resumable: bool = False) -> Path:
    base = run_dir = Path(str(cfg.run_dir))
    if resumable and (run_dir / "config.yaml").is_file():
        return _resume_run_dir(run_dir, cfg)
    k = 1
    while run_dir.exists() and any(run_dir.iterdir()):  # two runs in one second: never mix their files
        run_dir, k = base.with_name(f"{base.name}-{k}"), k + 1
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    (run_dir / "overrides.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(list(overrides))))
    return run_dir


# Options that decide where a run's work executes, not what it computes: a run may resume with others.
# ``threads`` is one: a run begun on one core resumes on two (float sums may round differently, as any
# change of machine makes them).
HOW_NOT_WHAT = ("parallel", "ray", "threads")


def _resume_run_dir(run_dir: Path, cfg: DictConfig) -> Path:
    """Resume only the run that directory holds: the same resolved config, key for key."""
    old = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"), resolve=True)
    new = OmegaConf.to_container(cfg, resolve=True)

    missing = object()

    def first_difference(a, b, prefix=""):
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                d = first_difference(a.get(key, missing), b.get(key, missing), f"{prefix}{key}.")
                if d:
                    return d
            return None
        key = prefix.rstrip(".")
        if key.split(".")[0] in HOW_NOT_WHAT:
            return None
        if a is missing and b == _packaged_default(key, new):
            return None  # an option added after this run began, left at its default: the same run
        return None if a == b else (key, None if a is missing else a, None if b is missing else b)

    diff = first_difference(old, new)
    if diff:
        raise ReverieError(f"{run_dir}: holds a run with {diff[0]}={diff[1]!r}, not {diff[2]!r}; "
                           "resume it with the same options or choose another run_dir")
    return run_dir


def _packaged_default(key: str, cfg: dict):
    """The value the shipped configs give a dotted key (``device``, ``agent.window``), or a sentinel."""
    group, _, rest = key.partition(".")
    name = cfg.get(group, {}).get("name") if isinstance(cfg.get(group), dict) else None
    path, inner = ((CONFIG_DIR / group / f"{name}.yaml", rest) if name and (CONFIG_DIR / group).is_dir()
                   else (CONFIG_DIR / "train.yaml", key))
    # A default that refers to another option (MOBILE's actor_decay_steps: ${train.steps}) has no value of its own:
    # taken as null, the option's off state, which is how a run begun before the option existed ran.
    from omegaconf.errors import InterpolationResolutionError

    try:
        node = OmegaConf.select(OmegaConf.load(path), inner, default=_NO_DEFAULT) if path.is_file() else _NO_DEFAULT
    except InterpolationResolutionError:
        return None
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


_NO_DEFAULT = object()


def _remove_if_empty_run(run_dir: Path | None) -> None:
    """A run refused for bad input leaves no run directory behind (only its own config was in it)."""
    if run_dir is None or not run_dir.is_dir():
        return
    produced = [p for p in run_dir.rglob("*") if p.is_file() and p.name not in ("config.yaml", "overrides.yaml")
                and not p.name.startswith("events.out.tfevents")]
    if not produced:
        import shutil
        shutil.rmtree(run_dir)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd, group, rest, flags = _split_args(argv)
    try:
        if cmd is None:
            if group is None:
                print(_top_help())
                return 0 if flags["help"] or not argv else EXIT_BAD_INPUT
            if any(n.startswith(group + " ") for n in COMMANDS):
                print(_group_help(group))
                return 0 if flags["help"] or len(rest) == 0 else EXIT_BAD_INPUT
            raise ReverieError(f"unknown command '{group}': expected one of "
                               f"{', '.join(sorted({n.split()[0] for n in COMMANDS}))} (see reverie --help)")
        overrides = [a for a in rest if "=" in a]
        bare = [a for a in rest if "=" not in a]
        if bare and (cmd.positional is None or len(bare) > 1):
            raise ReverieError(f"{cmd.name}: unexpected argument '{bare[-1]}' (options are key=value)")
        if flags["json"]:
            overrides.append("json=true")
        cfg = _compose(cmd, overrides)
        if bare:
            cfg[cmd.positional] = bare[0]
        if flags["help"]:
            print(_command_help(cmd, OmegaConf.to_yaml(cfg)))
            return 0
        if flags["cfg"] is not None:
            if flags["cfg"] != "job":
                raise ReverieError(f"--cfg: expected 'job', got '{flags['cfg']}'")
            print(OmegaConf.to_yaml(cfg), end="")
            return 0
        missing = sorted(OmegaConf.missing_keys(cfg))
        if missing:
            raise ReverieError(f"{cmd.name}: option '{missing[0]}' is required"
                               + (f" (usage: {cmd.usage})" if cmd.usage else ""))
        retain_freed_memory()        # no page faults on every update's activations (envs/allocator.py)
        ctx = RunContext(_make_run_dir(cfg, overrides, cmd.resumable) if cmd.writes_run else None, overrides)
        refused = False
        try:
            code = cmd.run(cfg, ctx)
        except ReverieError:
            refused = True
            raise
        finally:
            ctx.close()
            if refused:
                _remove_if_empty_run(ctx.run_dir)
        if ctx.run_dir is not None:
            print(f"run directory: {ctx.run_dir}", file=sys.stderr)
        return int(code or 0)
    except ReverieError as exc:
        if flags["debug"]:
            raise
        print(f"reverie: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Stopped as exc:          # a signal, taken between updates: the checkpoint is at that update
        print(f"reverie: {exc}", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print("reverie: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
