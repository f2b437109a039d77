"""Transformations: map, filter, batching, repeat/take/skip/shard, cache, zip, concatenate."""

import pytest
import torch

import multidev as md

D = md.data.Dataset


def ints(ds):
    return [x.tolist() for x in ds]


def test_map_unpacks_tuples_as_positional_arguments():
    ds = D.from_tensor_slices((torch.arange(3), torch.arange(3) * 10)).map(lambda x, y: x + y)
    assert ints(ds) == [0, 11, 22]


def test_map_passes_dicts_whole_and_turns_lists_into_tuples():
    ds = D.from_tensor_slices({"a": torch.arange(2)}).map(lambda d: [d["a"], d["a"] * 2])
    first = next(iter(ds))
    assert isinstance(first, tuple) and first[1].item() == 0


def test_map_element_spec_keeps_unknown_batch_dimension():
    ds = D.range(10).batch(4).map(lambda x: x.float()[:, None])
    assert ds.element_spec == md.data.TensorSpec((None, 1), torch.float32)


def test_filter_and_bad_predicate():
    assert ints(D.range(6).filter(lambda x: x % 2 == 0)) == [0, 2, 4]
    with pytest.raises(ValueError, match="predicate"):
        list(D.range(3).filter(lambda x: x))


def test_batch_keeps_partial_last_batch_unless_dropped():
    assert ints(D.range(10).batch(4)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert ints(D.range(10).batch(4, drop_remainder=True)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert D.range(10).batch(4, drop_remainder=True).element_spec.shape == (4,)


def test_batch_structures_and_parallel_batch():
    ds = D.from_tensor_slices(({"x": torch.ones(5, 2)}, torch.arange(5))).batch(2, num_parallel_calls=2)
    batches = list(ds)
    assert batches[0][0]["x"].shape == (2, 2) and batches[-1][1].tolist() == [4]


@pytest.mark.parametrize("size", [0, -3])
def test_non_positive_batch_size_is_invalid_argument(size):
    with pytest.raises(md.errors.InvalidArgumentError, match=f"batch_size={size}"):
        D.range(3).batch(size)


def test_batch_size_of_wrong_type_is_type_error():
    with pytest.raises(TypeError, match="batch_size"):
        D.range(3).batch("4")


def test_batching_different_shapes_names_the_component():
    ds = D.from_generator(lambda: iter([[1, 2], [3]]), output_signature=md.data.TensorSpec((None,), torch.int64))
    with pytest.raises(md.errors.InvalidArgumentError, match=r"component 0.*\[2\].*\[1\]"):
        list(ds.batch(2))


def test_padded_batch_pads_to_longest_or_given_shape():
    ds = D.from_generator(lambda: iter([[1, 2], [3], [4, 5, 6]]), output_signature=md.data.TensorSpec((None,), torch.int64))
    assert ints(ds.padded_batch(2)) == [[[1, 2], [3, 0]], [[4, 5, 6]]]
    assert ints(ds.padded_batch(3, padded_shapes=(4,), padding_values=-1))[0][1] == [3, -1, -1, -1]
    with pytest.raises(md.errors.InvalidArgumentError, match="smaller size"):
        list(ds.padded_batch(3, padded_shapes=(2,)))


def test_unbatch_inverts_batch():
    ds = D.from_tensor_slices((torch.arange(5), torch.arange(5) * 2)).batch(2).unbatch()
    assert [(a.item(), b.item()) for a, b in ds] == [(i, 2 * i) for i in range(5)]


def test_rebatch_like_unbatch_batch_and_cycled_sizes():
    assert ints(D.range(6).batch(4).rebatch(3)) == [[0, 1, 2], [3, 4, 5]]
    assert ints(D.range(8).batch(4).rebatch([2, 1, 1])) == [[0, 1], [2], [3], [4, 5], [6], [7]]
    assert ints(D.range(8).batch(4, drop_remainder=True).rebatch([1, 1, 1, 1, 0])) == [
        [0], [1], [2], [3], [], [4], [5], [6], [7], []]
    assert ints(D.range(7).batch(4).rebatch(2, drop_remainder=True)) == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(md.errors.InvalidArgumentError):
        D.range(4).batch(2).rebatch([0, 0])


def test_repeat_take_skip():
    assert ints(D.range(3).repeat(2)) == [0, 1, 2, 0, 1, 2]
    assert ints(D.range(3).repeat().take(7)) == [0, 1, 2, 0, 1, 2, 0]
    assert ints(D.range(5).skip(2)) == [2, 3, 4]
    assert ints(D.range(5).skip(-1)) == [] and ints(D.range(5).take(-1)) == [0, 1, 2, 3, 4]
    assert ints(D.range(0).repeat()) == []


def test_shard_and_bad_index():
    assert ints(D.range(10).shard(3, 1)) == [1, 4, 7]
    with pytest.raises(md.errors.InvalidArgumentError, match="index = 3"):
        D.range(10).shard(3, 3)
    with pytest.raises(md.errors.InvalidArgumentError, match="num_shards = 0"):
        D.range(10).shard(0, 0)


def test_cache_replays_first_complete_pass():
    calls = []
    ds = D.range(3).map(lambda x: calls.append(1) or x).cache()
    assert ints(ds) == ints(ds) == [0, 1, 2]
    assert len(calls) == 3


def test_cache_discards_an_incomplete_pass():
    calls = []
    ds = D.range(3).map(lambda x: calls.append(1) or x).cache()
    assert ints(ds.take(1)) == [0]
    assert ints(ds) == [0, 1, 2] and ints(ds) == [0, 1, 2]
    assert len(calls) == 4


def test_file_cache_persists(tmp_path):
    path = str(tmp_path / "c")
    assert ints(D.range(3).cache(path)) == [0, 1, 2]
    assert ints(D.range(3).cache(path)) == [0, 1, 2]  # the same pipeline, rebuilt: read back from the file
    strings = str(tmp_path / "s")
    batches = [list(b) for b in D.from_tensor_slices(["a", "b", "c"]).batch(2).cache(strings)]
    again = [list(b) for b in D.from_tensor_slices(["a", "b", "c"]).batch(2).cache(strings)]
    assert again == batches == [["a", "b"], ["c"]]


def test_enumerate_zip_concatenate():
    assert [(i.item(), x.item()) for i, x in D.range(10, 12).enumerate(5)] == [(5, 10), (6, 11)]
    zipped = D.zip((D.range(3), D.range(10, 20)))
    assert [(a.item(), b.item()) for a, b in zipped] == [(0, 10), (1, 11), (2, 12)]
    assert zipped.cardinality() == 3
    assert [a.item() for a in D.zip({"a": D.range(2)}).map(lambda d: d["a"])] == [0, 1]
    assert ints(D.range(2).concatenate(D.range(5, 6))) == [0, 1, 5]


def test_concatenate_incompatible_is_type_error():
    with pytest.raises(TypeError, match="Incompatible"):
        D.range(2).concatenate(D.from_tensor_slices([1.0]))


def test_zip_rejects_non_datasets():
    with pytest.raises(TypeError, match="argument 1"):
        D.zip((D.range(2), [1, 2]))


def test_reduce_apply_flat_map():
    assert D.range(5).reduce(0, lambda s, x: s + x).item() == 10
    assert ints(D.range(3).apply(lambda d: d.map(lambda x: -x))) == [0, -1, -2]
    assert ints(D.range(3).flat_map(lambda x: D.range(x))) == [0, 0, 1]


def test_as_numpy_iterator_gives_numpy_values():
    out = list(D.from_tensor_slices((torch.arange(2), torch.ones(2, 2))).as_numpy_iterator())
    assert out[1][0] == 1 and out[1][1].shape == (2,)


def test_interleave_order_matches_tensorflow():
    ds = D.range(1, 6).interleave(lambda x: D.from_tensors(x).repeat(6), cycle_length=2, block_length=4)
    out = ints(ds)
    assert out == [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5]
    parallel = D.range(1, 6).interleave(lambda x: D.from_tensors(x).repeat(6), cycle_length=2, block_length=4,
                                       num_parallel_calls=2)
    assert ints(parallel) == out


def test_zip_of_one_dataset_is_not_wrapped():
    assert ints(D.zip(D.range(2))) == [0, 1]


def test_from_tensor_slices_accepts_torch_datasets():
    import torch.utils.data as tud

    ds = D.from_tensor_slices(tud.TensorDataset(torch.arange(3)))
    assert [x[0].item() for x in ds] == [0, 1, 2]


def test_optimization_options_are_accepted():
    options = md.data.Options()
    options.experimental_optimization.map_parallelization = True
    assert ints(D.range(2).with_options(options)) == [0, 1]
