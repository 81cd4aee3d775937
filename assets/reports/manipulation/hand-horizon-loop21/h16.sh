#!/usr/bin/env bash
# the three loop-ref ranking fits with their hand movers fitted again on 16-step unrolls (seed k for fit k)
cd "$(dirname "$0")/../../../.."     # the repository
for k in 0 1 2; do
  [ -f runs/manip/h16-fit$k/model.pt ] && continue
  MEMBERS=1 HORIZON=16 SEED=$k PYTHONPATH=. .venv/bin/python assets/reports/manipulation/draws/add_hand.py \
    runs/manip/loop-ref/rank_video_fit$k.pt runs/manip/h16-fit$k/model.pt push pick-place door-open drawer-open
done
