"""Issue 7: which part of a ranking model makes its verdict. Two fits of one recipe (other seeds) can rank a task
apart; this puts DONOR's fitted PARTS into BASE (the rest of BASE kept) and saves the result at OUT, to be ranked
by rank.sh beside both.

PARTS, each with its normalizers: dynamics (the latent ensemble, its elites), reader (positions off the start
frame), success (the head on positions), mover (the object mover), hand (the hand mover).

Usage (repository root): python assets/reports/manipulation/draws/swap_parts.py BASE DONOR OUT PART ...
"""
import sys
from pathlib import Path

from worldmodels.registry import load_model

GROUPS = {"dynamics": ("dynamics.", "latent_norm.", "elites", "holdout_mse"), "reader": ("reader.",),
          "success": ("object_success.", "object_input_norm."), "mover": ("mover.", "mover_in.", "mover_out."),
          "hand": ("hand_net.", "hand_in.", "hand_out.")}

base, donor, out, parts = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
unknown = [p for p in parts if p not in GROUPS]
if unknown or not parts:
    sys.exit(f"swap_parts.py: PART: expected some of {', '.join(GROUPS)}, got {', '.join(unknown) or 'none'}")
model, other = load_model(base), load_model(donor)
if model.cfg != other.cfg:
    sys.exit(f"swap_parts.py: {base} and {donor} are fitted with other settings; swap parts of one recipe")
state, theirs = model.state_dict(), other.state_dict()
prefixes = tuple(p for part in parts for p in GROUPS[part])
swapped = [k for k in state if k.startswith(prefixes)]
model.load_state_dict(state | {k: theirs[k] for k in swapped})
out.parent.mkdir(parents=True, exist_ok=True)
model.save(out)
print(f"{out}: {len(swapped)} tensors of {', '.join(parts)} from {donor}")
