"""The distributed-input guide's inputs that TensorFlow 2.21 meets with an internal crash
(IndexError, AttributeError): multidev says what is wrong and how to fix it. TensorFlow's
behaviour for the valid forms is checked by tests/conformance/cases/input_guide.py."""

import pytest

import multidev as md

D = md.data.Dataset


@pytest.fixture(scope="module")
def two():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def test_unbatched_dataset_asks_for_batch(two):
    with pytest.raises(ValueError, match=r"each element must be a batch. Call dataset.batch\(global_batch_size\)"):
        list(two.experimental_distribute_dataset(D.range(4)))


@pytest.mark.parametrize("make", [lambda s: s.experimental_distribute_dataset([1, 2]),
                                  lambda s: list(s.distribute_datasets_from_function(lambda ctx: [1, 2]))])
def test_not_a_dataset(two, make):
    with pytest.raises(TypeError, match="expects a md.data.Dataset .* got list. Wrap arrays"):
        make(two)


def test_place_on_device_is_checked_where_tf_checks_it(two):
    """TF builds any InputOptions; experimental_distribute_dataset ignores the placement flag."""
    options = md.distribute.InputOptions(experimental_place_dataset_on_device=True)
    assert [b.values[0].tolist() for b in two.experimental_distribute_dataset(D.range(4).batch(2), options)] \
        == [[0], [2]]
    with pytest.raises(ValueError, match="you must also specify `PER_REPLICA`"):
        two.distribute_datasets_from_function(lambda ctx: D.range(2), options)


def test_cardinality_and_reduce(two):
    dist = two.experimental_distribute_dataset(D.range(6).batch(4).repeat())
    assert dist.cardinality == md.data.INFINITE_CARDINALITY
    finite = two.experimental_distribute_dataset(D.range(6).batch(4))
    assert finite.reduce(0, lambda n, x: n + sum(len(v) for v in two.experimental_local_results(x))) == 6
