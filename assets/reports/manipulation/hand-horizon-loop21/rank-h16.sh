#!/usr/bin/env bash
# rank the zoo of loop-ref in the three hand-refit (16-step unroll) fits: push and pick-place first, then the rest
cd "$(dirname "$0")/../../../.."     # the repository
for tasks in "push pick-place" "door-open drawer-open"; do
  for k in 0 1 2; do
    LOOP=runs/manip/loop-ref bash assets/reports/manipulation/draws/rank.sh runs/manip/h16-fit$k/model.pt runs/manip/rank-h16-fit$k $tasks
  done
done
