"""TensorFlow's "Distributed input" tutorial on two logical CPUs, typed as printed with ``tf.`` -> ``md.``:
the global batch split across replicas (uneven last batches), iterators and get_next_as_optional,
distribute_datasets_from_function's InputContext, and AutoShardPolicy options."""

import numpy as np

from conformance_support import local, raises, two_cpus


def _local_nested(strategy, x):
    if isinstance(x, (tuple, list)):
        return [_local_nested(strategy, v) for v in x]
    return local(strategy, x)


def case_distributed_tutorial(tf):
    global_batch_size = 16
    mirrored_strategy = two_cpus(tf)
    dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(100).batch(global_batch_size)

    def train_step(inputs):
        features, labels = inputs
        return labels - 0.3 * features
    dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)
    shapes, results = [], []
    for dist_inputs in dist_dataset:
        shapes.append([list(v.shape) for v in mirrored_strategy.experimental_local_results(dist_inputs[0])])
        results.append(local(mirrored_strategy, mirrored_strategy.run(train_step, args=(dist_inputs,))))
    return {"num_replicas": mirrored_strategy.num_replicas_in_sync, "shapes": shapes, "last": results[-1],
            "first_row": results[0][0][0], "second_pass": sum(1 for _ in dist_dataset)}


def case_distributed_uneven(tf):
    strategy = two_cpus(tf)
    out = {}
    for n, batch in ((7, 4), (5, 4), (9, 2), (6, 4), (3, 4)):
        dist = strategy.experimental_distribute_dataset(tf.data.Dataset.range(n).batch(batch))
        out[f"range{n}_batch{batch}"] = [local(strategy, x) for x in dist]
    dropped = strategy.experimental_distribute_dataset(tf.data.Dataset.range(7).batch(4, drop_remainder=True))
    out["dropped"] = [local(strategy, x) for x in dropped]
    pairs = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((np.arange(5.0), np.arange(5))).batch(4))
    out["pairs"] = [_local_nested(strategy, x) for x in pairs]
    out["spec"] = [type(dropped.element_spec).__name__, [type(s).__name__ for s in pairs.element_spec]]
    return out


def case_distributed_unbatched_dataset(tf):
    return raises(lambda: list(two_cpus(tf).experimental_distribute_dataset(tf.data.Dataset.range(3))))


def case_distributed_iterators(tf):
    strategy = two_cpus(tf)
    dataset = tf.data.Dataset.range(9).batch(2)
    dist_dataset = strategy.experimental_distribute_dataset(dataset)
    seen = []
    with strategy.scope():
        dist_dataset_iterator = iter(dist_dataset)
        while True:
            optional_data = dist_dataset_iterator.get_next_as_optional()
            if not optional_data.has_value():
                break
            per_replica_results = strategy.run(lambda inputs: inputs, args=(optional_data.get_value(),))
            seen.append(local(strategy, per_replica_results))
    it = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(4)))
    first = local(strategy, next(it))
    return {"seen": seen, "first": first, "next_at_end": raises(lambda: next(it)),
            "get_next_at_end": raises(it.get_next)}


def case_distributed_from_function(tf):
    global_batch_size = 16
    mirrored_strategy = two_cpus(tf)
    contexts = []

    def dataset_fn(input_context):
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        contexts.append([input_context.num_input_pipelines, input_context.input_pipeline_id,
                         input_context.num_replicas_in_sync, batch_size])
        dataset = tf.data.Dataset.range(40)
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        dataset = dataset.batch(batch_size)
        dataset = dataset.prefetch(2)
        return dataset
    dist_dataset = mirrored_strategy.distribute_datasets_from_function(dataset_fn)
    steps = [local(mirrored_strategy, x) for x in dist_dataset]

    def bad_fn(input_context):
        return tf.data.Dataset.range(4).batch(input_context.get_per_replica_batch_size(15))
    return {"contexts": contexts, "steps": steps,
            "indivisible": raises(lambda: list(mirrored_strategy.distribute_datasets_from_function(bad_fn)))}


def case_distributed_options(tf):
    strategy = two_cpus(tf)
    out = {}
    for policy in ("OFF", "AUTO", "DATA"):
        dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(64).batch(16)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
        dataset = dataset.with_options(options)
        dist = strategy.experimental_distribute_dataset(dataset)
        out[policy] = [[list(v.shape) for v in strategy.experimental_local_results(x[0])] for x in dist]
    return out


def case_element_spec_as_input_signature(tf):
    """The tutorial's "Using element_spec": a tf.function whose input_signature is the distributed
    dataset's element_spec (``2 * inputs`` of the (features, labels) tuple repeats it, in TF too)."""
    global_batch_size = 16
    epochs = 2
    steps_per_epoch = 5
    mirrored_strategy = two_cpus(tf)
    dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(100).batch(global_batch_size)
    dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)

    @tf.function(input_signature=[dist_dataset.element_spec])
    def train_step(per_replica_inputs):
        def step_fn(inputs):
            return 2 * inputs
        return mirrored_strategy.run(step_fn, args=(per_replica_inputs,))
    outputs = []
    for _ in range(epochs):
        iterator = iter(dist_dataset)
        for _ in range(steps_per_epoch):
            output = train_step(next(iterator))
        outputs.append(_local_nested(mirrored_strategy, output))
    return [len(output), [type(s).__name__ for s in dist_dataset.element_spec], outputs[-1]]
