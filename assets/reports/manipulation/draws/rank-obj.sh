#!/usr/bin/env bash
# Issue 7: the same ranking with runs/manip/loop-obj (loop-ref's frame encoder; dynamics that carry the object and
# goal positions, read from the start frame; success read from them: draws/fit_objects.py). Tasks as arguments.
exec bash "$(dirname "$0")/rank.sh" runs/manip/loop-obj/video.pt runs/manip/rank-obj "$@"
