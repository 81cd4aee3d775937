#!/usr/bin/env bash
# Issue 7: how far the loop's ranking rests on one fit. Fits the loop's ranking model (RANKING_MODEL, what
# `python -m eval.manipulation_loop`'s "ranking models" stage fits) over runs/manip/loop-ref's encoder with other
# seeds, and ranks the loop's zoo in each, as its "ranking the zoo" stage does (rank.sh: 50 resets, the model at its
# mean). Seed 0 is the loop's own fit 0 (runs/manip/loop-ref/ranking/fit0). Session 23 moved seeds 1 and 2 into the
# loop's layout as its fits 1 and 2. Every step resumes or is skipped where its product exists.
#   Usage: [SEEDS="1 2"] bash assets/reports/manipulation/draws/rank-seeds.sh
set -euo pipefail
cd "$(dirname "$0")/../../../.."
export MUJOCO_GL=egl PYTHONPATH=$PWD LOOP=runs/manip/loop-ref
draws=assets/reports/manipulation/draws
tasks="push pick-place door-open drawer-open"
for seed in ${SEEDS:-1 2}; do
  model=runs/manip/loop-rank-seed$seed/video.pt
  [ -f $model ] || RANKING=1 SEED=$seed .venv/bin/python $draws/fit_objects.py runs/manip/loop-ref/video.pt $model $tasks
  bash $draws/rank.sh $model runs/manip/rank-loop-seed$seed $tasks
  .venv/bin/python -m eval.pooled_ranking runs/manip/rank-loop-seed$seed/*/results.json \
    --out runs/manip/rank-loop-seed$seed/pooled.md
done
