"""Optimizer options trained by ``fit`` under a strategy, custom-loop loss reductions in ``strategy.run``
(``Reduction.NONE`` with ``compute_average_loss``, ``Reduction.SUM``), and tf.data pipelines distributed over
replicas, written once for ``tf`` = TensorFlow or multidev (``_tf_more4_programs.py``)."""

import numpy as np

from _tf_core_common import IS_TF, copies_agree, ints, rnd, scope, tf, _STRATEGY
from _tf_fit_idioms import classifier, data

OPTIMIZERS = {
    "adam_amsgrad": lambda: tf.keras.optimizers.Adam(0.05, amsgrad=True),
    "sgd_nesterov": lambda: tf.keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
    "sgd_clipnorm": lambda: tf.keras.optimizers.SGD(0.3, clipnorm=0.05),
    "adam_global_clipnorm": lambda: tf.keras.optimizers.Adam(0.05, global_clipnorm=0.1),
    "adam_weight_decay": lambda: tf.keras.optimizers.Adam(0.05, weight_decay=0.05),
    "adam_ema": lambda: tf.keras.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.5, ema_overwrite_frequency=2),
    "nadam": lambda: tf.keras.optimizers.Nadam(0.01),
    "rmsprop_centered": lambda: tf.keras.optimizers.RMSprop(0.01, rho=0.8, momentum=0.5, centered=True, epsilon=1e-3),
    "adagrad": lambda: tf.keras.optimizers.Adagrad(0.1, initial_accumulator_value=0.5),
    "sgd_exponential_staircase": lambda: tf.keras.optimizers.SGD(
        tf.keras.optimizers.schedules.ExponentialDecay(0.3, decay_steps=2, decay_rate=0.5, staircase=True)),
    "sgd_piecewise": lambda: tf.keras.optimizers.SGD(
        tf.keras.optimizers.schedules.PiecewiseConstantDecay([2, 4], [0.3, 0.1, 0.02]), momentum=0.5),
    "adam_cosine_warmup": lambda: tf.keras.optimizers.Adam(tf.keras.optimizers.schedules.CosineDecay(
        0.0, decay_steps=6, warmup_target=0.05, warmup_steps=2)),
}


def optimizers(replicas):
    x, y = data()
    out = {}
    for name, make in OPTIMIZERS.items():
        with scope(replicas):
            model = classifier()
            opt = make()
            if name == "adam_weight_decay":
                opt.exclude_from_weight_decay(var_names=["bias"])
            model.compile(optimizer=opt, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        h = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        out[name] = {"loss": rnd(h.history["loss"], 5), "kernel": rnd(model.layers[-1].kernel, 5),
                     "bias": rnd(model.layers[0].bias, 5), "iterations": int(opt.iterations.numpy()),
                     "copies_agree": copies_agree(model.trainable_variables)}
    return out


def _strategy(replicas):
    with scope(replicas):   # makes the test's MirroredStrategy on 2 replicas
        pass
    return _STRATEGY["s"] if replicas == 2 else tf.distribute.get_strategy()


def loop_reductions(replicas):
    """A custom loop: per-example losses averaged by ``compute_average_loss`` (with and without the global
    batch size, with sample weights), a SUM-reduced loss divided by hand, summed losses reduced to the host."""
    strategy = _strategy(replicas)
    x, y = data(16, 3)
    sw = np.linspace(0.5, 1.5, 16).astype("float32")
    global_batch = 8
    ds = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x, y, sw)).batch(global_batch))
    with strategy.scope():
        model = classifier()
        optimizer = tf.keras.optimizers.SGD(0.2)
        none_loss = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE)
        sum_loss = tf.keras.losses.MeanSquaredError(reduction=tf.keras.losses.Reduction.SUM)
        train_acc = tf.keras.metrics.SparseCategoricalAccuracy()

    def step(inputs):
        features, labels, weights = inputs
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            per_example = none_loss(labels, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch, sample_weight=weights)
            probs = tf.nn.softmax(logits) if IS_TF else logits.softmax(-1)
            onehot = tf.one_hot(labels, 3)
            loss += 0.5 * sum_loss(onehot, probs) / global_batch
            penalty = tf.add_n([tf.reduce_sum(w * w) for w in model.trainable_weights]) * 1e-3
            loss += tf.nn.scale_regularization_loss(penalty)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        train_acc.update_state(labels, logits)
        return loss, tf.nn.compute_average_loss(per_example)

    losses, unscaled = [], []
    for epoch in range(2):
        for batch in ds:
            per_replica, per_replica_plain = strategy.run(step, args=(batch,))
            losses.append(round(float(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)), 5))
            unscaled.append(round(float(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_plain, axis=None)), 5))
    return {"losses": losses, "unscaled": unscaled, "accuracy": round(float(train_acc.result()), 5),
            "kernel": rnd(model.layers[-1].kernel, 5), "copies_agree": copies_agree(model.trainable_variables)}


def _per_replica_shapes(strategy, dist):
    return [[list(t.shape) for t in strategy.experimental_local_results(batch)] for batch in dist]


def _values(strategy, dist):
    return [[ints(t) for t in strategy.experimental_local_results(batch)] for batch in dist]


def data_pipelines(replicas):
    strategy = _strategy(replicas)
    out = {"partial": _per_replica_shapes(strategy, strategy.experimental_distribute_dataset(
        tf.data.Dataset.range(9).batch(4, drop_remainder=False)))}
    seqs = tf.data.Dataset.from_generator(lambda: ([1] * n for n in range(1, 6)),
                                          output_signature=tf.TensorSpec(shape=(None,), dtype=tf.int32))
    out["padded"] = _values(strategy, strategy.experimental_distribute_dataset(
        seqs.padded_batch(2, padded_shapes=[5], padding_values=-1)))
    windows = tf.data.Dataset.range(8).window(3, shift=2, drop_remainder=True).flat_map(lambda w: w.batch(3))
    out["windows"] = [ints(w) for w in windows]
    out["windows_batched"] = _values(strategy, strategy.experimental_distribute_dataset(windows.batch(2)))
    rows = tf.data.Dataset.from_tensor_slices(np.arange(12).reshape(3, 4)).unbatch().batch(5)
    out["unbatch"] = _values(strategy, strategy.experimental_distribute_dataset(rows))
    out["rebatch"] = [ints(b) for b in tf.data.Dataset.range(10).batch(4).rebatch(2)]
    out["skip_take"] = _values(strategy, strategy.experimental_distribute_dataset(
        tf.data.Dataset.range(20).batch(4).skip(1).take(2)))
    cached = tf.data.Dataset.range(8).cache()
    fixed = cached.shuffle(8, seed=1, reshuffle_each_iteration=False).batch(4)
    first, second = [ints(b) for b in fixed], [ints(b) for b in fixed]
    out["fixed_order"] = [first == second, sorted(sum(first, []))]
    again = cached.shuffle(8, seed=1, reshuffle_each_iteration=True)
    orders = [ints(list(again)) for _ in range(3)]
    out["reshuffled"] = [len({tuple(o) for o in orders}) > 1, sorted(orders[0])]

    def dataset_fn(input_context):
        batch = input_context.get_per_replica_batch_size(4)
        return tf.data.Dataset.range(12).shard(input_context.num_input_pipelines,
                                               input_context.input_pipeline_id).batch(batch)
    out["from_function"] = _values(strategy, strategy.distribute_datasets_from_function(dataset_fn))
    return out


def fit_pipelines(replicas):
    """tf.data pipelines as fit's input: zipped, weights made by ``map``, ``drop_remainder``, DATA sharding
    options, a repeated generator, cache/prefetch beside a batched validation set, ``((features,), label)``."""
    x, y = data()
    D = tf.data.Dataset
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    rows = lambda: ((x[i], y[i]) for i in range(len(x)))   # noqa: E731
    signature = (tf.TensorSpec((4,), tf.float32), tf.TensorSpec((), tf.int64))
    cases = {
        "zip": (D.zip((D.from_tensor_slices(x), D.from_tensor_slices(y))).batch(8), {}),
        "map_weights": (D.from_tensor_slices((x, y)).map(lambda a, b: (a, b, tf.cast(b, tf.float32) + 0.5)).batch(8),
                        {}),
        "drop_remainder": (D.from_tensor_slices((x, y)).batch(10, drop_remainder=True), {}),
        "data_sharding": (D.from_tensor_slices((x, y)).batch(8).with_options(options), {}),
        "generator": (D.from_generator(rows, output_signature=signature).batch(8).repeat(), {"steps_per_epoch": 3}),
        "cached": (D.from_tensor_slices((x, y)).cache().batch(8).prefetch(tf.data.AUTOTUNE),
                   {"validation_data": D.from_tensor_slices((x[:8], y[:8])).batch(4)}),
        "feature_tuple": (D.from_tensor_slices(((x,), y)).batch(8), {}),
    }
    out = {}
    for name, (ds, kwargs) in cases.items():
        with scope(replicas):
            model = classifier()
            model.compile(tf.keras.optimizers.SGD(0.2), tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=["accuracy"])
        h = model.fit(ds, epochs=2, verbose=0, **kwargs)
        out[name] = {"history": {k: rnd(v, 5) for k, v in sorted(h.history.items())},
                     "kernel": rnd(model.layers[-1].kernel, 4)}
    return out


REPLICATED = [optimizers, loop_reductions, data_pipelines, fit_pipelines]
PROGRAMS = []
