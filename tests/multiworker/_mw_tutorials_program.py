"""TF's two multi-worker tutorials as printed, for ``tf`` = TensorFlow or multidev, run as one worker of a job.

``python _mw_tutorials_program.py tf|md OUT_DIR`` in each worker process (TF_CONFIG set: by
``record_mw_tutorials.py`` for TensorFlow 2.21, by ``multidev launch --workers 2`` for multidev) writes
``OUT_DIR/worker<i>.json``: what each worker saw and computed, for ``test_mw_tutorials_vs_tf.py``.

Differences from the printed tutorials, the same on both sides so that both see identical batches:
MNIST is replaced by seeded synthetic 28x28 images, ``shuffle`` is left out (a fixed order), the
initial weights are drawn from a seeded numpy generator and set with ``set_weights`` (the "file both
sides share"), epochs/steps are short. Everything else is typed as printed, ``tf.`` -> ``md.``.
Sections: (1) "Multi-worker training with Keras": ``fit`` of ``build_and_compile_cnn_model`` on the
auto-sharded ``mnist_dataset``; (2) which example ids each worker's batches hold under AUTO (the
fit's default) and OFF (the tutorial's "Dataset sharding" section); (3) "Custom training loop with
Keras and MultiWorkerMirroredStrategy": ``train_step`` with ``strategy.run``, per-epoch accuracy and
loss, the ``epoch``/``step_in_epoch`` variables, the chief-only checkpoint via ``write_filepath``.
"""

import json
import os
import sys

import numpy as np

if sys.argv[1] == "tf":
    import tensorflow as tf
else:
    import multidev as tf

OUT = sys.argv[2]
N_FIT, N_CTL = 256, 384          # examples: the fit repeats; the custom loop reads 3 batches per worker
EPOCHS, STEPS_FIT, STEPS_CTL = 2, 5, 3


def synthetic_mnist(n):
    """28x28 images in [0, 1) (the tutorial's x / 255) and int64 labels a linear map of them decides."""
    rng = np.random.RandomState(7)
    x = rng.rand(n, 28, 28).astype(np.float32)
    proj = rng.randn(28 * 28, 10).astype(np.float32)
    y = np.argmax((x.reshape(n, -1) - 0.5) @ proj, axis=1).astype(np.int64)
    return x, y


def shared_weights(model, seed):
    """Uniform initial weights from a fixed seed, the same in every worker and on both sides."""
    rng = np.random.RandomState(seed)
    ws = []
    for w in model.get_weights():
        shape = np.shape(w)
        fan = np.prod(shape[:-1]) + shape[-1] if len(shape) > 1 else 1
        ws.append(rng.uniform(-1, 1, shape).astype(np.float32) * np.float32(np.sqrt(6.0 / fan) if len(shape) > 1
                                                                              else 0.05))
    model.set_weights(ws)


def fingerprint(model):
    ws = [np.asarray(w, np.float64) for w in model.get_weights()]
    return [float(sum(w.sum() for w in ws)), float(sum((w * w).sum() for w in ws))]


# ---- (1) Multi-worker training with Keras (mnist_setup.py) -------------------------------------------------

def mnist_dataset(batch_size):
    x_train, y_train = synthetic_mnist(N_FIT)
    train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).repeat().batch(batch_size)
    return train_dataset


def build_and_compile_cnn_model():
    model = tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=(28, 28)),
        tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
        tf.keras.layers.Conv2D(32, 3, activation='relu'),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation='relu'),
        tf.keras.layers.Dense(10)
    ])
    model.compile(
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=tf.keras.optimizers.SGD(learning_rate=0.001),
        metrics=['accuracy'])
    return model


def keras_section(strategy, num_workers):
    per_worker_batch_size = 64
    global_batch_size = per_worker_batch_size * num_workers
    multi_worker_dataset = mnist_dataset(global_batch_size)
    with strategy.scope():
        multi_worker_model = build_and_compile_cnn_model()
        shared_weights(multi_worker_model, 1)
    history = multi_worker_model.fit(multi_worker_dataset, epochs=EPOCHS, steps_per_epoch=STEPS_FIT, verbose=0)
    return {"history": {k: [float(v) for v in vs] for k, vs in sorted(history.history.items())},
            "weights": fingerprint(multi_worker_model)}


def no_auto_shard_fit(strategy, num_workers):
    """``fit`` on the tutorial's ``dataset_no_auto_shard`` (OFF: every worker reads the whole dataset)."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    multi_worker_dataset = mnist_dataset(batch_size=64 * num_workers)
    dataset_no_auto_shard = multi_worker_dataset.with_options(options)
    with strategy.scope():
        multi_worker_model = build_and_compile_cnn_model()
        shared_weights(multi_worker_model, 1)
    history = multi_worker_model.fit(dataset_no_auto_shard, epochs=1, steps_per_epoch=3, verbose=0)
    return {"history": {k: [float(v) for v in vs] for k, vs in sorted(history.history.items())},
            "weights": fingerprint(multi_worker_model)}


# ---- (1b) Fault tolerance with BackupAndRestore (the Keras tutorial's last section) -------------------------

class Interrupted(Exception):
    """Stands for the tutorial's killed worker: every worker stops after the same global batch."""


class Interrupt(tf.keras.callbacks.Callback):
    def __init__(self, after_batches):
        super().__init__()
        self.after, self.seen = after_batches, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.after:
            raise Interrupted(f"stopped after {self.seen} batches")


def backup_section(strategy, num_workers, save_freq):
    """``fit`` stopped after batch 7 (epoch 1, step 2), then a new model's ``fit`` resumes from the backup."""
    global_batch_size = 64 * num_workers
    multi_worker_dataset = mnist_dataset(global_batch_size)
    backup_dir = os.path.join(OUT, f'backup_{save_freq}')
    with strategy.scope():
        multi_worker_model = build_and_compile_cnn_model()
        shared_weights(multi_worker_model, 3)
    callbacks = [tf.keras.callbacks.BackupAndRestore(backup_dir=backup_dir, save_freq=save_freq), Interrupt(7)]
    try:
        multi_worker_model.fit(multi_worker_dataset, epochs=3, steps_per_epoch=STEPS_FIT, callbacks=callbacks,
                               verbose=0)
    except Interrupted:
        pass
    with strategy.scope():
        multi_worker_model = build_and_compile_cnn_model()
        shared_weights(multi_worker_model, 4)
    callbacks = [tf.keras.callbacks.BackupAndRestore(backup_dir=backup_dir, save_freq=save_freq)]
    history = multi_worker_model.fit(multi_worker_dataset, epochs=3, steps_per_epoch=STEPS_FIT,
                                     callbacks=callbacks, verbose=0)
    return {"history": {k: [float(v) for v in vs] for k, vs in sorted(history.history.items())},
            "weights": fingerprint(multi_worker_model), "iterations": int(multi_worker_model.optimizer.iterations.numpy())}


# ---- (2) Dataset sharding: which examples each worker reads -------------------------------------------------

def shard_section(strategy, num_workers):
    """Example ids in this worker's first 3 batches, for the fit's default (AUTO) and the tutorial's OFF."""
    ids = tf.data.Dataset.from_tensor_slices(np.arange(N_FIT, dtype=np.int64)).repeat().batch(8 * num_workers)
    return {name: first_batches(strategy, with_policy(ids, name)) for name in ("AUTO", "OFF", "DATA")}


def with_policy(dataset, name):
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, name)
    return dataset if name == "AUTO" else dataset.with_options(options)


def first_batches(strategy, dataset):
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    batches = []
    for _ in range(3):
        local = strategy.experimental_local_results(next(iterator))
        batches.append([np.asarray(v).tolist() for v in local])
    return batches


def file_policy_probe(strategy):
    """FILE sharding of an in-memory dataset: TF refuses it (no file reader to shard); the error's type."""
    ids = tf.data.Dataset.from_tensor_slices(np.arange(N_FIT, dtype=np.int64)).batch(16)
    try:
        return first_batches(strategy, with_policy(ids, "FILE"))
    except Exception as err:   # the type is what is compared
        return type(err).__name__


# ---- (3) Custom training loop with Keras and MultiWorkerMirroredStrategy -----------------------------------

def ctl_mnist_dataset():
    x_train, y_train = synthetic_mnist(N_CTL)
    train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    return train_dataset


def dataset_fn(global_batch_size, input_context):
    batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    dataset = ctl_mnist_dataset()
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    dataset = dataset.batch(batch_size)
    return dataset


def build_cnn_model():
    regularizer = tf.keras.regularizers.L2(1e-5)
    return tf.keras.Sequential([
        tf.keras.Input(shape=(28, 28)),
        tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
        tf.keras.layers.Conv2D(32, 3, activation='relu', kernel_regularizer=regularizer),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation='relu', kernel_regularizer=regularizer),
        tf.keras.layers.Dense(10, kernel_regularizer=regularizer)
    ])


def _is_chief(task_type, task_id, cluster_spec):
    return (task_type is None or task_type == 'chief' or (
        task_type == 'worker' and task_id == 0 and "chief" not in cluster_spec.as_dict()))


def _get_temp_dir(dirpath, task_id):
    base_dirpath = 'workertemp_' + str(task_id)
    temp_dir = os.path.join(dirpath, base_dirpath)
    tf.io.gfile.makedirs(temp_dir)
    return temp_dir


def write_filepath(filepath, task_type, task_id, cluster_spec):
    dirpath = os.path.dirname(filepath)
    base = os.path.basename(filepath)
    if not _is_chief(task_type, task_id, cluster_spec):
        dirpath = _get_temp_dir(dirpath, task_id)
    return os.path.join(dirpath, base)


def none_reduction():
    """``tf.keras.losses.Reduction.NONE`` as printed; Keras 3 (TF 2.21's tf.keras) spells it "none"."""
    reduction = getattr(tf.keras.losses, "Reduction", None)
    return reduction.NONE if reduction is not None else "none"


def ctl_section(strategy, tf_config):
    per_worker_batch_size = 64
    num_workers = len(tf_config['cluster']['worker'])
    global_batch_size = per_worker_batch_size * num_workers
    with strategy.scope():
        multi_worker_dataset = strategy.distribute_datasets_from_function(
            lambda input_context: dataset_fn(global_batch_size, input_context))
        multi_worker_model = build_cnn_model()
        shared_weights(multi_worker_model, 2)
        optimizer = tf.keras.optimizers.RMSprop(learning_rate=0.001)
        train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='train_accuracy')

    @tf.function
    def train_step(iterator):
        """Training step function."""

        def step_fn(inputs):
            """Per-Replica step function."""
            x, y = inputs
            with tf.GradientTape() as tape:
                predictions = multi_worker_model(x, training=True)
                per_example_loss = tf.keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True, reduction=none_reduction())(y, predictions)
                loss = tf.nn.compute_average_loss(per_example_loss)
                model_losses = multi_worker_model.losses
                if model_losses:
                    loss += tf.nn.scale_regularization_loss(tf.add_n(model_losses))
            grads = tape.gradient(loss, multi_worker_model.trainable_variables)
            optimizer.apply_gradients(zip(grads, multi_worker_model.trainable_variables))
            train_accuracy.update_state(y, predictions)
            return loss

        per_replica_losses = strategy.run(step_fn, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)

    checkpoint_dir = os.path.join(OUT, 'ckpt')
    epoch = tf.Variable(initial_value=tf.constant(0, dtype=tf.dtypes.int64), name='epoch')
    step_in_epoch = tf.Variable(initial_value=tf.constant(0, dtype=tf.dtypes.int64), name='step_in_epoch')
    task_type, task_id = (strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id)
    cluster_spec = tf.train.ClusterSpec(tf_config['cluster'])
    checkpoint = tf.train.Checkpoint(model=multi_worker_model, epoch=epoch, step_in_epoch=step_in_epoch)
    write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id, cluster_spec)
    checkpoint_manager = tf.train.CheckpointManager(checkpoint, directory=write_checkpoint_dir, max_to_keep=1)
    latest_checkpoint = tf.train.latest_checkpoint(checkpoint_dir)
    if latest_checkpoint:
        checkpoint.restore(latest_checkpoint)

    epochs = []
    while epoch.numpy() < EPOCHS:
        iterator = iter(multi_worker_dataset)
        total_loss = 0.0
        num_batches = 0
        while step_in_epoch.numpy() < STEPS_CTL:
            total_loss += train_step(iterator)
            num_batches += 1
            step_in_epoch.assign_add(1)
        train_loss = total_loss / num_batches
        print('Epoch: %d, accuracy: %f, train_loss: %f.' % (epoch.numpy(), train_accuracy.result(), train_loss))
        epochs.append([int(epoch.numpy()), float(train_accuracy.result()), float(train_loss)])
        # as printed: train_accuracy.reset_states(); Keras 3 (TF 2.21's tf.keras) only has reset_state
        (train_accuracy.reset_states if hasattr(train_accuracy, "reset_states") else train_accuracy.reset_state)()
        checkpoint_manager.save()
        if not _is_chief(task_type, task_id, cluster_spec):
            tf.io.gfile.rmtree(write_checkpoint_dir)
        epoch.assign_add(1)
        step_in_epoch.assign(0)
    return {"epochs": epochs, "weights": fingerprint(multi_worker_model), "chief": _is_chief(task_type, task_id,
                                                                                             cluster_spec)}


def main():
    tf_config = json.loads(os.environ['TF_CONFIG'])
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    num_workers = len(tf_config['cluster']['worker'])
    result = {"keras": keras_section(strategy, num_workers), "shard": shard_section(strategy, num_workers),
              "ctl": ctl_section(strategy, tf_config)}
    for save_freq in ("epoch", 3):
        result[f"backup_{save_freq}"] = backup_section(strategy, num_workers, save_freq)
    result["keras_no_auto_shard"] = no_auto_shard_fit(strategy, num_workers)
    result["file_policy"] = file_policy_probe(strategy)     # last: an input error must not disturb the rest
    with open(os.path.join(OUT, f"worker{tf_config['task']['index']}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
