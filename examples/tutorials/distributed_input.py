"""TensorFlow's "Distributed input" tutorial, ported to multidev (MirroredStrategy on 2 logical CPUs).

``experimental_distribute_dataset`` (each global batch split between the replicas, sharding and
auto-shard options), ``distribute_datasets_from_function`` with an ``InputContext``, distributed
iterators (for loops, ``iter``/``next``, ``element_spec`` as an ``md.function`` input signature),
partial batches read with ``get_next_as_optional``, ``md.distribute.InputOptions`` and
``experimental_distribute_values_from_function``.

    python examples/tutorials/distributed_input.py
"""

from __future__ import annotations

import _common
import multidev as md

_common.use_logical_cpus(2)


def local(per_replica) -> list:
    """One replica's value per entry, as plain lists (what ``tf.print`` shows)."""
    return [v.tolist() for v in md.distribute.get_strategy().experimental_local_results(per_replica)]


def distribute_dataset(strategy) -> None:
    print("== experimental_distribute_dataset")
    global_batch_size = 16
    dataset = md.data.Dataset.from_tensors(([1.0], [1.0])).repeat(100).batch(global_batch_size)
    dist_dataset = strategy.experimental_distribute_dataset(dataset)

    @md.function
    def train_step(inputs):
        features, labels = inputs
        return labels - 0.3 * features

    steps = 0
    for dist_inputs in dist_dataset:
        result = strategy.run(train_step, args=(dist_inputs,))
        steps += 1
    print(f"for loop: {steps} steps; last step per replica shapes:",
          [list(v.shape) for v in strategy.experimental_local_results(result)])
    dist_iterator = iter(dist_dataset)
    for _ in range(2):
        print(strategy.run(train_step, args=(next(dist_iterator),)))

    print("== batching: Dataset.range(6).batch(4) on 2 replicas")
    for batch in strategy.experimental_distribute_dataset(md.data.Dataset.range(6).batch(4)):
        print(local(batch))

    options = md.data.Options()
    options.experimental_distribute.auto_shard_policy = md.data.experimental.AutoShardPolicy.DATA
    dataset = md.data.Dataset.range(8).batch(4).with_options(options)
    print("auto_shard_policy DATA, 1 worker:", [local(b) for b in strategy.experimental_distribute_dataset(dataset)])


def datasets_from_function(strategy) -> None:
    print("== distribute_datasets_from_function")
    global_batch_size = 16

    def dataset_fn(input_context):
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        print(f"dataset_fn: pipeline {input_context.input_pipeline_id} of {input_context.num_input_pipelines}, "
              f"{input_context.num_replicas_in_sync} replicas, per-replica batch {batch_size}")
        dataset = md.data.Dataset.range(64).map(lambda x: ([x], [1.0]))
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return dataset.batch(batch_size).prefetch(2)

    dist_dataset = strategy.distribute_datasets_from_function(dataset_fn)
    first = next(iter(dist_dataset))
    print("first features per replica:", local(first[0]))
    print("batches:", sum(1 for _ in dist_dataset))


def iterators_and_element_spec(strategy) -> None:
    print("== element_spec as an input signature")
    global_batch_size, epochs, steps_per_epoch = 16, 2, 2
    dataset = md.data.Dataset.from_tensors(([1.0], [1.0])).repeat(100).batch(global_batch_size)
    dist_dataset = strategy.experimental_distribute_dataset(dataset)
    print("element_spec:", dist_dataset.element_spec)

    @md.function(input_signature=[dist_dataset.element_spec])
    def train_step(per_replica_inputs):
        def step_fn(inputs):
            return [2 * t for t in inputs]
        return strategy.run(step_fn, args=(per_replica_inputs,))

    for _ in range(epochs):
        iterator = iter(dist_dataset)
        for _ in range(steps_per_epoch):
            output = train_step(next(iterator))
        print("features*2 per replica shapes:", [list(v.shape) for v in strategy.experimental_local_results(output[0])],
              "first value:", float(strategy.experimental_local_results(output[0])[0][0, 0]))


def partial_batches(strategy) -> None:
    print("== get_next_as_optional: Dataset.range(9).batch(4), 5 steps")
    steps_per_loop = 5
    distributed_iterator = iter(strategy.experimental_distribute_dataset(md.data.Dataset.range(9).batch(4)))

    @md.function
    def train_fn(distributed_iterator):
        for step in range(steps_per_loop):
            optional_data = distributed_iterator.get_next_as_optional()
            if not optional_data.has_value():
                print(f"no value at step {step}: stop")
                break
            per_replica_results = strategy.run(lambda x: x, args=(optional_data.get_value(),))
            print(local(per_replica_results))

    train_fn(distributed_iterator)


def input_options(strategy) -> None:
    print("== InputOptions")
    options = md.distribute.InputOptions(experimental_fetch_to_device=False)
    dist_dataset = strategy.experimental_distribute_dataset(md.data.Dataset.range(8).batch(4), options)
    print("fetch_to_device=False, devices:", [v.device.type for v in strategy.experimental_local_results(
        next(iter(dist_dataset)))])
    options = md.distribute.InputOptions(
        experimental_replication_mode=md.distribute.InputReplicationMode.PER_REPLICA,
        experimental_place_dataset_on_device=False, experimental_per_replica_buffer_size=1)
    dist_dataset = strategy.distribute_datasets_from_function(
        lambda ctx: md.data.Dataset.range(8).batch(2).shard(ctx.num_input_pipelines, ctx.input_pipeline_id), options)
    print("PER_REPLICA pipelines:", [local(b) for b in dist_dataset])

    def value_fn(ctx):
        return md.constant(ctx.replica_id_in_sync_group)

    distributed_values = strategy.experimental_distribute_values_from_function(value_fn)
    print("values from function:", local(strategy.run(lambda x: x, args=(distributed_values,))))


def main() -> int:
    strategy = md.distribute.MirroredStrategy()
    print(f"Number of replicas: {strategy.num_replicas_in_sync}")
    distribute_dataset(strategy)
    datasets_from_function(strategy)
    iterators_and_element_spec(strategy)
    partial_batches(strategy)
    input_options(strategy)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
