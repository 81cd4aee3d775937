#!/usr/bin/env bash
# Issue 7: the same ranking with the video model of runs/manip/loop-ref (decoder drawing from the first frame,
# dynamics also fitted on failing episodes, the frame judge with its own hold). Tasks as arguments.
exec bash "$(dirname "$0")/rank.sh" runs/manip/loop-ref/video.pt runs/manip/rank4 "$@"
