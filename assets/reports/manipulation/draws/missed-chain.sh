#!/usr/bin/env bash
# Issue 7: after draws/refit.py made video_missed.pt (latent dynamics refit with poor + misdirected episodes):
# the action probe on it, then the 11-policy ranking of push and pick-place in it (at its mean).
cd "$(dirname "$0")/../../../.."     # the repository
export MUJOCO_GL=egl PYTHONPATH=$PWD
while pgrep -f "draws/refit.py" > /dev/null; do sleep 15; done
[ -f runs/manip/loop/video_missed.pt ] || exit 1
.venv/bin/python assets/reports/manipulation/draws/actions.py push runs/manip/loop/video_missed.pt \
  > assets/reports/manipulation/draws/actions-push-missed.log 2>&1
for t in push pick-place; do
  [ -f runs/manip/rank-missed/$t/results.json ] && continue
  .venv/bin/python -m eval.cli evaluate task=metaworld-$t world_model.checkpoint=runs/manip/loop/video_missed.pt \
    "policies=[runs/manip/loop/zoo,runs/manip/loop/vla_bc.pt,runs/manip/loop/vla_finetuned.pt]" \
    dataset=$HOME/.cache/reverie/datasets/metaworld-$t-expert-50ep-64px-corner-seed0.hdf5 rows=50 threads=1 \
    sample_model=false run_dir=runs/manip/rank-missed/$t
done
