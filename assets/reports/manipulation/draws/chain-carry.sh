#!/usr/bin/env bash
# Issue 7, for a machine that has rebuilt runs/manip/loop-ref (python -m eval.manipulation_loop --out
# runs/manip/loop-ref ...): rank the rebuilt loop's zoo with its own video model (the judge: the baseline for
# this zoo), then with positions and the carry mover fitted over its encoder (60 epochs, four tasks).
set -euo pipefail
cd /work/main
export MUJOCO_GL=egl PYTHONPATH=/work/main LOOP=runs/manip/loop-ref
draws=assets/reports/manipulation/draws
tasks="push pick-place door-open drawer-open"
bash $draws/rank.sh runs/manip/loop-ref/video.pt runs/manip/rank-ref2 $tasks
[ -f runs/manip/loop-carry/video.pt ] || MOVER=carry MAX_EPOCHS=60 .venv/bin/python $draws/fit_objects.py \
  runs/manip/loop-ref/video.pt runs/manip/loop-carry/video.pt $tasks
bash $draws/rank.sh runs/manip/loop-carry/video.pt runs/manip/rank-carry $tasks
