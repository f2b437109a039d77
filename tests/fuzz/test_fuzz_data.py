"""Fuzzed tf.data inputs: from_tensor_slices structures and batch/shard/rebatch arguments give a
dataset that iterates, or a clear ValueError/TypeError/InvalidArgumentError."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import multidev as md  # noqa: E402
from tests.fuzz._checks import FAILED, outcome  # noqa: E402

pytestmark = pytest.mark.timeout(300 if settings().max_examples < 1000 else 3600)  # the long profile runs for minutes

ARRAYS = hnp.arrays(dtype=st.sampled_from([np.float32, np.int64, np.bool_, np.float64, np.uint8]),
                    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
LEAVES = st.one_of(
    ARRAYS,
    ARRAYS.map(torch.from_numpy),
    st.lists(st.integers(-5, 5), max_size=5),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4),
    st.lists(st.lists(st.integers(0, 3), max_size=3), max_size=3),     # ragged or rectangular
    st.integers(), st.floats(), st.text(max_size=4), st.none(), st.booleans(),
    st.lists(st.text(max_size=3), max_size=3),
    st.just(np.array([[1, 2], [3]], dtype=object)),
    st.lists(st.one_of(st.integers(), st.text(max_size=2), st.none()), max_size=3),
)
STRUCTURES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.tuples(inner, inner), st.tuples(inner),
                            st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 3)), inner, max_size=3),
                            st.lists(inner, max_size=3)),
    max_leaves=6,
)
COUNTS = st.one_of(st.integers(-3, 12), st.sampled_from([1.5, float("inf"), float("nan"), "2", None, True, np.int64(3),
                                                         torch.tensor(2), torch.tensor(2.0), 10**30]))


def _take(dataset, n=3):
    return [element for _, element in zip(range(n), dataset)]


@given(STRUCTURES)
def test_from_tensor_slices_builds_an_iterable_dataset_or_raises_clearly(tensors):
    dataset = outcome(lambda: md.data.Dataset.from_tensor_slices(tensors))
    if dataset is FAILED:
        return
    elements = outcome(lambda: _take(dataset))
    assert elements is not FAILED, "a dataset that was built must iterate"
    assert len(elements) == min(3, int(dataset.cardinality()))
    assert outcome(lambda: dataset.element_spec) is not FAILED


@given(size=st.integers(0, 12), batch_size=COUNTS, drop_remainder=st.one_of(st.booleans(), st.sampled_from([None, 1, "yes"])))
def test_batch_arguments(size, batch_size, drop_remainder):
    dataset = outcome(lambda: md.data.Dataset.range(size).batch(batch_size, drop_remainder=drop_remainder),
                      batch_size, drop_remainder)
    if dataset is FAILED:
        return
    batches = list(dataset)
    assert sum(len(b) for b in batches) <= size and all(len(b) <= int(batch_size) for b in batches)
    assert len(batches) == int(dataset.cardinality())


@given(size=st.integers(0, 12), num_shards=COUNTS, index=COUNTS)
def test_shard_arguments(size, num_shards, index):
    dataset = outcome(lambda: md.data.Dataset.range(size).shard(num_shards, index), num_shards, index)
    if dataset is FAILED:
        return
    values = outcome(lambda: [int(v) for v in dataset])   # shard(SHARD_HINT, ...) refuses to iterate
    assert values is FAILED or values == list(range(int(index), size, int(num_shards)))


@given(size=st.integers(0, 12), batch=st.integers(1, 4),
       batch_size=st.one_of(COUNTS, st.lists(COUNTS, max_size=4)), drop_remainder=st.booleans())
def test_rebatch_arguments(size, batch, batch_size, drop_remainder):
    shown = batch_size if isinstance(batch_size, list) else [batch_size]   # the offending entry is named
    dataset = outcome(lambda: md.data.Dataset.range(size).batch(batch).rebatch(batch_size, drop_remainder=drop_remainder),
                      batch_size, *shown)
    if dataset is FAILED:
        return
    rows = outcome(lambda: [int(x) for b in dataset for x in b])
    assert rows is FAILED or rows == list(range(size))[:len(rows)]
