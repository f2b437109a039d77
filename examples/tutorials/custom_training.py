"""TensorFlow's "Custom training with tf.distribute.Strategy" tutorial, ported to multidev.

A custom training loop under ``MirroredStrategy`` on 2 logical CPUs: Fashion-MNIST (Keras cache, or
synthetic images when it is missing), a small CNN with L2 kernel regularizers whose ``model.losses``
are added with ``md.nn.scale_regularization_loss``, per-example losses averaged over the global batch
with ``md.nn.compute_average_loss``, metrics, and ``md.train.Checkpoint`` saved every other epoch and
restored into a new model outside the strategy. Then the tutorial's other ways to iterate: an
explicit iterator, and the loop inside an ``md.function``.

    python examples/tutorials/custom_training.py [--epochs 3] [--checkpoint-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import _common
import multidev as md

_common.use_logical_cpus(2)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--checkpoint-dir", default=None, help="where to save (default: a new temporary directory)")
    args = parser.parse_args(argv)
    md.random.set_seed(0)

    (train_images, train_labels), (test_images, test_labels) = _common.load_images("fashion_mnist", 512, 256)
    strategy = md.distribute.MirroredStrategy()
    print(f"Number of devices: {strategy.num_replicas_in_sync}")

    buffer_size = len(train_images)
    batch_size_per_replica = 32
    global_batch_size = batch_size_per_replica * strategy.num_replicas_in_sync
    train_dataset = md.data.Dataset.from_tensor_slices((train_images, train_labels)).shuffle(
        buffer_size, seed=0).batch(global_batch_size)
    test_dataset = md.data.Dataset.from_tensor_slices((test_images, test_labels)).batch(global_batch_size)
    train_dist_dataset = strategy.experimental_distribute_dataset(train_dataset)
    test_dist_dataset = strategy.experimental_distribute_dataset(test_dataset)

    def create_model():
        return _common.conv_model(md.keras.regularizers.L2(1e-5))

    checkpoint_dir = args.checkpoint_dir or tempfile.mkdtemp(prefix="training_checkpoints_")
    checkpoint_prefix = os.path.join(checkpoint_dir, "ckpt")

    with strategy.scope():
        # Reduction NONE: the loop divides by the GLOBAL batch size itself (compute_average_loss).
        loss_object = md.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=md.keras.losses.Reduction.NONE)

        def compute_loss(labels, predictions, model_losses):
            per_example_loss = loss_object(labels, predictions)
            loss = md.nn.compute_average_loss(per_example_loss, global_batch_size=global_batch_size)
            if model_losses:
                loss += md.nn.scale_regularization_loss(md.add_n(model_losses))   # as the tutorial writes it
            return loss

        test_loss = md.keras.metrics.Mean(name="test_loss")
        train_accuracy = md.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
        test_accuracy = md.keras.metrics.SparseCategoricalAccuracy(name="test_accuracy")
        model = create_model()
        optimizer = md.keras.optimizers.Adam(learning_rate=0.001)
        checkpoint = md.train.Checkpoint(optimizer=optimizer, model=model)

    def train_step(inputs):
        images, labels = inputs
        with md.GradientTape() as tape:
            predictions = model(images, training=True)
            loss = compute_loss(labels, predictions, model.losses)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        train_accuracy.update_state(labels, predictions)
        return loss

    def test_step(inputs):
        images, labels = inputs
        predictions = model(images, training=False)
        test_loss.update_state(loss_object(labels, predictions))
        test_accuracy.update_state(labels, predictions)

    @md.function
    def distributed_train_step(dataset_inputs):
        per_replica_losses = strategy.run(train_step, args=(dataset_inputs,))
        return strategy.reduce(md.distribute.ReduceOp.SUM, per_replica_losses, axis=None)

    @md.function
    def distributed_test_step(dataset_inputs):
        return strategy.run(test_step, args=(dataset_inputs,))

    print(f"Regularization losses per replica: {len(model.losses)}")
    for epoch in range(args.epochs):
        total_loss, num_batches = 0.0, 0
        for x in train_dist_dataset:
            total_loss += distributed_train_step(x)   # as printed: a value, no graph kept
            num_batches += 1
        train_loss = total_loss / num_batches
        for x in test_dist_dataset:
            distributed_test_step(x)
        if epoch % 2 == 0 or epoch == args.epochs - 1:
            checkpoint.save(checkpoint_prefix)
        print(f"Epoch {epoch + 1}, Loss: {train_loss:.6f}, Accuracy: {float(train_accuracy.result()) * 100:.4f}, "
              f"Test Loss: {float(test_loss.result()):.6f}, Test Accuracy: {float(test_accuracy.result()) * 100:.4f}")
        test_loss.reset_states()
        train_accuracy.reset_states()
        test_accuracy.reset_states()

    # Restore the latest checkpoint into a new model, without a strategy, and evaluate it.
    eval_accuracy = md.keras.metrics.SparseCategoricalAccuracy(name="eval_accuracy")
    new_model = create_model()
    new_optimizer = md.keras.optimizers.Adam()
    plain_test_dataset = md.data.Dataset.from_tensor_slices((test_images, test_labels)).batch(global_batch_size)

    @md.function
    def eval_step(images, labels):
        eval_accuracy(labels, new_model(images, training=False))

    latest = md.train.latest_checkpoint(checkpoint_dir)
    print(f"Latest checkpoint: {os.path.basename(latest)}")
    md.train.Checkpoint(optimizer=new_optimizer, model=new_model).restore(latest)
    for images, labels in plain_test_dataset:
        eval_step(images, labels)
    print(f"Accuracy after restoring the saved model without strategy: {float(eval_accuracy.result()) * 100:.4f}")

    # Alternate ways of iterating over a dataset: an explicit iterator, 4 steps at a time.
    for _ in range(2):
        total_loss, num_batches = 0.0, 0
        train_iter = iter(train_dist_dataset)
        for _ in range(4):
            total_loss += distributed_train_step(next(train_iter))
            num_batches += 1
        print(f"Iterator: Loss: {total_loss / num_batches:.6f}, Accuracy: {float(train_accuracy.result()) * 100:.4f}")
        train_accuracy.reset_states()

    # Iterating inside a function: the whole epoch in one md.function.
    @md.function
    def distributed_train_epoch(dataset):
        total, batches = 0.0, 0   # TF traces this loop into one graph; multidev runs it eagerly
        for x in dataset:
            per_replica_losses = strategy.run(train_step, args=(x,))
            total += strategy.reduce(md.distribute.ReduceOp.SUM, per_replica_losses, axis=None)
            batches += 1
        return total / batches

    for epoch in range(1):
        train_loss = distributed_train_epoch(train_dist_dataset)
        print(f"Epoch in a function: Loss: {train_loss.item():.6f}, Accuracy: {float(train_accuracy.result()) * 100:.4f}")
        train_accuracy.reset_states()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
