#!/usr/bin/env bash
# Issue 7: the ranking with runs/manip/loop-obj60 (as loop-obj, its dynamics fitted for 60 epochs, and the data's
# box set by set_box.py). Tasks as arguments.
exec bash "$(dirname "$0")/rank.sh" runs/manip/loop-obj60/video.pt runs/manip/rank-obj60 "$@"
