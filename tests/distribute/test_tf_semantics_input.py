"""Issue 17 items 3 and 8: partial global batches and the distributed dataset's surface, as TF 2.21."""

import pytest
import torch

import multidev as md


@pytest.fixture(scope="module")
def two():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _sizes(strategy, dataset):
    dist = strategy.experimental_distribute_dataset(dataset)
    return [[len(p) for p in strategy.experimental_local_results(b)] for b in dist]


@pytest.mark.parametrize("n,batch,last", [(100, 16, [2, 2]), (13, 8, [3, 2]), (22, 8, [3, 3])])
def test_partial_batch_splits_as_tensorflow(two, n, batch, last):
    sizes = _sizes(two, md.data.Dataset.range(n).batch(batch))
    assert sizes[:-1] == [[batch // 2] * 2] * (len(sizes) - 1)
    assert sizes[-1] == last   # TF 2.21 observed; the old split filled replica 0 first ([4, 0] for 100/16)


def test_partial_batch_keeps_order_and_every_example(two):
    dist = two.experimental_distribute_dataset(md.data.Dataset.range(13).batch(8))
    last = [t.tolist() for t in two.experimental_local_results(list(dist)[-1])]
    assert last == [[8, 9, 10], [11, 12]]


def test_compute_average_loss_on_the_last_step_matches_tensorflow(two):
    """Per-example loss 1.0; without global_batch_size TF's last step sums to 1.0 (each replica 2 / (2 * 2))."""
    dist = two.experimental_distribute_dataset(md.data.Dataset.range(100).batch(16))

    def step(batch):
        return md.nn.compute_average_loss(torch.ones(batch.shape[0]))

    losses = [float(two.reduce("SUM", two.run(step, args=(b,)), axis=None)) for b in dist]
    assert losses == [1.0] * 7


def test_keras_fit_splits_the_last_batch_like_the_dataset():
    """Keras fit on a strategy splits a batch as the distributed dataset does (16 rows over 3 replicas:
    [6, 6, 4], 4 rows: [2, 2, 0]), and its loss and metrics stay exact."""
    three = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2"])
    seen = []

    class Probe(md.keras.layers.Layer):
        def call(self, x):
            seen.append(int(x.shape[0]))
            return x

    with three.scope():
        model = md.keras.Sequential([md.keras.Input((1,)), Probe(),
                                     md.keras.layers.Dense(1, kernel_initializer="ones")])
        model.compile(optimizer=md.keras.optimizers.SGD(0.0), loss="mse", metrics=["mae"])
    x = torch.arange(20.0).reshape(20, 1)
    history = model.fit(x, torch.zeros(20, 1), batch_size=16, epochs=1, verbose=0, shuffle=False)
    dataset_split = _sizes(three, md.data.Dataset.range(20).batch(16))
    assert dataset_split == [[6, 6, 4], [2, 2, 0]]   # TF 2.21 on 3 logical CPUs (was [6, 5, 5])
    assert sorted(seen[-6:-3]) == [4, 6, 6] and sorted(seen[-3:]) == [0, 2, 2]
    assert history.history["loss"][0] == pytest.approx(float((x ** 2).mean()), rel=1e-6)
    assert history.history["mae"][0] == pytest.approx(float(x.mean()), rel=1e-6)


def test_element_spec_is_a_per_replica_spec_equal_to_the_iterators(two):
    dist = two.experimental_distribute_dataset(md.data.Dataset.range(10).batch(4))
    spec = dist.element_spec
    assert type(spec).__name__ == "PerReplicaSpec"
    assert spec.value_specs == (md.data.TensorSpec((None,), torch.int64),) * 2
    assert spec == iter(dist).element_spec
    assert spec != md.data.Dataset.range(10).batch(4).element_spec
    one = md.distribute.MirroredStrategy(["/cpu:0"])   # one replica: the dataset's own spec, as TF
    assert one.experimental_distribute_dataset(md.data.Dataset.range(4).batch(2)).element_spec == \
        md.data.TensorSpec((None,), torch.int64)


def test_input_options_fetch_to_device_defaults_true():
    assert md.distribute.InputOptions().experimental_fetch_to_device is True
    assert md.distribute.InputOptions(experimental_fetch_to_device=None).experimental_fetch_to_device is True
    assert md.distribute.InputOptions(experimental_fetch_to_device=False).experimental_fetch_to_device is False


def test_per_replica_mode_in_experimental_distribute_dataset_is_not_implemented(two):
    options = md.distribute.InputOptions(experimental_replication_mode=md.distribute.InputReplicationMode.PER_REPLICA)
    with pytest.raises(NotImplementedError, match="distribute_datasets_from_function"):
        two.experimental_distribute_dataset(md.data.Dataset.range(4).batch(2), options)


def _off(dataset):
    options = md.data.Options()
    options.experimental_distribute.auto_shard_policy = md.data.experimental.AutoShardPolicy.OFF
    return dataset.with_options(options)


def _steps(strategy, dataset):
    return [[p.tolist() for p in strategy.experimental_local_results(b)]
            for b in strategy.experimental_distribute_dataset(dataset)]


def test_auto_shard_off_recuts_rows_across_global_batches(two):
    """TF 2.21 (tests/conformance/cases/distributed_pipeline.py): with auto-sharding OFF on one worker a
    partial batch in mid-stream is followed by the next batch's rows (before: [4] [] each epoch)."""
    assert _steps(two, _off(md.data.Dataset.range(5).batch(4).repeat(2))) == [
        [[0, 1], [2, 3]], [[4, 0], [1, 2]], [[3, 4], []]]
    concatenated = md.data.Dataset.range(5).batch(4).concatenate(md.data.Dataset.range(10, 17).batch(4))
    assert _steps(two, _off(concatenated)) == [[[0, 1], [2, 3]], [[4, 10], [11, 12]], [[13, 14], [15, 16]]]
    # a map may change the batch: its batch size is unknown, each batch is split on its own (TF: [1, 1])
    assert _steps(two, _off(md.data.Dataset.range(6).batch(4).map(lambda b: b * 2))) == [
        [[0, 2], [4, 6]], [[8], [10]]]


def test_scalar_component_of_a_batch_says_to_enumerate_first(two):
    dist = two.experimental_distribute_dataset(md.data.Dataset.range(6).batch(4).enumerate())
    with pytest.raises(ValueError, match=r"enumerate\(\) before batch\(\)"):
        list(dist)


def test_class_weight_of_a_distributed_batch_weighs_each_replicas_rows():
    """fit's class_weight on a batch already split per replica (a worker's own stream): each replica's
    labels give its weights, an empty replica none (it raised 'Could not infer dtype of PerReplica')."""
    from multidev.keras.models.epoch_iterator import apply_class_weight
    x = md.distribute.PerReplica((torch.zeros(2, 1), torch.zeros(0, 1)))
    y = md.distribute.PerReplica((torch.tensor([0, 1]), torch.zeros(0, dtype=torch.int64)))
    _, _, weights = apply_class_weight((x, y), {0: 1.0, 1: 3.0})
    assert [w.tolist() for w in weights.values] == [[1.0, 3.0], []]
