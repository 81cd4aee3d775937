#!/usr/bin/env bash
# Issue 7: rank the loop's 11-policy zoo in a video model (50 resets from seed 20000, 150 steps, model at its mean),
# the simulator side read from runs/manip/real-cache (filled by prefill.sh). Resumable: finished tasks are skipped.
# Usage: [LOOP=runs/manip/loop] rank.sh MODEL OUT [TASK ...]   (default tasks: push pick-place door-open drawer-open)
# LOOP: the loop whose zoo and two policies are ranked (runs/manip/loop for rank2..rank-mover; a new machine's
# rebuilt runs/manip/loop-ref has its own zoo, so its real side differs from those reports')
# RUN: what runs `evaluate` (default: the library's CLI; rank_two_hands.py stands in for it with a patched step)
model=$1 out=$2 loop=${LOOP:-runs/manip/loop} run=${RUN:-.venv/bin/python -m eval.cli}
shift 2
cd "$(dirname "$0")/../../../.."     # the repository; MODEL and OUT are read from there
export MUJOCO_GL=egl PYTHONPATH=$PWD
for t in ${@:-push pick-place door-open drawer-open}; do
  [ -f $out/$t/results.json ] && continue
  $run evaluate task=metaworld-$t world_model.checkpoint=$model \
    "policies=[$loop/zoo,$loop/vla_bc.pt,$loop/vla_finetuned.pt]" \
    dataset=$HOME/.cache/reverie/datasets/metaworld-$t-expert-50ep-64px-corner-seed0.hdf5 rows=50 threads=1 \
    sample_model=false real_cache=runs/manip/real-cache run_dir=$out/$t
done
