"""window, group_by_window, bucket_by_sequence_length and the stateful transformations: what the
conformance cases (tests/conformance/cases/data_pipeline.py) cannot show: laziness on infinite
input, multidev's error messages, and sample_from_datasets' seeded draws."""

import pytest
import torch

import multidev as md

D = md.data.Dataset


def ints(ds):
    return [x.tolist() for x in ds]


def test_window_reads_infinite_input_lazily():
    windows = D.range(5).repeat().window(2).take(3).flat_map(lambda w: w.batch(2))
    assert ints(windows) == [[0, 1], [2, 3], [4, 0]]


def test_window_elements_are_reiterable_datasets_with_a_spec():
    first = next(iter(D.from_tensor_slices((torch.arange(3), torch.arange(3) * 1.0)).window(2)))
    assert isinstance(first[0], md.data.Dataset) and ints(first[0]) == ints(first[0]) == [0, 1]
    assert D.range(3).window(2).element_spec == md.data.DatasetSpec(md.data.TensorSpec((), torch.int64))


def test_window_of_variable_length_elements():
    ds = D.from_generator(lambda: (list(range(n)) for n in (1, 3, 2)),
                          output_signature=md.data.TensorSpec((None,), torch.int64))
    assert ints(ds.window(3).flat_map(lambda w: w.padded_batch(3))) == [[[0, 0, 0], [0, 1, 2], [0, 1, 0]]]


def test_bucket_pad_to_boundary_refuses_too_long_elements():
    ds = D.from_generator(lambda: ([2] * n for n in (1, 4)), output_signature=md.data.TensorSpec((None,), torch.int32))
    bucketed = ds.bucket_by_sequence_length(lambda x: md.shape(x)[0], [3], [2, 2], pad_to_bucket_boundary=True)
    with pytest.raises(md.errors.InvalidArgumentError, match=r"length < max\(bucket_boundaries\) = 3"):
        list(bucketed)


@pytest.mark.parametrize("call, error, match", [
    (lambda: D.range(5).bucket_by_sequence_length(lambda x: 1, [3], [2]), ValueError, r"bucket_batch_sizes=\[2\]"),
    (lambda: D.range(5).bucket_by_sequence_length(lambda x: 1, [3, 2], [1, 1, 1]), ValueError, "increasing"),
    (lambda: D.range(5).group_by_window(lambda x: x, lambda k, w: w), ValueError, "window_size_func"),
    (lambda: list(D.range(2).group_by_window(lambda x: 1.5, lambda k, w: w, 2)), TypeError, "int64 scalar"),
    (lambda: list(D.range(2).group_by_window(lambda x: x, lambda k, w: [1], 1)), TypeError, "must return"),
    (lambda: D.range(5).window(0), md.errors.InvalidArgumentError, "size"),
    (lambda: D.from_tensor_slices([1.0]).unique(), TypeError, "only scalar `int32`"),
    (lambda: D.choose_from_datasets([D.range(2)], D.range(1, output_type=torch.int32)), TypeError, "md.cast"),
    (lambda: list(D.choose_from_datasets([D.range(2)], D.from_tensors(torch.tensor(3)))),
     md.errors.InvalidArgumentError, "3 >= 1"),
    (lambda: list(D.range(3).scan(0, lambda s, x: s)), TypeError, "pair"),
    (lambda: list(D.range(4).apply(md.data.experimental.assert_cardinality(md.data.INFINITE_CARDINALITY))),
     md.errors.FailedPreconditionError, "infinite number of elements but contained only 4"),
    (lambda: D.sample_from_datasets([D.range(2)], weights=[0.5, 0.5]), ValueError, "weights"),
])
def test_errors_name_the_problem(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_sample_from_datasets_seeded_draws():
    a, b = D.range(50), D.range(100, 150)
    same = D.sample_from_datasets([a, b], seed=4)
    first = ints(same)
    assert sorted(first) == list(range(50)) + list(range(100, 150))
    assert first == ints(same) == ints(D.sample_from_datasets([a, b], seed=4))   # one order per seed
    assert first != ints(D.sample_from_datasets([a, b], seed=5))
    rerandomized = D.sample_from_datasets([a, b], seed=4, rerandomize_each_iteration=True)
    assert ints(rerandomized) != ints(rerandomized)
    stopped = ints(D.sample_from_datasets([a, b], seed=4, stop_on_empty_dataset=True))
    assert stopped == first[:len(stopped)] and len(stopped) < 100    # ends when one input runs out


def test_tf_methods_not_offered_say_what_to_use():
    with pytest.raises(AttributeError, match="use cache"):
        D.range(3).snapshot()
    with pytest.raises(AttributeError, match="md.data.experimental offers: .*assert_cardinality"):
        md.data.experimental.CsvDataset  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nothing_like_this'$"):
        D.range(3).nothing_like_this  # noqa: B018


def test_range_output_type():
    assert D.range(3, output_type=md.int32).element_spec.dtype == torch.int32
    assert D.range(3, dtype=torch.int16).element_spec.dtype == torch.int16
