#!/usr/bin/env bash
# Issue 7: rank3.sh's ranking again (same model, zoo, resets and cached simulator rollouts), with the success verdict
# held for the judge's chosen number of steps in a row (choose_hold.py -> runs/manip/loop/video_judge_hold.pt); every
# hold's verdict is in each report's model rows. Tasks as arguments.
exec bash "$(dirname "$0")/rank.sh" runs/manip/loop/video_judge_hold.pt runs/manip/rank-hold "$@"
