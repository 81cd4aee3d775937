"""``reverie bench``: the same training protocol over agents x datasets x seeds.

The grid is a Hydra multirun (``python -m eval.bench --multirun ...``), one job
per cell, through the joblib launcher (processes on this machine) or the Ray
launcher (tasks on a local Ray or a cluster; ``launcher=ray``). A cell is one ``reverie train`` in its own
process and its own directory, ``<out>/cells/<agent>/<dataset>/seed<S>``: a
finished cell (``result.json``) is skipped, an unfinished one resumes from its
checkpoint, so the grid can span sessions; cells already begun run first (``run_order``). A ``ledger`` (a CSV kept outside ``out``, such as
one committed beside the report) carries finished cells across machines whose ``out`` is lost: its
cells are skipped, each cell that finishes is added to it. ``collect`` then writes
``results.csv`` (one row per finished cell) and ``results.md`` (normalized
score mean ± std per agent and dataset, beside the dataset's behaviour score,
with wall-clock and updates per second).
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import re
import signal
import subprocess
import sys
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import hydra
import numpy as np
from omegaconf import DictConfig

from agents.registry import AGENTS
from envs.atomic_io import write_text
from envs.errors import ReverieError
from eval import children

COLUMNS = ["agent", "dataset", "source", "dataset_size", "dataset_fingerprint", "behaviour_score", "seed", "steps",
           "normalized_score", "normalized_std", "return_mean", "eval_episodes", "train_seconds", "updates_per_second",
           "command", "note"]


def dataset_label(dataset: str) -> str:
    """A built-in or D4RL name as it is; a path by its file's stem."""
    return Path(dataset).stem if "/" in dataset or Path(dataset).suffix else dataset


def cell_dir(out: Path, agent: str, dataset: str, seed: int) -> Path:
    return out / "cells" / agent / dataset_label(dataset) / f"seed{seed}"


def row_key(row: dict) -> tuple[str, str, int, int]:
    """A finished cell's identity: agent, dataset, seed and budget."""
    return str(row["agent"]), dataset_label(str(row["dataset"])), int(row["seed"]), int(row["steps"])


def of_grid(row: dict, steps: int, size: int | None) -> bool:
    """Whether a finished cell ran at this budget and, where a size is asked for, on that many transitions
    (``size=None`` takes a dataset whole, whatever its size)."""
    if int(row["steps"]) != int(steps):
        return False
    return size is None or row.get("dataset_size") not in (None, "") and int(row["dataset_size"]) == int(size)


def ledger_columns(path: Path | None) -> list[str]:
    """The columns to write: ours, then any others the file has (a newer Reverie's), which are kept."""
    if path is None or not path.is_file():
        return list(COLUMNS)
    with open(path, newline="") as f:
        header = next(csv.reader(f), [])
    return [*COLUMNS, *(c for c in header if c not in COLUMNS)]


def read_ledger(path: Path | None) -> list[dict]:
    """The rows of a ledger of finished cells; none where there is no ledger yet."""
    if path is None or not path.is_file():
        return []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = {"agent", "dataset", "seed", "steps", "normalized_score"} - set(reader.fieldnames or [])
        if missing:
            raise ReverieError(f"{path}: not a bench ledger: no column(s) {', '.join(sorted(missing))}")
        return [dict(r) for r in reader]


def csv_text(rows: list[dict], columns: list[str] = COLUMNS) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def merge_rows(*sources: list[dict], columns: list[str] = COLUMNS) -> list[dict]:
    """Rows by cell; a later source's row replaces an earlier one's for the same cell, field by field where
    it has a value (a result written before a column existed leaves what the ledger holds there)."""
    merged: dict[tuple, dict] = {}
    for rows in sources:
        for r in rows:
            key = (*row_key(r), str(r.get("dataset_size") or ""))
            old = merged.get(key, {})
            merged[key] = {k: r.get(k) if r.get(k) not in (None, "") else old.get(k) for k in columns}
    return [merged[k] for k in sorted(merged)]


@contextmanager
def locked(path: Path):
    """An exclusive lock on ``path`` (``<path>.lock`` beside it), waited for: one writer at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def update_ledger(ledger: Path, new: list[dict]) -> list[dict]:
    """Add (or replace) finished cells' rows in the ledger, atomically, one writer at a time, keeping
    columns this version does not know; returns every row."""
    with locked(ledger):
        columns = ledger_columns(ledger)
        rows = merge_rows(read_ledger(ledger), new, columns=columns)
        write_text(ledger, csv_text(rows, columns))
    return rows


def record(ledger: Path, result: dict) -> None:
    """One finished cell's row into the ledger."""
    update_ledger(ledger, [result])


def ledger_path(cfg: DictConfig, cwd: Path | None = None) -> Path | None:
    if not cfg.get("ledger"):
        return None
    return ((cwd or Path.cwd()) / Path(str(cfg.ledger))).resolve()


def ledger_row(cfg: DictConfig, rows: list[dict], agent: str, dataset: str, seed: int) -> dict | None:
    """The ledger's row for this grid's cell (its budget and dataset size), if it has finished."""
    key = (agent, dataset_label(dataset), int(seed), int(cfg.steps))
    return next((r for r in rows if row_key(r) == key and of_grid(r, cfg.steps, cfg.size)), None)


def unfinished_cells(cfg: DictConfig) -> list[tuple[str, str, int]]:
    """The grid's cells (agent, dataset, seed) that have not finished, neither in ``out`` nor in the ledger:
    seeds vary slowest, then datasets, then agents."""
    out = Path(cfg.out).resolve()
    rows = read_ledger(ledger_path(cfg))
    return [(a, d, int(s)) for s in cfg.seeds for d in cfg.datasets for a in cfg.agents
            if not (cell_dir(out, a, d, s) / "result.json").is_file() and ledger_row(cfg, rows, a, d, s) is None]


def unfinished(cfg: DictConfig) -> list[Path]:
    out = Path(cfg.out).resolve()
    return [cell_dir(out, *c) for c in unfinished_cells(cfg)]


def run_order(cfg: DictConfig) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    """The unfinished cells as ``(begun, fresh)``; the grid starts ``begun + fresh`` in that order. Cells already
    begun (their folder exists) come first, the furthest along (by their checkpoints) first, so a grid that spans
    sessions finishes what it started before it starts more; then the fresh ones with seeds varying slowest, then
    datasets, so a whole first seed finishes before any second one starts and each dataset's agents (which may
    share a world model) run together."""
    out = Path(cfg.out).resolve()
    cells = unfinished_cells(cfg)
    begun = {c: checkpoint_step(cell_dir(out, *c)) or 0 for c in cells if cell_dir(out, *c).is_dir()}
    return sorted(begun, key=lambda c: -begun[c]), [c for c in cells if c not in begun]


def cell_threads(cfg: DictConfig) -> int:
    """A cell's torch threads: ``threads`` where set (``jobs=1 threads=2``: one cell on two cores, for
    cells too long for one core in a session); else one under joblib, its reserved CPUs under Ray."""
    threads = cfg.get("threads")
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ReverieError(f"option 'threads': expected a positive whole number or null, got {threads!r}")
        return threads
    return max(1, int(cfg.ray.cpus_per_task)) if cfg.get("launcher") == "ray" else 1


def train_args(agent: str, dataset: str, seed: int, size: int | None, steps: int, run_dir: Path, threads: int,
               extra: list[str]) -> list[str]:
    """The ``reverie train`` arguments of one grid cell or search trial: its own run folder, its
    checkpoint dropped once it has finished, then ``extra`` overrides."""
    return ["train", f"agent={agent}", f"dataset={dataset}", f"seed={seed}",
            f"size={size if size is not None else 'null'}", f"train.steps={steps}", f"run_dir={run_dir}",
            "keep_checkpoint=false", f"threads={threads}", *extra]


def train_in_subprocess(args: list[str], log_path: Path, cwd: Path) -> int:
    """``reverie <args>`` in a child process started in ``cwd``, its output appended to ``log_path``."""
    with open(log_path, "a") as log:
        return children.call([sys.executable, "-m", "eval.cli", *args], stdout=log, stderr=subprocess.STDOUT,
                             cwd=cwd)


def cell_args(cfg: DictConfig, agent: str, dataset: str, seed: int, out: Path) -> list[str]:
    extra = list((cfg.agent_overrides or {}).get(agent, []) or [])
    return train_args(agent, dataset, seed, cfg.size, cfg.steps, cell_dir(out, agent, dataset, seed),
                      cell_threads(cfg), [*extra, *list(cfg.train_overrides or [])])


@contextmanager
def cell_lock(run_dir: Path):
    """An exclusive, non-blocking lock on one cell (``<cell>.lock`` beside it), held while it runs:
    yields False when another grid holds it. The kernel drops it if the holder dies."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(run_dir.parent / f"{run_dir.name}.lock", "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@hydra.main(config_path="../configs", config_name="bench", version_base="1.3")
def cell(cfg: DictConfig) -> float | None:
    """One Hydra job: one cell of the grid, run (or resumed) in its own process.
    Its output goes to ``<out>/logs/<agent>-<dataset>-seed<S>.log``."""
    from hydra.core.hydra_config import HydraConfig

    # a Ray worker runs in a folder of Ray's: relative paths mean what they meant where the grid began
    cwd = Path(HydraConfig.get().runtime.cwd)
    out = (cwd / Path(cfg.out)).resolve()
    agent, dataset, seed = cfg.cell.agent, cfg.cell.dataset, int(cfg.cell.seed)
    run_dir = cell_dir(out, agent, dataset, seed)
    ledger = ledger_path(cfg, cwd)
    if (run_dir / "result.json").is_file():
        return json.loads((run_dir / "result.json").read_text())["normalized_score"]
    row = ledger_row(cfg, read_ledger(ledger), agent, dataset, seed)
    if row is not None:
        return float(row["normalized_score"])
    log_path = out / "logs" / f"{agent}-{dataset_label(dataset)}-seed{seed}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with cell_lock(run_dir) as mine:
        if not mine:  # two grids sharing an out folder (and cells): the other one is running this cell
            print(f"cell {agent} {dataset} seed {seed} is running in another process; skipped", file=sys.stderr)
            return None
        code = train_in_subprocess(cell_args(cfg, agent, dataset, seed, out), log_path, cwd)
    if code in (128 + signal.SIGTERM, 128 + signal.SIGINT):     # the cell was asked to stop, and saved
        print(f"cell {agent} {dataset} seed {seed} stopped by a signal at its checkpoint (exit {code}); "
              f"the next run of the grid resumes it", file=sys.stderr)
        return None
    if code != 0:
        print(f"cell {agent} {dataset} seed {seed} failed (exit {code}); see {log_path}",
              file=sys.stderr)
        return None
    result = json.loads((run_dir / "result.json").read_text())
    if ledger is not None:
        record(ledger, result)
    return result["normalized_score"]


def hydra_string(value: str) -> str:
    """A string quoted for Hydra's override grammar (a dataset may be a path): a quote is escaped, and so are
    the backslashes just before a quote or the closing one; any other backslash is read as it is."""
    value = re.sub(r"(\\*)'", lambda m: m[1] * 2 + "\\'", str(value))
    return "'" + re.sub(r"(\\+)$", lambda m: m[1] * 2, value) + "'"


def multirun_command(cfg: DictConfig, overrides: list[str], cells: list[tuple[str, str, int]]) -> list[str]:
    """The Hydra multirun that runs ``cells`` (``run_order``), one job each, in that order: one sweep over
    the ``cell`` node's values."""
    passthrough = [o for o in overrides if not o.split("=", 1)[0] in ("agents", "datasets", "seeds", "jobs",
                                                                      "hydra_overrides")]
    choices = ",".join(f"{{agent:{a},dataset:{hydra_string(d)},seed:{s}}}" for a, d, s in cells)
    return [sys.executable, "-m", "eval.bench", "--multirun", f"cell=choice({choices})", *launcher_overrides(cfg),
            f"hydra.sweep.dir={Path(cfg.out).resolve() / 'hydra'}", "hydra.job.chdir=false", *passthrough]


LAUNCHERS_DIR = Path(__file__).resolve().parents[1] / "configs" / "hydra" / "launcher"


def check_launcher(cfg: DictConfig) -> None:
    """A grid's or search's ``launcher`` is one we can start; with ``ray``, its options are valid and
    Ray is installed."""
    known = ["joblib", "ray", *sorted(p.stem for p in LAUNCHERS_DIR.glob("*.yaml"))]
    if cfg.launcher not in known:
        raise ReverieError(f"option 'launcher': expected one of {', '.join(known)}, got '{cfg.launcher}'")
    if cfg.launcher == "ray":
        from eval.parallel import RayOptions, import_ray

        RayOptions.from_config(cfg.ray)
        import_ray()


def launcher_overrides(cfg: DictConfig) -> list[str]:
    """Hydra's launcher for the grid: joblib processes here, Ray tasks (one per cell, each
    reserving ``ray.cpus_per_task`` CPUs) on a local Ray started for the grid or on a cluster, or a
    launcher configured in ``configs/hydra/launcher`` (``slurm``); ``hydra_overrides`` go with it."""
    extra = [str(o) for o in (cfg.get("hydra_overrides") or [])]
    if cfg.launcher == "joblib":
        # one cell a dispatch: joblib's auto batching grows its batches after jobs quicker than 0.2 s (a skipped
        # finished cell took about 1 s here, but a faster machine may get there) and would then hand one worker
        # several cells at once, leaving the other idle beside hours of training
        return ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={cfg.jobs}", "hydra.launcher.batch_size=1", *extra]
    if cfg.launcher != "ray":     # a launcher of configs/hydra/launcher (slurm): config only
        return [f"hydra/launcher={cfg.launcher}", *extra]
    from eval.parallel import RayOptions

    opts = RayOptions.from_config(cfg.ray)
    if not opts.address and opts.num_cpus is None:
        opts.num_cpus = int(cfg.jobs * opts.cpus_per_task)
    init = opts.init_kwargs()
    out = ["hydra/launcher=ray", f"hydra.launcher.ray.init.address={init.pop('address', None) or 'null'}"]
    out += [f"+hydra.launcher.ray.init.{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in init.items()]
    out += [f"+hydra.launcher.ray.remote.num_cpus={opts.cpus_per_task}",
            f"+hydra.launcher.ray.remote.num_gpus={opts.gpus_per_task}"]
    return out + extra


def behaviour_scores(sources: dict[str, str], size: int | None) -> dict[str, float]:
    """Each dataset's own normalized score (its episodes' mean), by dataset name."""
    from envs.info import dataset_info
    from envs.sources import load_source

    return {name: dataset_info(load_source(src, size=size))["normalized_score"] for name, src in sources.items()}


def collect(out: Path, size: int | None, budget: int, command: str,
            ledger: Path | None = None) -> tuple[Path, Path, int]:
    """The finished cells of ``out`` (and of ``ledger``, which gains ``out``'s) as ``results.csv``, and
    those of this budget and dataset size as the tables of ``results.md``."""
    found = []
    for result in sorted(out.glob("cells/*/*/seed*/result.json")):
        if result.parent.name.removeprefix("seed").isdigit():
            found.append(json.loads(result.read_text()))
    everything = update_ledger(ledger, found) if ledger is not None else merge_rows(found)
    write_text(out / "results.csv", csv_text(everything))
    rows = [r for r in everything if of_grid(r, budget, size)]
    for r in rows:
        for k in ("normalized_score", "train_seconds", "updates_per_second"):
            r[k] = float(r[k]) if r.get(k) not in (None, "") else float("nan")

    by_cell: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        by_cell[(r["dataset"], r["agent"])].append(r)
    datasets = sorted({r["dataset"] for r in rows})
    order = list(AGENTS)
    agents = sorted({r["agent"] for r in rows}, key=lambda a: order.index(a) if a in order else len(order))
    # each cell's own data's score where it recorded one (machines make their own copies), else this machine's
    recorded = defaultdict(list)
    for r in rows:
        if r.get("behaviour_score") not in (None, ""):
            recorded[r["dataset"]].append(float(r["behaviour_score"]))
    behaviour = behaviour_scores({r["dataset"]: r.get("source") or r["dataset"] for r in rows
                                  if r["dataset"] not in recorded}, size)
    behaviour.update({d: float(np.mean(v)) for d, v in recorded.items()})
    if not rows:
        write_text(out / "results.md", "\n".join(["# Benchmark", "", "No finished cells yet.", "",
                                                  "## Cells started but unfinished", ""] + (started(out) or ["none"]))
                   + "\n")
        return out / "results.csv", out / "results.md", 0
    lines = [f"# Benchmark: normalized score (D4RL reference), mean ± std over seeds", "",
             f"Budget: {budget:,} gradient updates per cell; built-in datasets of "
             f"{'their D4RL size' if size is None else f'{size:,} transitions'}; final score over each cell's "
             "evaluation episodes. (n) = seeds finished (one seed: no spread shown). Behaviour: the normalized return of the data the cells "
             "learned from (each machine makes its own copy of a built-in dataset; copies differ slightly).", "", f"Command: `{command}`", "",
             "| dataset | behaviour | " + " | ".join(agents) + " |",
             "|---|---:|" + "---:|" * len(agents)]
    for d in datasets:
        cells = []
        for a in agents:
            s = [r["normalized_score"] for r in by_cell.get((d, a), [])]
            cells.append("—" if not s else f"{s[0]:.1f} (1)" if len(s) == 1 else
                         f"{np.mean(s):.1f} ± {np.std(s):.1f} ({len(s)})")
        lines.append(f"| {d} | {behaviour[d]:.1f} | " + " | ".join(cells) + " |")
    lines += ["", "| agent | cells | wall-clock per cell (min) | updates/s |", "|---|---:|---:|---:|"]
    for a in agents:
        rs = [r for r in rows if r["agent"] == a]
        lines.append(f"| {a} | {len(rs)} | {np.mean([r['train_seconds'] for r in rs]) / 60:.1f} | "
                     f"{np.mean([r['updates_per_second'] for r in rs]):.1f} |")
    lines += ["", "## Cells started but unfinished", ""] + (started(out) or ["none"])
    write_text(out / "results.md", "\n".join(lines) + "\n")
    return out / "results.csv", out / "results.md", len(rows)


def checkpoint_step(cell: Path) -> int | None:
    """How many updates an unfinished cell's checkpoint holds (None: no checkpoint yet)."""
    if (cell / "progress.json").is_file():
        return json.loads((cell / "progress.json").read_text())["step"]
    if (cell / "checkpoint.pt").is_file():
        import torch
        return torch.load(cell / "checkpoint.pt", map_location="cpu", weights_only=False)["step"]
    return None


def cells_left(cfg: DictConfig, left: list[Path], rows: list[dict]) -> str | None:
    """The grid's unfinished cells ``left`` (``unfinished``) per agent and the training they still need, at
    the mean wall-clock of that agent's finished cells of this budget in ``rows`` (a started cell counts from
    its checkpoint; world-model fits, which a cell runs before its first update, are not in that figure).
    None when every cell has finished."""
    if not left:
        return None
    seconds = defaultdict(list)
    for r in rows:
        if of_grid(r, cfg.steps, cfg.size) and r.get("train_seconds") not in (None, ""):
            seconds[r["agent"]].append(float(r["train_seconds"]))
    count, hours, unknown = defaultdict(int), 0.0, set()
    for cell in left:
        agent = cell.parts[-3]
        count[agent] += 1
        if not seconds[agent]:
            unknown.add(agent)
            continue
        done = (checkpoint_step(cell) or 0) / int(cfg.steps)
        hours += (1 - done) * float(np.mean(seconds[agent])) / 3600
    line = (f"{len(left)} cell{'' if len(left) == 1 else 's'} left: "
            + ", ".join(f"{a} {n}" for a, n in sorted(count.items())))
    if len(unknown) < len(count):                  # some agent's cells can be timed
        line += (f"; about {hours:.1f} core-hours of training at the finished cells' mean wall-clock per agent "
                 "(world-model fits not counted)")
    return line + (f"; no finished cell to time {', '.join(sorted(unknown))} by" if unknown else "")


def started(out: Path) -> list[str]:
    """One line per cell that has begun but not finished, with how far its checkpoint got."""
    lines = []
    for cell in sorted(out.glob("cells/*/*/seed*")):
        if (cell / "result.json").is_file() or not cell.parts[-1].removeprefix("seed").isdigit():
            continue
        step = checkpoint_step(cell)
        agent, dataset, seed = cell.parts[-3], cell.parts[-2], cell.parts[-1].removeprefix("seed")
        lines.append(f"- {agent} on {dataset}, seed {seed}: " + (f"checkpoint at {step:,} updates" if step else
                                                                   "started, no checkpoint yet"))
    return lines


if __name__ == "__main__":
    cell()
