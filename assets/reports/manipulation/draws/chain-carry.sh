#!/usr/bin/env bash
# Issue 7, for a machine that has rebuilt runs/manip/loop-ref (python -m eval.manipulation_loop --out
# runs/manip/loop-ref ...): fit the objects' positions and the carry mover over its encoder (60 epochs, four tasks;
# the success head on positions reads the object's relation to the goal, the default since session 20, so this one
# fit gives what loop-carry-rel's refit gave), then rank the loop's zoo with it. JUDGE=1 first ranks with the loop's
# own video model (the frame judge: this zoo's baseline). Every step resumes or is skipped where its product exists.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
export MUJOCO_GL=egl PYTHONPATH=$PWD LOOP=runs/manip/loop-ref
draws=assets/reports/manipulation/draws
tasks="push pick-place door-open drawer-open"
[ "${JUDGE:-0}" = 1 ] && bash $draws/rank.sh runs/manip/loop-ref/video.pt runs/manip/rank-ref2 $tasks
[ -f runs/manip/loop-carry/video.pt ] || MOVER=carry MAX_EPOCHS=60 .venv/bin/python $draws/fit_objects.py \
  runs/manip/loop-ref/video.pt runs/manip/loop-carry/video.pt $tasks
bash $draws/rank.sh runs/manip/loop-carry/video.pt runs/manip/rank-carry $tasks
