"""Bring the loop's cached manipulation datasets up to date: files made before reset seeds were fixed scenes
(``SCENE_RULES`` 2) or before the objects' positions were recorded are made again (``make_manipulation``
remakes a stale cache file; the same levels, episode counts and seeds as ``eval.manipulation_loop``).

Usage (repository root): python assets/reports/manipulation/draws/add_objects.py [TASK ...]
"""
import sys
import time

from envs.builtin import cache_dir
from envs.manipulation_data import make_manipulation
from loop_data import LOOP_LEVELS

root = cache_dir()
tasks = sys.argv[1:] or ["reach", "push", "pick-place", "drawer-open", "drawer-close", "door-open", "window-open",
                         "button-press-topdown"]
for task in tasks:
    for level, episodes, seed in LOOP_LEVELS:
        t = time.perf_counter()
        path, attrs, cached = make_manipulation(f"metaworld-{task}", level, episodes, seed, root)
        print(f"{path.name}: {'up to date' if cached else 'made again'} ({time.perf_counter() - t:.0f} s)",
              flush=True)
