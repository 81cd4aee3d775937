#!/usr/bin/env bash
# Issue 7: the ranking of rank3.sh (same 11-policy zoo, 50 resets from seed 20000, model at its mean) with the
# video model of runs/manip/loop-ref (decoder drawing from the first frame, dynamics also fitted on failing episodes,
# the frame judge); the simulator rollouts kept in runs/manip/real-cache (filled by the first run: prefill.sh). Resumable:
# finished tasks are skipped. Tasks as arguments (default: all eight).
cd /work/main
export MUJOCO_GL=egl PYTHONPATH=/work/main
for t in ${@:-push pick-place door-open drawer-open window-open reach button-press-topdown drawer-close}; do
  [ -f runs/manip/rank4/$t/results.json ] && continue
  .venv/bin/python -m eval.cli evaluate task=metaworld-$t world_model.checkpoint=runs/manip/loop-ref/video.pt \
    "policies=[runs/manip/loop/zoo,runs/manip/loop/vla_bc.pt,runs/manip/loop/vla_finetuned.pt]" \
    dataset=$HOME/.cache/reverie/datasets/metaworld-$t-expert-50ep-64px-corner-seed0.hdf5 rows=50 threads=1 \
    sample_model=false real_cache=runs/manip/real-cache run_dir=runs/manip/rank4/$t
done
