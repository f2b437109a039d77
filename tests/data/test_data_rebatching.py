"""Data-side helpers for distributed input: batch_sizes_for_worker, split_batches."""

import pytest
import torch

import multidev as md
from multidev.data.rebatching import batch_sizes_for_worker, split_batches

D = md.data.Dataset


def test_batch_sizes_for_worker_matches_tensorflow_example():
    assert batch_sizes_for_worker(7, 2, 2, 0) == [2, 2, 2, 1]
    assert batch_sizes_for_worker(7, 2, 2, 1) == [2, 1, 2, 2]
    assert batch_sizes_for_worker(16, 1, 2, 0) == [8, 8]


@pytest.mark.parametrize("g, w, r", [(7, 2, 2), (5, 3, 2), (32, 2, 4), (3, 2, 2)])
def test_batch_sizes_constraints(g, w, r):
    sizes = [batch_sizes_for_worker(g, w, r, i) for i in range(w)]
    assert all(len(s) == w * r and sum(s) == g for s in sizes)
    for step in range(w):  # each global step consumes g elements in total
        assert sum(sum(s[step * r:(step + 1) * r]) for s in sizes) == g
    assert max(map(max, sizes)) - min(map(min, sizes)) <= 1


def test_split_batches_like_legacy_rebatch():
    ds = split_batches(D.range(8).batch(4), 3)
    assert [b.tolist() for b in ds] == [[0, 1], [2, 3], [], [4, 5], [6, 7], []]
    assert ds.cardinality() == 6


def test_split_batches_partial_batch_keeps_every_example_once():
    ds = split_batches(D.from_tensor_slices((torch.arange(7), torch.arange(7) * 2)).batch(4), 2)
    assert [a.tolist() for a, _ in ds] == [[0, 1], [2, 3], [4, 5], [6]]
    assert split_batches(D.range(16).batch(4, drop_remainder=True), 2).element_spec.shape == (2,)


def test_split_batches_needs_batches():
    with pytest.raises(ValueError, match="batch"):
        split_batches(D.range(4), 2).element_spec
    with pytest.raises(md.errors.InvalidArgumentError, match="num_splits"):
        split_batches(D.range(4).batch(2), 0)


from multidev.data.rebatching import per_worker_dataset  # noqa: E402

Policy = md.data.experimental.AutoShardPolicy


def steps(ds, replicas):
    """Group per-replica batches into steps of `replicas` outputs."""
    out = [b.tolist() for b in ds]
    return [out[i:i + replicas] for i in range(0, len(out), replicas)]


def test_one_worker_two_replicas_like_the_seed_notebook():
    ds = D.range(16).batch(4)
    assert steps(per_worker_dataset(ds, 1, 0, 2), 2)[:2] == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]


def test_partial_last_batch_leaves_replicas_fewer_or_no_rows():
    assert steps(per_worker_dataset(D.range(7).batch(4), 1, 0, 2), 2) == [[[0, 1], [2, 3]], [[4, 5], [6]]]
    assert steps(per_worker_dataset(D.range(5).batch(4), 1, 0, 2), 2)[-1] == [[4]]


def test_data_sharding_two_workers_two_replicas_sees_every_example_once():
    ds = D.range(22).batch(8)
    per_worker = [steps(per_worker_dataset(ds, 2, w, 2), 2) for w in range(2)]
    assert per_worker[0][0] == [[0, 1], [4, 5]] and per_worker[1][0] == [[2, 3], [6, 7]]
    seen = sorted(x for worker in per_worker for step in worker for batch in step for x in batch)
    assert seen == list(range(22))


def test_file_sharding_two_workers(tmp_path):
    for i in range(2):
        (tmp_path / f"f{i}.txt").write_text("".join(f"{i}-{j}\n" for j in range(7)))
    ds = md.data.TextLineDataset(D.list_files(str(tmp_path / "f*.txt"), shuffle=False)).batch(7)
    w0 = [list(b) for b in per_worker_dataset(ds, 2, 0, 2)]
    w1 = [list(b) for b in per_worker_dataset(ds, 2, 1, 2)]
    assert [len(b) for b in w0] == [2, 2, 2, 1] and [len(b) for b in w1] == [2, 1, 2, 2]
    assert all(line.startswith("0-") for b in w0 for line in b)
    assert all(line.startswith("1-") for b in w1 for line in b)


def test_off_policy_gives_each_worker_everything():
    options = md.data.Options()
    options.experimental_distribute.auto_shard_policy = Policy.OFF
    ds = D.range(8).batch(4).with_options(options)
    assert sorted(x for b in per_worker_dataset(ds, 2, 1, 1) for x in b.tolist()) == list(range(8))


def test_rebatch_of_batches_of_other_widths_says_why():
    """Rows of padded batches of different widths cannot join (TF: FailedPreconditionError without a cause)."""
    ds = md.data.Dataset.range(1, 8).map(lambda n: md.fill([n], n)).padded_batch(3).rebatch(2)
    with pytest.raises(md.errors.FailedPreconditionError, match=r"differ beyond dimension 0.*padded_shapes"):
        list(ds)
