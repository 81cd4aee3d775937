#!/usr/bin/env bash
# The draws a finished cell of the grid gets, each appended to its log beside this script under the command
# that made it (a draw that fails appends nothing), then the cell's course from its TensorBoard log printed for
# findings.md:
#
#     bash assets/reports/bench/draws/take.sh "session 46" CELL [CELL...]
#
# CELL is <out>/cells/<agent>/<dataset>/seed<S>. Every cell gets start_states.py, exploit.py --horizon 5 and
# value_bias.py; a neubay cell neubay_cuts.py too. One torch thread each, so a grid cell can run beside it.
# LOGS=DIR appends to DIR's logs instead.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
[ $# -ge 2 ] || { echo "usage: take.sh \"session N\" CELL [CELL...]" >&2; exit 2; }
when="$1, $(date -u +%F)"
shift
draws=assets/reports/bench/draws
for cell in "$@"; do
    [ -d "$cell" ] || { echo "take.sh: $cell: no such cell folder" >&2; exit 2; }
    agent=$(basename "$(dirname "$(dirname "$cell")")")
    dataset=$(basename "$(dirname "$cell")")
    runs=("start_states.py|start-states" "exploit.py --horizon 5|exploit" "value_bias.py|value-bias")
    [ "$agent" = neubay ] && runs+=("neubay_cuts.py|neubay-cuts")
    for run in "${runs[@]}"; do
        read -r -a args <<< "${run%%|*}"
        log="${LOGS:-$draws}/${run##*|}-$dataset.log"
        command="PYTHONPATH=. MUJOCO_GL=egl .venv/bin/python $draws/${args[0]} $cell ${args[*]:1}"
        echo "$ ${command% }   ($when)" >&2
        out=$(PYTHONPATH=. MUJOCO_GL=egl OMP_NUM_THREADS=1 .venv/bin/python "$draws/${args[0]}" "$cell" "${args[@]:1}")
        [ -s "$log" ] && echo >> "$log"
        printf '$ %s   (%s)\n%s\n' "${command% }" "$when" "$out" >> "$log"
        echo "$out" >&2
    done
    PYTHONPATH=. .venv/bin/python "$draws/curves.py" "$cell"
done
