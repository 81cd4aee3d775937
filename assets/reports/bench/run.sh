#!/usr/bin/env bash
# Issue 3's quality grid (and issue 4's NEUBAY comparison, which shares its folder), resumable across
# machines: every finished cell is added to the committed ledger results.csv beside this script and is
# skipped thereafter, even where runs/ is gone. A cell unfinished when the machine goes resumes from its last
# checkpoint in OUT (every 5,000 updates, and on SIGTERM) if OUT is still there, else starts again: a session
# starts the grid early. Cells already begun in OUT run first (the furthest along first); then seeds vary
# slowest, so every dataset's seed 0 finishes before any seed 1 starts. A cell another grid is running (its lock
# beside it in OUT) is skipped. OUT (default runs/bench/grid) may lie outside
# the checkout, e.g. OUT=~/reverie-grid/bench beside the model cache, so that the cells' folders (checkpoints,
# periodic evaluations, policies for the draws) outlive a checkout that is made anew on the same machine. Stage 'seedN' runs TD3+BC, IQL, MOPO and
# MOBILE on all six datasets for seed N, dataset by dataset (MOPO and MOBILE share the dataset's world model).
# Stage 'quick' runs only TD3+BC and IQL (about 20-40 min a cell), for the end of a session.
#   bash assets/reports/bench/run.sh [STAGE...]      stages (default: all, in this order): seed0 seed1 seed2 ravl neubay
# then commit assets/reports/bench/results.csv; `python assets/reports/bench/splice_tables.py` refreshes results.md's
# tables from it (a `reverie bench ... collect_only=true` into a scratch folder), keeping its prose.
set -euo pipefail
cd "$(dirname "$0")/../../.."
LEDGER=assets/reports/bench/results.csv
DATASETS="[hopper-medium,hopper-medium-replay,halfcheetah-medium,halfcheetah-medium-replay,walker2d-medium,walker2d-medium-replay]"
OUT=${OUT:-runs/bench/grid}
JOBS=${JOBS:-2}     # cells side by side; JOBS=1 leaves a core to a second run.sh (e.g. the ravl stage)
THREADS=${THREADS:-null}   # torch threads per cell (null: one); JOBS=1 THREADS=2: one NEUBAY cell on both cores
bench() { .venv/bin/reverie bench out=$OUT ledger=$LEDGER jobs=$JOBS threads=$THREADS "$@" || true; }
for stage in "${@:-seed0 seed1 seed2 ravl neubay}"; do
  for s in $stage; do
    case $s in
      seed[0-9])    bench "agents=[td3bc,iql,mopo,mobile]" "datasets=$DATASETS" "seeds=[${s#seed}]" ;;
      quick)        bench "agents=[td3bc,iql]" "datasets=$DATASETS" ;;
      ravl)         bench "agents=[ravl]" "datasets=$DATASETS" ;;
      neubay)       bench "agents=[neubay,mopo,mobile]" \
                      "datasets=[hopper-random,hopper-medium-replay,halfcheetah-random,halfcheetah-medium-replay,walker2d-random,walker2d-medium-replay]" ;;
      *) echo "run.sh: unknown stage '$s' (expected seed0, seed1, seed2, quick, ravl or neubay)" >&2; exit 2 ;;
    esac
  done
done
