"""The process keeps freed memory: a training loop's activations stop page-faulting on every update."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Updates of a critic-sized MLP on 3,400 rows (MOBILE's next-state proposals): megabyte activations,
# allocated and freed every update. Prints the minor page faults of each of 300 updates after ten. With glibc's
# defaults they recur, update after update; retained, the heap still grows a few times on its way to its peak
# (850 or 1,700 faults a step, at any point in the window), and then no more. So the test counts the updates that
# fault and compares totals over a window long enough that the one-off growth cannot reach the recurring cost:
# a hundred updates had let four growth steps come within 10x of the defaults (CI: 3,401 against 20,835).
LOOP = """
import resource, sys, torch
from envs.allocator import retain_freed_memory
if sys.argv[1] == "retain":
    assert retain_freed_memory() and retain_freed_memory()      # taken, and a second call is harmless
torch.set_num_threads(1)
net = torch.nn.Sequential(torch.nn.Linear(20, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                          torch.nn.Linear(256, 1))
opt = torch.optim.Adam(net.parameters())
x = torch.randn(3400, 20)
def update():
    loss = net(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
for _ in range(10):
    update()
faults = []
for _ in range(300):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    update()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(*faults)
"""


def faults(mode: str) -> list[int]:
    """Minor page faults of each update, in a fresh process with glibc's defaults or with freed memory retained."""
    out = subprocess.run([sys.executable, "-c", LOOP, mode], cwd=ROOT, check=True, capture_output=True, text=True)
    return [int(f) for f in out.stdout.split()]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc settings")
def test_retained_memory_spares_the_updates_their_page_faults():
    default, retained = faults("default"), faults("retain")
    assert len(default) == len(retained) == 300
    growth = [f for f in retained if f > 64]                # a quarter of a MiB or more: the heap grew
    assert len(growth) <= 15, growth                        # retained, the activations are reused: a few growth steps
    assert sum(default) > 30_000, sum(default)              # glibc's defaults hand them back and fault them in again
    assert sum(retained) * 5 < sum(default), (sum(retained), sum(default))
