"""``python -m multidev.bench.scaling_profile``: the per-replica Python profile of the scaling probe
runs end to end and lists multidev's own functions (numbers not read: no timing assertions)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_profile_lists_multidev_functions_of_caller_and_replica_threads():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "multidev.bench.scaling_profile", "--replicas", "1", "2",
                           "--steps", "3", "--blocks", "1", "--top", "200"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = proc.stdout
    assert "N=1: CPU" in out and "N=2: CPU" in out, out
    assert out.count("total own time of multidev functions") == 2, out
    n2 = out.split("N=2: CPU", 1)[1]
    # The caller's side (strategy.run) and the replica threads' side (the RNG mode, parameter reads).
    assert "distribute/strategy.py" in n2 and "placement/replica_random.py" in n2, n2
    assert "distribute/replica_dicts.py" in n2, n2   # a module's parameter reads (ReplicaAwareDict)
