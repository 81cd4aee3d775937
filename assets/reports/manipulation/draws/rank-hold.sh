#!/usr/bin/env bash
# Issue 7: rank3.sh's ranking again (same model, zoo, resets and cached simulator rollouts), with the success verdict
# held for the judge's chosen number of steps in a row (choose_hold.py -> runs/manip/loop/video_judge_hold.pt); every
# hold's verdict is in each report's model rows. Resumable: finished tasks are skipped. Tasks as arguments.
cd /work/main
export MUJOCO_GL=egl PYTHONPATH=/work/main
for t in ${@:-push pick-place door-open drawer-open}; do
  [ -f runs/manip/rank-hold/$t/results.json ] && continue
  .venv/bin/python -m eval.cli evaluate task=metaworld-$t world_model.checkpoint=runs/manip/loop/video_judge_hold.pt \
    "policies=[runs/manip/loop/zoo,runs/manip/loop/vla_bc.pt,runs/manip/loop/vla_finetuned.pt]" \
    dataset=$HOME/.cache/reverie/datasets/metaworld-$t-expert-50ep-64px-corner-seed0.hdf5 rows=50 threads=1 \
    sample_model=false real_cache=runs/manip/real-cache run_dir=runs/manip/rank-hold/$t
done
