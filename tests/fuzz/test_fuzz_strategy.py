"""Fuzzed strategy.run argument structures, reduce/gather arguments and fit(batch_size=...):
a result, or a documented error that names the value; never an internal error or a hang."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

import multidev as md  # noqa: E402
from multidev.values.distributed import DistributedValues, flatten  # noqa: E402
from tests.fuzz._checks import FAILED, outcome  # noqa: E402

pytestmark = pytest.mark.timeout(300 if settings().max_examples < 1000 else 3600)  # the long profile runs for minutes

_STRATEGY = None


def strategy():
    """One MirroredStrategy on the suite's logical CPUs, shared by the examples (built lazily)."""
    global _STRATEGY
    if _STRATEGY is None:
        _STRATEGY = md.distribute.MirroredStrategy()
    return _STRATEGY


LEAVES = st.one_of(
    st.integers(-3, 3).map(lambda n: torch.full((2, 3), float(n))),
    st.integers(0, 3).map(lambda n: torch.arange(n)),
    st.just(torch.tensor(1.5)), st.integers(), st.floats(allow_nan=True), st.text(max_size=3), st.none(),
    st.booleans(), st.just(np.ones((2, 2))), st.just(object()),
)
STRUCTURES = st.recursive(LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                                        st.dictionaries(st.text(max_size=2), inner, max_size=2)),
                          max_leaves=5)
AXES = st.one_of(st.none(), st.integers(-4, 4), st.sampled_from(["0", 1.0, True, [0]]))
OPS = st.sampled_from(["SUM", "MEAN", md.distribute.ReduceOp.SUM, "MAX", "sum", 3])


@given(args=st.one_of(st.lists(STRUCTURES, max_size=3), STRUCTURES), op=OPS, axis=AXES)
def test_run_then_reduce_and_gather(args, op, axis):
    s = strategy()
    result = outcome(lambda: s.run(lambda *a: a, args=args), args)
    if result is FAILED:
        return
    leaves = [c for leaf in flatten(result) for c in (leaf.values if isinstance(leaf, DistributedValues) else [leaf])]
    outcome(lambda: s.reduce(op, result, axis=axis), op, axis, *leaves)   # the offending op, axis or leaf is named
    outcome(lambda: s.gather(result, axis=axis), axis, *leaves)
    per_replica = s.run(lambda: torch.full((2, 3), float(md.distribute.get_replica_context().replica_id_in_sync_group)))
    reduced = outcome(lambda: s.reduce(op, per_replica, axis=axis), op, axis)
    if reduced is not FAILED and axis is None and op in ("SUM", md.distribute.ReduceOp.SUM, "sum"):
        n = s.num_replicas_in_sync
        assert torch.equal(reduced, torch.full((2, 3), float(n * (n - 1) // 2)))


_MODEL = None


def _model():
    global _MODEL
    if _MODEL is None:
        _MODEL = md.keras.Sequential([md.keras.layers.Dense(1)])
        _MODEL.compile(optimizer="sgd", loss="mse")
    return _MODEL


@settings(max_examples=min(settings().max_examples, 60) if settings().max_examples < 1000 else 1000)
@given(st.one_of(st.integers(-2, 10), st.sampled_from([1.5, float("inf"), float("nan"), "4", True, np.int64(4), None, 10**20])))
def test_fit_batch_size(batch_size):
    x, y = np.ones((8, 2), np.float32), np.ones((8, 1), np.float32)
    history = outcome(lambda: _model().fit(x, y, batch_size=batch_size, epochs=1, verbose=0), batch_size)
    if history is not FAILED:
        assert len(history.history["loss"]) == 1
