#!/usr/bin/env bash
# Issue 7: the ranking of rank2.sh (same 11-policy zoo, 50 resets from seed 20000, model at its mean) with the loop's
# video model judged by the frame success judge (add_judge.py -> runs/manip/loop/video_judge.pt) instead of the
# latent head; the simulator rollouts kept in runs/manip/real-cache (filled by the first run: prefill.sh). Resumable:
# finished tasks are skipped. Tasks as arguments (default: all eight).
cd "$(dirname "$0")/../../../.."     # the repository
export MUJOCO_GL=egl PYTHONPATH=$PWD
for t in ${@:-push pick-place door-open drawer-open window-open reach button-press-topdown drawer-close}; do
  [ -f runs/manip/rank3/$t/results.json ] && continue
  .venv/bin/python -m eval.cli evaluate task=metaworld-$t world_model.checkpoint=runs/manip/loop/video_judge.pt \
    "policies=[runs/manip/loop/zoo,runs/manip/loop/vla_bc.pt,runs/manip/loop/vla_finetuned.pt]" \
    dataset=$HOME/.cache/reverie/datasets/metaworld-$t-expert-50ep-64px-corner-seed0.hdf5 rows=50 threads=1 \
    sample_model=false real_cache=runs/manip/real-cache run_dir=runs/manip/rank3/$t
done
