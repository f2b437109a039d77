"""Distributed datasets: TensorFlow's split of global batches across replicas."""

import pytest
import torch

import multidev as md


@pytest.fixture(scope="module")
def two():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


@pytest.fixture(scope="module")
def three():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2"])


def _local(strategy, value):
    return [t.tolist() for t in strategy.experimental_local_results(value)]


def test_seed_split_in_replica_order(two):
    dist = two.experimental_distribute_dataset(md.data.Dataset.range(16).batch(4))
    batches = [_local(two, b) for b in dist]
    assert batches == [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8, 9], [10, 11]], [[12, 13], [14, 15]]]


def test_seed_replica_function_sees_its_slice(two):
    dist = two.experimental_distribute_dataset(md.data.Dataset.range(8).batch(4))

    def fn(batch):
        return {"replica": md.distribute.get_replica_context().replica_id_in_sync_group, "batch": batch}

    results = [two.experimental_local_results(two.run(fn, args=(b,))) for b in dist]
    assert [(r["replica"], r["batch"].tolist()) for r in results[0]] == [(0, [0, 1]), (1, [2, 3])]


@pytest.mark.parametrize("n_examples,batch", [(32, 32), (35, 32), (7, 4), (5, 8), (1, 4)])
def test_every_example_exactly_once(three, n_examples, batch):
    dist = three.experimental_distribute_dataset(md.data.Dataset.range(n_examples).batch(batch))
    seen = []
    for element in dist:
        parts = _local(three, element)
        assert len(parts) == 3
        seen += [x for part in parts for x in part]
    assert seen == list(range(n_examples))


def test_uneven_sizes_follow_tensorflow(three):
    sizes = [[len(p) for p in _local(three, b)] for b in three.experimental_distribute_dataset(
        md.data.Dataset.range(37).batch(32))]
    assert sizes == [[11, 11, 10], [2, 2, 1]]   # a partial batch in slices of ceil(5 / 3), as TF


def test_nested_elements_and_one_replica(two):
    x = torch.arange(12).reshape(6, 2)
    y = torch.arange(6)
    ds = md.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(6)
    (features, labels), = list(two.experimental_distribute_dataset(ds))
    assert isinstance(labels, md.distribute.PerReplica)
    assert _local(two, labels) == [[0, 1, 2], [3, 4, 5]]
    assert [t.shape for t in two.experimental_local_results(features["x"])] == [(3, 2), (3, 2)]
    one = md.distribute.MirroredStrategy(["/cpu:0"])
    element = next(iter(one.experimental_distribute_dataset(ds)))
    assert torch.equal(element[1], y)


def test_iterator_api(two):
    it = iter(two.experimental_distribute_dataset(md.data.Dataset.range(4).batch(4)))
    opt = it.get_next_as_optional()
    assert opt.has_value() and _local(two, opt.get_value()) == [[0, 1], [2, 3]]
    assert not it.get_next_as_optional().has_value()
    with pytest.raises(md.errors.OutOfRangeError):
        it.get_next()
    spec = two.experimental_distribute_dataset(md.data.Dataset.range(4).batch(4)).element_spec
    assert type(spec).__name__ == "PerReplicaSpec" and len(spec.value_specs) == 2


def test_bad_input(two):
    with pytest.raises(TypeError, match="expects a md.data.Dataset.*from_tensor_slices"):
        two.experimental_distribute_dataset([1, 2, 3])
    with pytest.raises(ValueError, match="dataset of scalars"):
        list(two.experimental_distribute_dataset(md.data.Dataset.range(4)))
    dist = two.experimental_distribute_dataset(md.data.Dataset.range(4).batch(2))
    with pytest.raises(RuntimeError, match="inside strategy.run"):
        two.run(lambda: iter(dist))
    with pytest.raises(TypeError, match="InputOptions"):
        two.experimental_distribute_dataset(md.data.Dataset.range(4).batch(2), options={"a": 1})


def test_input_options_validation():
    opts = md.distribute.InputOptions(experimental_fetch_to_device=True, experimental_per_replica_buffer_size=2)
    assert opts.experimental_replication_mode is md.distribute.InputReplicationMode.PER_WORKER
    with pytest.raises(ValueError, match="positive integer"):
        md.distribute.InputOptions(experimental_per_replica_buffer_size=0)
    # TensorFlow builds any combination; distribute_datasets_from_function refuses the invalid ones.
    both = md.distribute.InputOptions(experimental_place_dataset_on_device=True, experimental_fetch_to_device=True,
                                      experimental_replication_mode=md.distribute.InputReplicationMode.PER_REPLICA)
    with pytest.raises(ValueError, match="can not be set to True"):
        md.distribute.get_strategy().distribute_datasets_from_function(lambda ctx: md.data.Dataset.range(2), both)


def test_input_context():
    ctx = md.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=4)
    assert ctx.get_per_replica_batch_size(64) == 16
    with pytest.raises(ValueError, match="`global_batch_size` 10 is not divisible by `num_replicas_in_sync` 4"):
        ctx.get_per_replica_batch_size(10)
    with pytest.raises(ValueError, match="out of range"):
        md.distribute.InputContext(2, 2, 1)


def test_datasets_from_function_per_worker(two):
    contexts = []

    def dataset_fn(ctx):
        contexts.append(ctx)
        return md.data.Dataset.range(10).batch(ctx.get_per_replica_batch_size(4))

    dist = two.distribute_datasets_from_function(dataset_fn)
    batches = [_local(two, b) for b in dist]
    assert batches == [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8, 9], []]]
    assert [(c.num_input_pipelines, c.input_pipeline_id, c.num_replicas_in_sync) for c in contexts] == [(1, 0, 2)]


def test_datasets_from_function_per_replica(two):
    def dataset_fn(ctx):
        start = ctx.input_pipeline_id * 100
        return md.data.Dataset.range(start, start + 3 + ctx.input_pipeline_id).batch(2)

    opts = md.distribute.InputOptions(experimental_replication_mode=md.distribute.InputReplicationMode.PER_REPLICA)
    batches = [_local(two, b) for b in two.distribute_datasets_from_function(dataset_fn, opts)]
    assert batches == [[[0, 1], [100, 101]], [[2], [102, 103]]]


def test_auto_shard_with_a_fake_worker_count(two, pretend_workers):
    pretend_workers(two, 2, 1)
    ds = md.data.Dataset.range(16).batch(4)
    steps = [_local(two, b) for b in two.experimental_distribute_dataset(ds)]
    # DATA sharding: each global batch of 4 is split over 4 replicas (2 workers x 2); worker 1 holds
    # replicas 2 and 3, so it sees examples 2, 3 of every batch, in lockstep with worker 0.
    assert steps == [[[2], [3]], [[6], [7]], [[10], [11]], [[14], [15]]]
    partial = [_local(two, b) for b in two.experimental_distribute_dataset(md.data.Dataset.range(6).batch(4))]
    assert partial == [[[2], [3]], [[], []]]  # worker 1 still steps (with no examples) while worker 0 has data


def test_partial_batches_give_exact_loss_and_gradients():
    """compute_average_loss with the global batch size: replicas with 0 examples contribute nothing."""
    strategy = md.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(4)])
    torch.manual_seed(0)
    x = torch.randn(6, 3)
    y = torch.randn(6, 1)
    with strategy.scope():
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
    ref = torch.nn.Linear(3, 1)
    ref.load_state_dict({k: v.detach().clone() for k, v in model.state_dict().items()})
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    ds = md.data.Dataset.from_tensor_slices((x, y)).batch(4)  # batches of 4 and 2: replicas 2, 3 get 0 then

    def step(xb, yb, global_batch):
        opt.zero_grad()
        loss = md.nn.compute_average_loss(((model(xb) - yb) ** 2).sum(1), global_batch_size=global_batch)
        loss.backward()
        opt.step()
        return loss

    for (xb, yb), (xr, yr) in zip(strategy.experimental_distribute_dataset(ds), ds):
        losses = strategy.run(step, args=(xb, yb, len(xr)))
        ref_opt.zero_grad()
        ref_loss = ((ref(xr) - yr) ** 2).sum(1).mean()
        ref_loss.backward()
        ref_opt.step()
        assert strategy.reduce("SUM", losses, axis=None).item() == pytest.approx(ref_loss.item(), rel=1e-6)
    for p, e in zip(model.parameters(), ref.parameters()):
        for component in p.values:
            torch.testing.assert_close(component.detach(), e.detach())


def test_file_sharding_with_a_fake_worker_count(two, monkeypatch, tmp_path, pretend_workers):
    for i in range(2):
        (tmp_path / f"part{i}.txt").write_text("".join(f"{i}-{j}\n" for j in range(4)))
    pretend_workers(two, 2, 1)
    files = md.data.Dataset.list_files(str(tmp_path / "part*.txt"), shuffle=False)
    ds = md.data.TextLineDataset(files).batch(4)
    lines = [x for b in two.experimental_distribute_dataset(ds) for part in two.experimental_local_results(b) for x in part]
    assert sorted(lines) == [f"1-{j}" for j in range(4)]  # worker 1 reads only the second file
    one_file = md.data.TextLineDataset(str(tmp_path / "part0.txt")).batch(2)
    options = md.data.Options()
    options.experimental_distribute.auto_shard_policy = md.data.experimental.AutoShardPolicy.FILE
    with pytest.raises(Exception, match="(?i)file"):
        list(two.experimental_distribute_dataset(one_file.with_options(options)))
