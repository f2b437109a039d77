"""TensorFlow's "Multi-worker training with Keras" tutorial, ported to multidev.

``MultiWorkerMirroredStrategy`` over worker processes started by the launcher, which writes each
one's ``TF_CONFIG`` (Gloo on loopback; no GPU needed):

    multidev launch --workers 2 examples/tutorials/multi_worker_keras.py [--workdir DIR]

Run alone (``python examples/tutorials/multi_worker_keras.py``) it is the tutorial's single-worker
run. Sections: fit on the multi-worker dataset; saving the model with only the chief writing to the
real path (the others to temporary directories, then deleted); a ``CheckpointManager`` restore; and
``BackupAndRestore`` for fault tolerance.
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


def mnist_dataset(batch_size):
    """The tutorial's ``mnist_setup.mnist_dataset``: shuffled, repeated, batched (images 28x28)."""
    (x_train, y_train), _ = _common.load_images("mnist", 512, 0)
    return md.data.Dataset.from_tensor_slices((x_train[..., 0], y_train)).shuffle(512, seed=0).repeat().batch(
        batch_size)


def build_and_compile_cnn_model():
    """The tutorial's model, smaller; SGD's rate raised from 0.001 so that a short run moves."""
    layers = md.keras.layers
    model = md.keras.Sequential([
        layers.InputLayer(input_shape=(28, 28)),
        layers.Reshape(target_shape=(28, 28, 1)),
        layers.Conv2D(8, 3, activation="relu"),
        layers.Flatten(),
        layers.Dense(32, activation="relu"),
        layers.Dense(10),
    ])
    model.compile(loss=md.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=md.keras.optimizers.SGD(learning_rate=0.05), metrics=["accuracy"])
    return model


def _is_chief(task_type, task_id):
    # With no chief task in the cluster, worker 0 is the chief (no TF_CONFIG: a single worker).
    return task_type is None or task_type == "chief" or (task_type == "worker" and task_id == 0)


def _get_temp_dir(dirpath, task_id):
    temp_dir = os.path.join(dirpath, "workertemp_" + str(task_id))
    os.makedirs(temp_dir, exist_ok=True)
    return temp_dir


def write_filepath(filepath, task_type, task_id):
    """Where this worker writes: ``filepath`` on the chief, a per-worker temporary directory elsewhere."""
    dirpath, base = os.path.dirname(filepath), os.path.basename(filepath)
    if not _is_chief(task_type, task_id):
        dirpath = _get_temp_dir(dirpath, task_id)
    return os.path.join(dirpath, base)


def barrier(strategy):
    """Every worker waits for the others (an all-reduce): readers wait until the chief has written."""
    def replica_fn():
        return md.distribute.get_replica_context().all_reduce(md.distribute.ReduceOp.SUM, md.constant(1.0))

    strategy.run(replica_fn)


def weights_checksum(model) -> str:
    return f"{sum(float(np.abs(w).sum()) for w in model.get_weights()):.6f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None, help="shared by the workers (default: /tmp/multi_worker_keras)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8, help="steps_per_epoch (the tutorial's 70, made short)")
    args = parser.parse_args(argv)
    workdir = args.workdir or os.path.join(tempfile.gettempdir(), "multi_worker_keras")
    md.random.set_seed(0)

    per_worker_batch_size = 32
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    num_workers = len(tf_config.get("cluster", {}).get("worker", [])) or 1
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    task_type, task_id = strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id
    print(f"task {task_type}:{task_id} of {num_workers} workers; {strategy.num_replicas_in_sync} replicas in sync")

    global_batch_size = per_worker_batch_size * num_workers
    multi_worker_dataset = mnist_dataset(global_batch_size)
    with strategy.scope():
        multi_worker_model = build_and_compile_cnn_model()
    history = multi_worker_model.fit(multi_worker_dataset, epochs=args.epochs, steps_per_epoch=args.steps, verbose=2)
    print("Training losses:", " ".join(f"{v:.4f}" for v in history.history["loss"]))
    print("Weights checksum after fit:", weights_checksum(multi_worker_model))

    # -- Model saving and loading: every worker saves (the save may need them all), only the chief's is kept.
    model_path = os.path.join(workdir, "keras-model.keras")
    write_model_path = write_filepath(model_path, task_type, task_id)
    multi_worker_model.save(write_model_path)
    if not _is_chief(task_type, task_id):
        shutil.rmtree(os.path.dirname(write_model_path))
    barrier(strategy)
    loaded_model = md.keras.models.load_model(model_path)
    print("Loaded model checksum:", weights_checksum(loaded_model))
    loaded_model.fit(mnist_dataset(per_worker_batch_size), epochs=1, steps_per_epoch=4, verbose=0)
    print("Loaded model trained on alone")

    # -- Checkpoint saving and restoring.
    checkpoint_dir = os.path.join(workdir, "ckpt")
    checkpoint = md.train.Checkpoint(model=multi_worker_model)
    write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id)
    checkpoint_manager = md.train.CheckpointManager(checkpoint, directory=write_checkpoint_dir, max_to_keep=1)
    checkpoint_manager.save()
    if not _is_chief(task_type, task_id):
        shutil.rmtree(write_checkpoint_dir)
    barrier(strategy)
    print("Checkpoint dir holds:", sorted(os.listdir(checkpoint_dir)))
    latest_checkpoint = md.train.latest_checkpoint(checkpoint_dir)
    checkpoint.restore(latest_checkpoint)
    print(f"Restored {os.path.basename(latest_checkpoint)}; checksum:", weights_checksum(multi_worker_model))
    multi_worker_model.fit(multi_worker_dataset, epochs=1, steps_per_epoch=4, verbose=0)

    # -- BackupAndRestore: resumes an interrupted fit from its last epoch; deleted when fit completes.
    backup_dir = os.path.join(workdir, "backup")
    callbacks = [md.keras.callbacks.BackupAndRestore(backup_dir=backup_dir)]
    with strategy.scope():
        multi_worker_model = build_and_compile_cnn_model()
    history = multi_worker_model.fit(multi_worker_dataset, epochs=args.epochs, steps_per_epoch=args.steps,
                                     callbacks=callbacks, verbose=0)
    barrier(strategy)
    print("BackupAndRestore fit losses:", " ".join(f"{v:.4f}" for v in history.history["loss"]),
          "; backup left:", os.path.exists(backup_dir) and bool(os.listdir(backup_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
