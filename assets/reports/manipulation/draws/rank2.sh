#!/usr/bin/env bash
# Issue 7: the manipulation ranking again after the scene fix (012a7e4), zoo of 11 (7 BC snapshots, BC, fine-tuned,
# and the fine-tuned policy with action noise 0.5 and 1.0), the video model at its mean; then the loop's before/after
# success tables re-measured on paired scenes.
cd "$(dirname "$0")/../../../.."     # the repository
export MUJOCO_GL=egl PYTHONPATH=$PWD
for t in push pick-place door-open drawer-open window-open reach button-press-topdown drawer-close; do
  [ -f runs/manip/rank2/$t/results.json ] && continue
  .venv/bin/python -m eval.cli evaluate task=metaworld-$t world_model.checkpoint=runs/manip/loop/video.pt \
    "policies=[runs/manip/loop/zoo,runs/manip/loop/vla_bc.pt,runs/manip/loop/vla_finetuned.pt]" \
    dataset=$HOME/.cache/reverie/datasets/metaworld-$t-expert-50ep-64px-corner-seed0.hdf5 rows=50 threads=1 \
    sample_model=false run_dir=runs/manip/rank2/$t
done
