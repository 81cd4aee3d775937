#!/usr/bin/env bash
# Fill runs/manip/real-cache with the zoo's simulator rollouts (rank2.sh's protocol) by re-running rank2's evaluation
# (the loop's video.pt, latent success head) with real_cache: its real side must come out as rank2's did.
cd "$(dirname "$0")/../../../.."     # the repository
export MUJOCO_GL=egl PYTHONPATH=$PWD
for t in ${@:-push pick-place door-open drawer-open}; do
  [ -f runs/manip/rank2-cached/$t/results.json ] && continue
  .venv/bin/python -m eval.cli evaluate task=metaworld-$t world_model.checkpoint=runs/manip/loop/video.pt \
    "policies=[runs/manip/loop/zoo,runs/manip/loop/vla_bc.pt,runs/manip/loop/vla_finetuned.pt]" \
    dataset=$HOME/.cache/reverie/datasets/metaworld-$t-expert-50ep-64px-corner-seed0.hdf5 rows=50 threads=1 \
    sample_model=false real_cache=runs/manip/real-cache run_dir=runs/manip/rank2-cached/$t
done
