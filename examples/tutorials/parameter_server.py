"""TensorFlow's "Parameter server training with ParameterServerStrategy" tutorial, ported to multidev.

A chief (the coordinator), workers and parameter servers as local processes; the launcher writes
each one's ``TF_CONFIG``. Workers and parameter servers serve inside the ``ParameterServerStrategy``
constructor and stop when the chief is done; everything after it runs on the chief:

    multidev launch --chief --workers 2 --ps 1 examples/tutorials/parameter_server.py [--workdir DIR]

Part 1 trains with ``Model.fit`` (a ``DatasetCreator``; TensorBoard, ModelCheckpoint and
BackupAndRestore callbacks). Part 2 is the tutorial's custom loop: ``StringLookup`` preprocessing,
an embedding whose table is partitioned over the parameter servers (``MinSizePartitioner``),
``ClusterCoordinator.schedule``/``join``, a metric updated on the workers and read by the chief,
``RemoteValue.fetch``, and inline and distributed evaluation.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile

import numpy as np
import torch

import multidev as md

FEATURE_VOCAB = ["avenger", "ironman", "batman", "hulk", "spiderman", "kingkong", "wonder_woman"]
LABEL_VOCAB = ["yes", "no"]


def keras_fit(strategy, workdir) -> None:
    print("== Model.fit")
    global_batch_size = 64
    x = torch.rand(10, 10, generator=torch.Generator().manual_seed(0)).numpy()
    # TF's y has shape (10,), which Keras 2's fit expands to (batch, 1); multidev's fit follows Keras 3,
    # which does not, so y is (10, 1) here.
    y = torch.rand(10, 1, generator=torch.Generator().manual_seed(1)).numpy()

    def dataset_fn(input_context):
        dataset = md.data.Dataset.from_tensor_slices((x, y)).shuffle(10, seed=0).repeat()
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return dataset.batch(input_context.get_per_replica_batch_size(global_batch_size)).prefetch(2)

    with strategy.scope():
        model = md.keras.models.Sequential([md.keras.layers.Input(shape=(10,)), md.keras.layers.Dense(10)])
        model.compile(md.keras.optimizers.SGD(), loss="mse", steps_per_execution=10)
    callbacks = [
        md.keras.callbacks.TensorBoard(log_dir=os.path.join(workdir, "log")),
        md.keras.callbacks.ModelCheckpoint(filepath=os.path.join(workdir, "ckpt.keras")),
        md.keras.callbacks.BackupAndRestore(backup_dir=os.path.join(workdir, "backup")),
    ]
    history = model.fit(md.keras.utils.experimental.DatasetCreator(dataset_fn), epochs=5, steps_per_epoch=20,
                        callbacks=callbacks, verbose=2)
    print("fit losses:", " ".join(f"{v:.4f}" for v in history.history["loss"]))
    print("working dir:", sorted(os.listdir(workdir)))


def feature_and_label_gen(rng, num_examples=200):
    examples = {"features": [], "label": []}
    for _ in range(num_examples):
        features = rng.sample(FEATURE_VOCAB, 3)
        examples["features"].append(features)
        examples["label"].append(["yes"] if "avenger" in features else ["no"])
    return examples


def custom_loop(strategy) -> None:
    print("== custom training loop")
    with strategy.scope():
        feature_lookup_layer = md.keras.layers.StringLookup(vocabulary=FEATURE_VOCAB, mask_token=None)
        label_lookup_layer = md.keras.layers.StringLookup(vocabulary=LABEL_VOCAB, num_oov_indices=0,
                                                          mask_token=None)

    def preprocess(examples):
        # TF maps the lookup layers over a string dataset; torch has no string tensors, so the strings
        # are looked up once here and the dataset holds their ids, as ({"features": ids}, label ids).
        return ({"features": feature_lookup_layer(np.array(examples["features"])).numpy()},
                label_lookup_layer(np.array(examples["label"])).numpy())

    rng = random.Random(0)
    features, labels = preprocess(feature_and_label_gen(rng))

    def dataset_fn(_):
        return md.data.Dataset.from_tensor_slices((features, labels)).shuffle(200, seed=0).batch(32).repeat()

    with strategy.scope():
        layers = md.keras.layers
        model_input = layers.Input(shape=(3,), dtype="int64", name="model_input")
        emb_layer = layers.Embedding(input_dim=len(feature_lookup_layer.get_vocabulary()), output_dim=16384)
        emb_output = layers.GlobalAveragePooling1D()(emb_layer(model_input))   # tf.reduce_mean(..., axis=1)
        dense_output = layers.Dense(units=1, activation="sigmoid",
                                    kernel_regularizer=md.keras.regularizers.L2(1e-4))(emb_output)
        model = md.keras.Model({"features": model_input}, dense_output)
        optimizer = md.keras.optimizers.RMSprop(learning_rate=0.1)
        accuracy = md.keras.metrics.Accuracy()
    print("embedding shards:", [(tuple(w.shape), str(w.device)) for w in emb_layer.weights])

    @md.function
    def step_fn(iterator):
        def replica_fn(batch_data, labels):
            with md.GradientTape() as tape:
                pred = model(batch_data, training=True)
                per_example_loss = md.keras.losses.BinaryCrossentropy(
                    reduction=md.keras.losses.Reduction.NONE)(labels, pred)
                loss = md.nn.compute_average_loss(per_example_loss)
                model_losses = model.losses
                if model_losses:
                    loss += md.nn.scale_regularization_loss(md.add_n(model_losses))
            gradients = tape.gradient(loss, model.trainable_variables)

            optimizer.apply_gradients(zip(gradients, model.trainable_variables))

            actual_pred = (pred > 0.5).long()       # tf.cast(tf.greater(pred, 0.5), tf.int64)
            accuracy.update_state(labels, actual_pred)
            return loss

        batch_data, labels = next(iterator)
        losses = strategy.run(replica_fn, args=(batch_data, labels))
        return strategy.reduce(md.distribute.ReduceOp.SUM, losses, axis=None)

    coordinator = md.distribute.coordinator.ClusterCoordinator(strategy)

    @md.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(dataset_fn)

    per_worker_iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))
    num_epochs, steps_per_epoch = 4, 5
    for i in range(num_epochs):
        accuracy.reset_states()
        for _ in range(steps_per_epoch):
            coordinator.schedule(step_fn, args=(per_worker_iterator,))
        coordinator.join()      # wait for all the scheduled steps
        print("Finished epoch %d, accuracy is %f." % (i, accuracy.result().numpy()))
    loss = coordinator.schedule(step_fn, args=(per_worker_iterator,))
    print("Final loss is %f" % loss.fetch())

    eval_features, eval_labels = preprocess(feature_and_label_gen(rng, num_examples=16))
    eval_accuracy = md.keras.metrics.Accuracy()
    for batch_data, labels in md.data.Dataset.from_tensor_slices((eval_features, eval_labels)).batch(8):
        pred = model(batch_data, training=False)
        actual_pred = (pred > 0.5).long()
        eval_accuracy.update_state(labels, actual_pred)
    print("Evaluation accuracy: %f" % eval_accuracy.result())

    with strategy.scope():
        eval_accuracy = md.keras.metrics.Accuracy()

    @md.function
    def eval_step(iterator):
        def replica_fn(batch_data, labels):
            pred = model(batch_data, training=False)
            actual_pred = (pred > 0.5).long()
            eval_accuracy.update_state(labels, actual_pred)

        batch_data, labels = next(iterator)
        strategy.run(replica_fn, args=(batch_data, labels))

    def eval_dataset_fn():
        return md.data.Dataset.from_tensor_slices((eval_features, eval_labels)).shuffle(16, seed=0).repeat().batch(8)

    per_worker_eval_iterator = iter(coordinator.create_per_worker_dataset(eval_dataset_fn))
    for _ in range(2):    # eval_steps_per_epoch
        coordinator.schedule(eval_step, args=(per_worker_eval_iterator,))
    coordinator.join()
    print("Distributed evaluation accuracy: %f (%d examples)" % (eval_accuracy.result(), eval_accuracy.count.numpy()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None, help="fit's logs, checkpoints and backup (default: a temp dir)")
    args = parser.parse_args(argv)
    md.random.set_seed(0)
    cluster_resolver = md.distribute.cluster_resolver.TFConfigClusterResolver()
    num_ps = len(cluster_resolver.cluster_spec().as_dict().get("ps", []))
    print(f"task {cluster_resolver.task_type}:{cluster_resolver.task_id}", flush=True)
    variable_partitioner = md.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=(256 << 10), max_shards=max(num_ps, 1))
    # Workers and parameter servers serve here until the chief is done; the chief goes on.
    strategy = md.distribute.ParameterServerStrategy(cluster_resolver, variable_partitioner=variable_partitioner)
    workdir = args.workdir or tempfile.mkdtemp(prefix="parameter_server_")
    keras_fit(strategy, workdir)
    custom_loop(strategy)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
