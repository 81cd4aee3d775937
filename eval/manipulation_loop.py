"""The manipulation loop end to end, stage by stage, resumable: demos -> video world model -> BC VLA ->
real success -> fine-tuning on imagined rollouts -> real success again -> the ranking models -> the zoo ranked.

    python -m eval.manipulation_loop --out runs/manip/loop --report assets/reports/manipulation

Each stage writes its product into ``--out`` (the video model, the two policies, the success
tables, the ranking models and their verdicts) and is skipped when that product exists, so the loop spans sessions.
``stages.json`` keeps each stage's wall-clock summed over every attempt (``StageClock``): a stage cut short by the end
of a session and resumed in the next counts both. The reports: real success per task before and after fine-tuning,
over the same fixed seeds, with the stage times (``vla_finetuning.md``); the zoo's ranking in the ranking models
against the simulator, per task and pooled, with intervals (``zoo_ranking.md``).

A ranking model is the video model's frame encoder with the objects' positions in its latent state, the success
head on the object's relation to the goal, the hand mover and the matrix object mover (``RANKING_MODEL``), fitted on
every level's episodes of ``--rank-tasks``: the recipe ``assets/reports/manipulation/ranking.md`` arrived at. Fits of
it with other seeds, alike in held-out error, call push's and pick-place's weak policies apart (Pearson 0.59-0.91 on
push over three), so ``--rank-fits`` of them rank the zoo and the verdict is their mean. The fine-tuning keeps the
plain video model (its frame judge), which is what the policy was fine-tuned in.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from agents.networks import PRECISION_CHOICES
from envs.allocator import retain_freed_memory
from envs.atomic_io import atomic_path, write_json, write_text
from eval.metrics import bootstrap
from eval.threads import add_threads_argument, resolve_threads
from envs.manipulation import TASKS

EVAL_SEEDS = list(range(10_000, 10_050))
FAILURE_LEVELS = ("poor", "misdirected")   # the world model's failing episodes (seeds --seed + 2, + 3)
ZOO_NOISE = (0.5, 1.0)      # action-noise stds of the zoo's noisy copies of the fine-tuned policy
# the ranking model's settings over the video model's encoder (VideoWorldModel.over_encoder)
RANKING_MODEL = {"objects": True, "success_on": "objects", "hand_mover": True, "hand_horizon": 16,
                 "object_mover": True, "mover": "matrix"}
RANK_TASKS = ("metaworld-push", "metaworld-pick-place", "metaworld-door-open", "metaworld-drawer-open")


def main(argv: list[str] | None = None) -> int:
    from agents.vla import Tokenizer, VLAConfig, VLAPolicy, bc_tensors, noisy_copy, success_rate, train_bc
    from agents.vla_finetune import FinetuneConfig, finetune
    from envs.builtin import cache_dir
    from envs.manipulation_data import make_manipulation, read_manipulation
    from worldmodels.registry import fit_video_model, load_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/manip/loop")
    ap.add_argument("--report", default="assets/reports/manipulation")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--episodes", type=int, default=50, help="expert demonstrations per task")
    ap.add_argument("--coverage-episodes", type=int, default=25, help="noisy (medium) episodes per task, for the "
                    "world model only")
    ap.add_argument("--failure-episodes", type=int, default=25, help="poor and misdirected episodes per task, each, "
                    "for the world model only: actions that vary apart from the scene (in demonstrations the action "
                    "is nearly a function of the frame, and the dynamics learn to ignore it), and the success "
                    "judge's failures")
    ap.add_argument("--bc-episodes", type=int, default=None, help="demonstrations per task the policy learns from "
                    "(BC, and the real data and start frames of fine-tuning); default: all of --episodes. The world "
                    "model always sees all of them")
    ap.add_argument("--bc-steps", type=int, default=6000)
    ap.add_argument("--eval-episodes", type=int, default=50)
    ap.add_argument("--rank-tasks", default=",".join(RANK_TASKS), help="tasks whose zoo is ranked, and whose "
                    "episodes the ranking model is fitted on (a subset of --tasks; empty: no ranking stages)")
    ap.add_argument("--rank-epochs", type=int, default=60, help="the ranking model's dynamics epochs")
    ap.add_argument("--rank-fits", type=int, default=3, help="ranking models fitted (seeds --seed, --seed + 1, "
                    "...), each ranking the zoo; the verdict is their mean imagined success per policy")
    ap.add_argument("--rank-resets", type=int, default=50, help="simulator resets per policy in the ranking")
    ap.add_argument("--real-cache", default=None, help="where the ranking keeps its simulator rollouts (default: "
                    "OUT/real-cache); they are keyed by the policy file's bytes, so loops may share one")
    ap.add_argument("--video-precision", default="auto", choices=PRECISION_CHOICES,
                    help="the video model's autoencoder and dynamics updates (world_model.precision): auto is "
                    "bfloat16 where the CPU has it natively; its autoencoder fit ran 2.1x faster and reconstructed "
                    "unseen frames as well as float32's (tests/bench/bench_video.py)")
    add_threads_argument(ap)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.bc_episodes is not None and not 1 <= args.bc_episodes <= args.episodes:
        ap.error(f"--bc-episodes: expected 1..{args.episodes} (--episodes), got {args.bc_episodes}")
    rank_tasks = [t for t in args.rank_tasks.split(",") if t]
    unknown = sorted(set(rank_tasks) - set(args.tasks.split(",")))
    if unknown:
        ap.error(f"--rank-tasks: expected tasks among --tasks, got {', '.join(unknown)}")
    if args.rank_epochs < 1 or args.rank_fits < 1 or args.rank_resets < 2:
        ap.error(f"--rank-epochs, --rank-fits, --rank-resets: expected at least 1, 1 and 2, got {args.rank_epochs}, "
                 f"{args.rank_fits} and {args.rank_resets}")
    torch.set_num_threads(resolve_threads(args.threads))
    retain_freed_memory()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    clock = StageClock(out / "stages.json")
    tasks = args.tasks.split(",")
    seeds = EVAL_SEEDS[:args.eval_episodes]

    def stage(name: str, product: Path | list[Path], fn) -> None:
        if all(p.exists() for p in ([product] if isinstance(product, Path) else product)):
            return
        print(f"== {name}", flush=True)
        with clock.running(name):
            fn()

    demos, coverage = {}, {}

    def make_demos():
        for t in tasks:
            make_manipulation(t, "expert", args.episodes, args.seed, cache_dir())
            make_manipulation(t, "medium", args.coverage_episodes, args.seed + 1, cache_dir())
            for k, level in enumerate(FAILURE_LEVELS):
                make_manipulation(t, level, args.failure_episodes, args.seed + 2 + k, cache_dir())
        write_json(out / "demos.json", {"tasks": tasks, "episodes": args.episodes,
                                        "coverage_episodes": args.coverage_episodes,
                                        "failure_episodes": args.failure_episodes})

    stage("demonstrations", out / "demos.json", make_demos)
    for t in tasks:
        demos[t] = read_manipulation(make_manipulation(t, "expert", args.episodes, args.seed, cache_dir())[0]).episodes
        coverage[t] = read_manipulation(make_manipulation(t, "medium", args.coverage_episodes, args.seed + 1,
                                                          cache_dir())[0])
    policy_demos = {t: demos[t][:args.bc_episodes] for t in tasks}      # [:None] keeps them all
    video_path = out / "video.pt"

    def failures(t: str) -> list:
        return [read_manipulation(make_manipulation(t, level, args.failure_episodes, args.seed + 2 + k,
                                                    cache_dir())[0]) for k, level in enumerate(FAILURE_LEVELS)]

    def fit_video():
        from envs.manipulation_data import ManipulationDataset
        sets = [ManipulationDataset(demos[t], {"task": t, "image_size": 64}) for t in tasks] + list(coverage.values())
        sets += [ds for t in tasks for ds in failures(t)]
        model, metrics = fit_video_model(sets, {"name": "video", "precision": args.video_precision}, args.seed,
                                         checkpoint=out / "video_fit",          # resumes a fit cut short
                                         progress=lambda s, e, v: print(f"  {s} epoch {e}: {v:.4f}", flush=True))
        write_json(out / "video_metrics.json", metrics)
        model.save(video_path)

    stage("video world model", video_path, fit_video)
    texts = [x for t in tasks for x in TASKS[t].templates("all")]
    bc_path = out / "vla_bc.pt"

    def bc():
        torch.manual_seed(args.seed)
        policy = VLAPolicy(VLAConfig(), Tokenizer.from_texts(texts))
        data = bc_tensors([e for t in tasks for e in policy_demos[t]], policy.cfg.chunk)

        def snapshot(step, p):     # the manipulation zoo: BC policies of graded quality
            with atomic_path(out / "zoo" / f"vla_bc_step{step:05d}.pt", suffix=".pt") as tmp:
                torch.save(p.save_blob(), tmp)

        train_bc(policy, data, args.bc_steps, torch.Generator().manual_seed(args.seed),
                 progress=lambda s, l: print(f"  BC step {s}: L1 {l:.4f}", flush=True), snapshot=snapshot,
                 snapshot_steps={100, 250, 500, 1000, 2000, 3000, 4500})
        with atomic_path(bc_path, suffix=".pt") as tmp:
            torch.save(policy.save_blob(), tmp)

    stage("behaviour cloning", bc_path, bc)

    def evaluate(policy_path: Path, table: Path):
        def run():
            policy = VLAPolicy.from_blob(torch.load(policy_path, weights_only=False))
            rows = [success_rate(policy, t, seeds) for t in tasks]
            for r in rows:
                print(f"  {r['task']:<32} {100 * r['success_rate']:5.1f}% of {r['episodes']}", flush=True)
            write_json(table, rows)
        return run

    stage("evaluation before fine-tuning", out / "success_bc.json", evaluate(bc_path, out / "success_bc.json"))
    ft_path = out / "vla_finetuned.pt"

    def fine_tune():
        policy = VLAPolicy.from_blob(torch.load(bc_path, weights_only=False))
        model = load_model(video_path)
        history = finetune(policy, model, policy_demos, FinetuneConfig(), torch.Generator().manual_seed(args.seed))
        write_json(out / "finetune.json", history)
        with atomic_path(ft_path, suffix=".pt") as tmp:
            torch.save(policy.save_blob(), tmp)

    stage("fine-tuning on imagined rollouts", ft_path, fine_tune)
    for std in ZOO_NOISE:          # the zoo's noisy copies of the best policy fill the middle of its range
        noisy = out / "zoo" / f"vla_finetuned_noise{std:.1f}.pt"
        if not noisy.exists():
            with atomic_path(noisy, suffix=".pt") as tmp:
                torch.save(noisy_copy(torch.load(ft_path, weights_only=False), std), tmp)
    stage("evaluation after fine-tuning", out / "success_finetuned.json",
          evaluate(ft_path, out / "success_finetuned.json"))

    rank_paths = [out / f"rank_video_fit{k}.pt" for k in range(args.rank_fits)]

    def fit_ranking_models():
        episodes = [e for t in rank_tasks
                    for e in demos[t] + coverage[t].episodes + [e for ds in failures(t) for e in ds.episodes]]
        for k, path in enumerate(rank_paths):              # a fit already made is kept
            if path.exists():
                continue
            print(f"  fit {k} (seed {args.seed + k})", flush=True)
            metrics = fit_over_encoder(video_path, path, RANKING_MODEL, episodes, rank_tasks, args.seed + k,
                                       args.rank_epochs)
            write_json(path.with_suffix(".metrics.json"), metrics)

    ranked = out / "ranking" / "pooled.md"
    run_dirs = [(k, t, out / "ranking" / f"fit{k}" / t.removeprefix("metaworld-"))
                for k in range(args.rank_fits) for t in rank_tasks]
    pool_argv = [*(str(d / "results.json") for _, _, d in run_dirs), "--out", str(ranked)]

    def rank():
        from eval.cli import main as reverie
        from eval.pooled_ranking import main as pooled

        for k, t, run_dir in run_dirs:                       # a task already ranked is kept
            path = rank_paths[k]
            if not (run_dir / "results.json").exists():
                data = make_manipulation(t, "expert", args.episodes, args.seed, cache_dir())[0]
                code = reverie(["evaluate", f"task={t}", f"world_model.checkpoint={path}",
                                f"policies=[{out / 'zoo'},{bc_path},{ft_path}]", f"dataset={data}",
                                f"rows={args.rank_resets}", f"threads={args.threads}", "sample_model=false",
                                f"real_cache={args.real_cache or out / 'real-cache'}", f"run_dir={run_dir}"])
                if code:
                    raise SystemExit(code)
        if pooled(pool_argv):
            raise SystemExit(2)

    if rank_tasks:
        for k in stale_fits(video_path, rank_paths, RANKING_MODEL, args.rank_epochs):
            print(f"  {rank_paths[k]}: fitted with other settings than the ranking model's now; it and its "
                  "rankings are made again", flush=True)
            rank_paths[k].unlink()
            shutil.rmtree(out / "ranking" / f"fit{k}", ignore_errors=True)
            ranked.unlink(missing_ok=True)
        stage("ranking models", rank_paths, fit_ranking_models)
        pooled_json = ranked.with_suffix(".json")            # pooled over other fits or tasks: pooled again
        if pooled_json.exists() and json.loads(pooled_json.read_text()).get("command") != \
                "python -m eval.pooled_ranking " + " ".join(pool_argv):
            ranked.unlink(missing_ok=True)
        stage("ranking the zoo", ranked, rank)

    before = {r["task"]: r for r in json.loads((out / "success_bc.json").read_text())}
    after = {r["task"]: r for r in json.loads((out / "success_finetuned.json").read_text())}
    command = "python -m eval.manipulation_loop " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = ["# VLA fine-tuned on imagined rollouts in the video world model", "",
             f"Real MetaWorld success over the same {len(seeds)} seeds per task ({seeds[0]}..{seeds[-1]}), "
             "instructions from the training templates. Command: `" + command + "`", "",
             f"The policy learns from {args.bc_episodes or args.episodes} expert demonstrations per task; the video "
             f"world model from {args.episodes} expert and {args.coverage_episodes} medium (noisy) episodes per task"
             + (f", and {args.failure_episodes} poor and {args.failure_episodes} misdirected (the arm moving and "
                "missing)" if "failure_episodes" in json.loads((out / "demos.json").read_text()) else "")
             + f"; its fit's arithmetic: {fit_precision(video_path)}.",
             "",
             *change_table(before, after, tasks), "| stage | wall-clock (s) |", "|---|---:|"]
    lines += [f"| {k} | {v:.0f} |" for k, v in clock.times.items()]
    write_text(Path(args.report) / "vla_finetuning.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    if rank_tasks:
        text = ranked.read_text()
        write_text(Path(args.report) / "zoo_ranking.md", "\n".join([
            "# The loop's zoo ranked in the ranking model and in the simulator", "",
            f"Loop command: `{command}`. The zoo: the BC snapshots, the BC and fine-tuned policies and the fine-tuned "
            f"policy with action noise {' and '.join(map(str, ZOO_NOISE))} ({out / 'zoo'}); each from "
            f"{args.rank_resets} simulator resets (seeds 20000..{20000 + args.rank_resets - 1}), the model at its "
            f"mean. The ranking models: {', '.join(f'{k}={v}' for k, v in RANKING_MODEL.items())} over the video "
            f"model's encoder, {args.rank_epochs} epochs on {', '.join(rank_tasks)}, {args.rank_fits} fits (seeds "
            f"{args.seed}..{args.seed + args.rank_fits - 1}), their imagined success averaged per policy. "
            f"Per-task reports: {out / 'ranking'}/fit<k>/<task>/.", "", text]))
        print(text, end="")
    return 0


def fit_precision(path: Path) -> str:
    """A saved video model's ``world_model.precision``, and what ``auto`` means on this machine."""
    from agents.networks import resolve_precision
    from worldmodels.registry import load_model

    precision = load_model(path).cfg.precision
    return precision if precision != "auto" else f"auto ({resolve_precision(precision)} on this machine)"


def stale_fits(base: Path, paths: list[Path], settings: dict, epochs: int) -> list[int]:
    """Which of the fits at ``paths`` that exist were not made as ``fit_over_encoder(base, ..., settings, ...,
    epochs)`` would make them now (the recipe or a default changed since): their indices."""
    from dataclasses import replace

    from worldmodels.base import fit_identity
    from worldmodels.registry import load_model

    kept = [k for k, p in enumerate(paths) if p.exists()]
    if not kept:
        return []
    now = fit_identity(replace(load_model(base).cfg, **settings, max_epochs=epochs))
    return [k for k in kept if fit_identity(load_model(paths[k]).cfg) != now]


def fit_over_encoder(base: Path, out: Path, settings: dict, episodes: list, tasks: list[str], seed: int,
                     epochs: int) -> dict:
    """A model over the video model ``base``'s frame encoder and judge with ``settings`` changed
    (``VideoWorldModel.over_encoder``), for ``tasks``: its new parts' weights and its fit seeded with ``seed``, the
    rest fitted on ``episodes`` (dynamics: ``epochs`` epochs), saved at ``out``. The dynamics' progress is written
    beside ``out`` after every epoch, so a fit cut short (a session's end) resumes. Returns the fit's figures, with
    its seconds."""
    import dataclasses

    from worldmodels.registry import load_model

    torch.manual_seed(seed)
    model = load_model(base).over_encoder(**settings, max_epochs=epochs)
    model.spec = dataclasses.replace(model.spec, task=",".join(sorted(tasks)))
    partial = out.parent / f"{out.stem}.fit-checkpoint.pt"
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    metrics = model.fit_latent(episodes, torch.Generator().manual_seed(seed), checkpoint=partial,
                               progress=lambda s, e, v: print(f"  {s} {e}: {v:.4f}", flush=True))
    metrics["seconds"] = time.perf_counter() - t0
    model.save(out)
    partial.unlink(missing_ok=True)
    return metrics


class StageClock:
    """Each stage's wall-clock over all its attempts, kept in a JSON file ``{stage: seconds}``. While a stage
    runs, its time so far is written every ``every`` seconds from a background thread, so a process killed
    mid-stage (a session's end) loses at most that much; a resumed stage adds to what its earlier attempts
    spent."""

    def __init__(self, path: Path, every: float = 60.0):
        self.path, self.every = Path(path), every
        self.times: dict[str, float] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    @contextmanager
    def running(self, name: str):
        spent, t0 = self.times.get(name, 0.0), time.perf_counter()

        def save() -> None:
            self.times[name] = spent + time.perf_counter() - t0
            write_json(self.path, self.times)

        def beat() -> None:
            while not stop.wait(self.every):
                save()

        stop = threading.Event()
        thread = threading.Thread(target=beat, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            save()


def change_table(before: dict, after: dict, tasks: list[str]) -> list[str]:
    """Markdown lines: real success per task before and after fine-tuning, the change with a 95% bootstrap
    interval paired over seeds (when both tables hold each seed's outcome on the same seeds), and a count."""
    lines = ["| task | BC (demos only) | fine-tuned on imagined rollouts | change [95%, paired over seeds] |",
             "|---|---:|---:|---:|"]
    paired = all("wins" in before[t] and before[t].get("seeds") == after[t].get("seeds") for t in tasks)
    surely = 0
    for t in tasks:
        b, a = 100 * before[t]["success_rate"], 100 * after[t]["success_rate"]
        interval = ""
        if paired:
            ci = bootstrap(lambda x, y: float(np.mean(x) - np.mean(y)), np.array(after[t]["wins"], float),
                           np.array(before[t]["wins"], float))
            interval = f" [{100 * ci['low']:+.0f}, {100 * ci['high']:+.0f}]"
            surely += ci["low"] > 0
        lines.append(f"| {t} | {b:.0f}% | {a:.0f}% | {a - b:+.0f}{interval} |")
    raised = sum(after[t]["success_rate"] > before[t]["success_rate"] for t in tasks)
    return lines + ["", f"Raised on {raised} of {len(tasks)} tasks"
                    + (f"; on {surely} the whole 95% interval of the change is above zero." if paired else "."), ""]


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    sys.exit(main())
