"""TensorFlow's "Custom training loop with Keras and MultiWorkerMirroredStrategy" tutorial, ported.

A custom loop under ``MultiWorkerMirroredStrategy``: ``distribute_datasets_from_function`` (each
worker reads its own shard), an L2-regularized CNN trained with ``RMSprop``, the loss averaged over
the global batch, and fault tolerance with ``md.train.CheckpointManager``: the epoch and the step
within it are checkpointed with the model, only the chief writes the real checkpoint (the others
write to temporary directories they delete), and a restarted job resumes where it stopped.

    multidev launch --workers 2 examples/tutorials/multi_worker_custom_loop.py --workdir /tmp/mwcl
    multidev launch --workers 2 examples/tutorials/multi_worker_custom_loop.py --workdir /tmp/mwcl --epochs 3

(the second run resumes after the first one's last epoch).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile

import numpy as np

import _common
import multidev as md


def mnist_dataset():
    (x_train, y_train), _ = _common.load_images("mnist", 512, 0)
    return md.data.Dataset.from_tensor_slices((x_train[..., 0], y_train)).shuffle(512, seed=0)


def dataset_fn(global_batch_size, input_context):
    batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    dataset = mnist_dataset()
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return dataset.repeat().batch(batch_size)   # repeat: the tutorial's 70 steps fit in one pass of 60000


def build_cnn_model():
    regularizer = md.keras.regularizers.L2(1e-5)
    layers = md.keras.layers
    return md.keras.Sequential([
        layers.InputLayer(input_shape=(28, 28)),
        layers.Reshape(target_shape=(28, 28, 1)),
        layers.Conv2D(8, 3, activation="relu", kernel_regularizer=regularizer),
        layers.Flatten(),
        layers.Dense(32, activation="relu", kernel_regularizer=regularizer),
        layers.Dense(10, kernel_regularizer=regularizer),
    ])


def _is_chief(task_type, task_id, cluster_spec):
    return (task_type is None or task_type == "chief"
            or (task_type == "worker" and task_id == 0 and "chief" not in cluster_spec.as_dict()))


def _get_temp_dir(dirpath, task_id):
    temp_dir = os.path.join(dirpath, "workertemp_" + str(task_id))
    os.makedirs(temp_dir, exist_ok=True)
    return temp_dir


def write_filepath(filepath, task_type, task_id, cluster_spec):
    dirpath, base = os.path.dirname(filepath), os.path.basename(filepath)
    if not _is_chief(task_type, task_id, cluster_spec):
        dirpath = _get_temp_dir(dirpath, task_id)
    return os.path.join(dirpath, base)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None, help="shared by the workers (default: a new temporary dir)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6, help="steps per epoch (the tutorial's 70, made short)")
    args = parser.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="multi_worker_custom_loop_")
    md.random.set_seed(0)

    tf_config = json.loads(os.environ.get("TF_CONFIG", '{"cluster": {"worker": ["localhost:0"]}}'))
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    per_worker_batch_size = 32
    num_workers = len(tf_config["cluster"]["worker"])
    global_batch_size = per_worker_batch_size * num_workers

    with strategy.scope():
        multi_worker_dataset = strategy.distribute_datasets_from_function(
            lambda input_context: dataset_fn(global_batch_size, input_context))
        multi_worker_model = build_cnn_model()
        optimizer = md.keras.optimizers.RMSprop(learning_rate=0.001)
        train_accuracy = md.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
    loss_object = md.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=md.keras.losses.Reduction.NONE)

    @md.function
    def train_step(iterator):
        """Training step function."""

        def step_fn(inputs):
            x, y = inputs
            with md.GradientTape() as tape:
                predictions = multi_worker_model(x, training=True)
                loss = md.nn.compute_average_loss(loss_object(y, predictions))
                model_losses = multi_worker_model.losses
                if model_losses:
                    loss = loss + md.nn.scale_regularization_loss(md.add_n(model_losses))
            grads = tape.gradient(loss, multi_worker_model.trainable_variables)
            optimizer.apply_gradients(zip(grads, multi_worker_model.trainable_variables))
            train_accuracy.update_state(y, predictions)
            return loss

        per_replica_losses = strategy.run(step_fn, args=(next(iterator),))
        return strategy.reduce(md.distribute.ReduceOp.SUM, per_replica_losses, axis=None)

    checkpoint_dir = os.path.join(workdir, "ckpt")
    epoch = md.Variable(initial_value=md.constant(0, dtype=md.int64), name="epoch")
    step_in_epoch = md.Variable(initial_value=md.constant(0, dtype=md.int64), name="step_in_epoch")
    task_type, task_id = strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id
    cluster_spec = md.train.ClusterSpec(tf_config["cluster"])
    print(f"task {task_type}:{task_id}, chief: {_is_chief(task_type, task_id, cluster_spec)}, "
          f"{strategy.num_replicas_in_sync} replicas in sync")

    checkpoint = md.train.Checkpoint(model=multi_worker_model, epoch=epoch, step_in_epoch=step_in_epoch)
    write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id, cluster_spec)
    checkpoint_manager = md.train.CheckpointManager(checkpoint, directory=write_checkpoint_dir, max_to_keep=1)

    latest_checkpoint = md.train.latest_checkpoint(checkpoint_dir)
    if latest_checkpoint:
        checkpoint.restore(latest_checkpoint)
        print(f"Restored {os.path.basename(latest_checkpoint)}: epoch {int(epoch.numpy())}, "
              f"step_in_epoch {int(step_in_epoch.numpy())}")

    num_epochs, num_steps_per_epoch = args.epochs, args.steps
    while epoch.numpy() < num_epochs:
        iterator = iter(multi_worker_dataset)
        total_loss, num_batches = 0.0, 0
        while step_in_epoch.numpy() < num_steps_per_epoch:
            total_loss += train_step(iterator).item()
            num_batches += 1
            step_in_epoch.assign_add(1)
        if num_batches:    # 0 when the restored checkpoint was saved at the end of this epoch
            print("Epoch: %d, accuracy: %f, train_loss: %f." % (epoch.numpy(), train_accuracy.result(),
                                                                total_loss / num_batches))
        train_accuracy.reset_states()
        checkpoint_manager.save()
        if not _is_chief(task_type, task_id, cluster_spec):
            shutil.rmtree(write_checkpoint_dir)
        epoch.assign_add(1)
        step_in_epoch.assign(0)

    checksum = sum(float(np.abs(w).sum()) for w in multi_worker_model.get_weights())
    print(f"Done at epoch {int(epoch.numpy())}; weights checksum {checksum:.6f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
