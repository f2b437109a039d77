"""TensorFlow's "Distributed training with Keras" tutorial (tutorials/distribute/keras), typed as printed with
``tf.`` -> ``md.``, shrunk, on a MirroredStrategy of two: the ``scale`` map, the global batch from
``num_replicas_in_sync``, the callbacks as printed (``TensorBoard(log_dir='./logs')``, ``ModelCheckpoint`` of
``'./training_checkpoints/ckpt_{epoch}'`` with ``save_weights_only=True``, ``LearningRateScheduler(decay)``,
``PrintLR`` reading ``model.optimizer.learning_rate.numpy()``), ``model.load_weights(
tf.train.latest_checkpoint(checkpoint_dir))`` and ``evaluate``, then the saved model loaded back without a
strategy and in its scope.

The tutorial's checkpoint prefix is tf.keras 2's (Keras 3 refuses a ``save_weights_only`` path without
``.weights.h5``), so the printed program is compared with ``tf_keras`` on TensorFlow (``keras2``); Keras 3's
spelling (``ckpt_{epoch}.weights.h5``) with TF 2.21's ``tf.keras``. Substitutions: MNIST is a fixed table of
32 6x6 images of 4 classes, the model is the tutorial's shape shrunk, ``shuffle`` is left out (TensorFlow's and
multidev's orders differ), 12 epochs of 2 steps; ``print`` lines became observations.
"""

import os

from conformance_support import InTempDirectory, fixed_weights, keras2, rounded, two_cpus

IMAGES = [[[[float((i * 29 + r * 7 + c * 13) % 256)] for c in range(6)] for r in range(6)] for i in range(32)]
LABELS = [(i * 3) % 4 for i in range(32)]
EVAL_IMAGES = IMAGES[1::2]
EVAL_LABELS = LABELS[1::2]


def _listing(directory):
    """A checkpoint directory's files with the data shards' names cut after ``.data`` (TensorFlow writes
    ``ckpt_1.data-00000-of-00001``, multidev ``ckpt_1.data.safetensors``)."""
    return sorted(name.split(".data")[0] + ".data" if ".data" in name else name for name in os.listdir(directory))


def _tensorboard(tf, keras):
    """``keras.callbacks.TensorBoard(log_dir='./logs')``; TensorFlow's venv that records the cases has no
    ``tensorboard`` package (its TensorBoard raises TBNotInstalledError), so there it is a no-op callback and
    what multidev's writes is not compared (tests/examples/test_tutorials.py reads its event file)."""
    if tf.__name__ == "tensorflow":
        return keras.callbacks.Callback()
    return keras.callbacks.TensorBoard(log_dir='./logs')


def _tutorial(tf, keras, checkpoint_name, saved_name, save_kwargs, lr_logged=True):
    strategy = two_cpus(tf)
    printed = ['Number of devices: {}'.format(strategy.num_replicas_in_sync)]
    mnist_train = tf.data.Dataset.from_tensor_slices((tf.constant(IMAGES), tf.constant(LABELS)))
    mnist_test = tf.data.Dataset.from_tensor_slices((tf.constant(EVAL_IMAGES), tf.constant(EVAL_LABELS)))
    BATCH_SIZE_PER_REPLICA = 8
    BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync

    def scale(image, label):
        image = tf.cast(image, tf.float32)
        image /= 255
        return image, label

    train_dataset = mnist_train.map(scale).cache().batch(BATCH_SIZE)
    eval_dataset = mnist_test.map(scale).batch(BATCH_SIZE)

    with strategy.scope():
        model = keras.Sequential([
            keras.layers.Conv2D(2, 3, activation='relu', input_shape=(6, 6, 1)),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(8, activation='relu'),
            keras.layers.Dense(4)
        ])
        fixed_weights(model, 0.5)
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      optimizer=keras.optimizers.Adam(),
                      metrics=['accuracy'])

    # Define the checkpoint directory to store the checkpoints.
    checkpoint_dir = './training_checkpoints'
    # Define the name of the checkpoint files.
    checkpoint_prefix = os.path.join(checkpoint_dir, checkpoint_name)

    # Define a function for decaying the learning rate.
    # You can define any decay function you need.
    def decay(epoch):
        if epoch < 3:
            return 1e-3
        elif epoch >= 3 and epoch < 7:
            return 1e-4
        else:
            return 1e-5

    # Define a callback for printing the learning rate at the end of each epoch.
    class PrintLR(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            printed.append('\nLearning rate for epoch {} is {}'.format(epoch + 1, model.optimizer.learning_rate.numpy()))

    # Put all the callbacks together.
    callbacks = [
        _tensorboard(tf, keras),
        keras.callbacks.ModelCheckpoint(filepath=checkpoint_prefix,
                                        save_weights_only=True),
        keras.callbacks.LearningRateScheduler(decay),
        PrintLR()
    ]
    EPOCHS = 12
    history = model.fit(train_dataset, epochs=EPOCHS, callbacks=callbacks, verbose=0)
    trained = model.evaluate(eval_dataset, verbose=0)
    # the scheduler's rates are logged as "learning_rate" by Keras 3 and multidev, "lr" by tf.keras 2
    logged = {k: v for k, v in history.history.items() if k not in ("lr", "learning_rate")}
    out = {"printed": printed, "history": rounded(logged, 4), "checkpoints": _listing(checkpoint_dir)}
    if "learning_rate" in history.history and lr_logged:
        out["learning_rate"] = rounded(history.history["learning_rate"], 7)
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    out["latest_checkpoint"] = latest if latest is None else os.path.relpath(latest)
    model.load_weights(latest if latest is not None else checkpoint_prefix.format(epoch=EPOCHS))
    eval_loss, eval_acc = model.evaluate(eval_dataset, verbose=0)
    out["eval"] = ['Eval loss: {:.5f}, Eval accuracy: {}'.format(eval_loss, eval_acc), [eval_loss, eval_acc] == trained]

    path = saved_name
    model.save(path, **save_kwargs)
    unreplicated_model = keras.models.load_model(path)
    unreplicated_model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=keras.optimizers.Adam(),
        metrics=['accuracy'])
    eval_loss, eval_acc = unreplicated_model.evaluate(eval_dataset, verbose=0)
    out["unreplicated"] = rounded([eval_loss, eval_acc])
    with strategy.scope():
        replicated_model = keras.models.load_model(path)
        replicated_model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                                 optimizer=keras.optimizers.Adam(),
                                 metrics=['accuracy'])
        eval_loss, eval_acc = replicated_model.evaluate(eval_dataset, verbose=0)
    out["replicated"] = rounded([eval_loss, eval_acc])
    return out


def case_tutorial_as_printed_tf_keras2(tf):
    """The printed program (tf.keras 2's checkpoint prefix, ``model.save(path, save_format='tf')``)."""
    with InTempDirectory():
        return _tutorial(tf, keras2(tf), "ckpt_{epoch}", "saved_model/", {"save_format": "tf"}, False)


def case_tutorial_keras3_spelling(tf):
    """Keras 3's names: ``ckpt_{epoch}.weights.h5`` (``latest_checkpoint`` finds no TF checkpoint in the
    directory: None, and the last epoch's file is loaded) and a ``.keras`` model file."""
    with InTempDirectory():
        return _tutorial(tf, tf.keras, "ckpt_{epoch}.weights.h5", "saved_model.keras", {})


def case_keras3_refuses_the_printed_checkpoint_prefix(tf):
    """Keras 3 refuses the tutorial's ``save_weights_only`` prefix without ``.weights.h5`` at construction."""
    try:
        tf.keras.callbacks.ModelCheckpoint(filepath=os.path.join('./training_checkpoints', "ckpt_{epoch}"),
                                           save_weights_only=True)
    except ValueError:
        return "ValueError"
    return None
