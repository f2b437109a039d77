"""Replica runtime faults found by an attack (issue 18): mismatched PerReplica counts, hung replicas,
Ctrl-C during run, strategies never freed."""

from __future__ import annotations

import pytest
import torch

import multidev as md
from multidev.values.distributed import PerReplica

CPUS2 = ["/cpu:0", "/cpu:1"]


@pytest.mark.parametrize("count", [1, 3])
def test_per_replica_with_the_wrong_number_of_values_is_rejected_by_run_and_reduce(count):
    strategy = md.distribute.MirroredStrategy(CPUS2)
    value = PerReplica([torch.tensor(float(i)) for i in range(count)])
    with pytest.raises(ValueError, match=rf"PerReplica with {count} values .* 2 local replica\(s\); it needs exactly 2"):
        strategy.run(lambda x: x, args=(value,))
    with pytest.raises(ValueError, match=rf"PerReplica with {count} values"):
        strategy.run(lambda x: x, kwargs={"x": {"nested": [value]}})
    with pytest.raises(ValueError, match=rf"PerReplica with {count} values"):
        strategy.reduce("SUM", value, axis=None)
    with pytest.raises(ValueError, match=rf"PerReplica with {count} values"):
        strategy.gather(PerReplica([torch.ones(1)] * count), axis=0)
    good = PerReplica([torch.tensor(1.0), torch.tensor(2.0)])
    assert float(strategy.reduce("SUM", strategy.run(lambda x: x * 2, args=(good,)), axis=None)) == 6.0
