#!/usr/bin/env bash
# Issue 7: the ranking with runs/manip/loop-mover (loop-obj60 with an object mover: draws/fit_mover.py). Tasks as
# arguments.
exec bash "$(dirname "$0")/rank.sh" runs/manip/loop-mover/video.pt runs/manip/rank-mover "$@"
