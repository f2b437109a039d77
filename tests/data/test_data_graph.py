"""Graph introspection used by distributed input: batch node, batch size, readers, rewrites."""

import torch

import multidev as md
from multidev.data import graph

D = md.data.Dataset


def test_find_batch_through_batch_preserving_nodes():
    ds = D.range(10).batch(4, drop_remainder=True).map(lambda x: x * 2).repeat().prefetch(2)
    node = graph.find_batch(ds)
    assert (node.batch_size, node.drop_remainder) == (4, True)
    assert graph.compute_batch_size(ds) == -1   # past a map (TF reads 4 off the traced map's spec: no split differs)
    assert graph.compute_batch_size(D.range(10).batch(4, drop_remainder=True).repeat().prefetch(2)) == 4


def test_no_batch_found_for_unbatched_or_unbatch():
    assert graph.find_batch(D.range(4)) is None
    assert graph.find_batch(D.range(4).batch(2).unbatch()) is None
    assert graph.compute_batch_size(D.range(4).batch(2).unbatch()) == -1
    assert graph.compute_batch_size(D.range(8).batch(4).rebatch(2)) == -1   # TF 2.21: -1


def test_compute_batch_size_follows_tensorflow():
    """TF 2.21's answers (compute_batch_size): a map may change the batch; zip and concatenate keep one
    batch size; filter, take, skip, repeat, shuffle, cache, prefetch, shard, options keep it."""
    b = D.range(10).batch(4)
    assert graph.compute_batch_size(b.filter(lambda x: True).take(2).skip(1).repeat().shuffle(3).cache()
                                    .prefetch(1).shard(2, 0).with_options(md.data.Options())) == 4
    assert graph.compute_batch_size(b.map(lambda x: x * 2)) == -1
    assert graph.compute_batch_size(D.zip((b, D.range(10).batch(4)))) == 4
    assert graph.compute_batch_size(b.concatenate(D.range(3).batch(4))) == 4
    assert graph.compute_batch_size(D.zip((b, D.range(10).batch(3)))) == -1
    assert graph.compute_batch_size(b.concatenate(D.range(3).batch(3))) == -1
    assert graph.compute_batch_size(b.enumerate()) == -1
    assert graph.compute_batch_size(D.range(2).interleave(lambda x: D.range(5).batch(4))) == -1
    assert graph.compute_batch_size(b.unbatch().batch(3)) == 3


def test_rebatch_the_batch_node_via_rewrite():
    ds = D.range(8).batch(4).prefetch(1)
    node = graph.find_batch(ds)
    per_replica = graph.rewrite(ds, lambda n: n._inputs[0].batch(2) if n is node else None)
    assert [b.tolist() for b in per_replica] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [b.tolist() for b in ds][0] == [0, 1, 2, 3]


def test_file_readers_and_nodes(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    ds = md.data.TextLineDataset(str(tmp_path / "a.txt")).map(lambda s: s.upper())
    (reader,) = graph.file_readers(ds)
    assert list(reader.filenames) == [str(tmp_path / "a.txt")]
    assert [type(n).__name__ for n in graph.nodes(ds)] == ["MapDataset", "TextLineDataset", "TensorSliceDataset"]
    assert list(ds) == ["X"]


def test_padded_batch_is_a_batch_node():
    ds = D.from_tensor_slices(torch.ones(4, 2)).padded_batch(3)
    assert graph.find_batch(ds).batch_size == 3
