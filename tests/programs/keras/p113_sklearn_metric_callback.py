"""keras.io/examples/keras_recipes/sklearn_metric_callbacks as printed (``tf.summary`` -> ``md.summary``): a
``JaccardScoreCallback(keras.callbacks.Callback)`` whose ``__init__`` does not call ``super().__init__()`` and makes a
``keras.metrics.Mean("jaccard_score")`` (outside the strategy's scope) and a summary file writer; its
``on_epoch_end`` resets the metric, calls ``self.model.predict(self.x_test)`` in the middle of ``fit``, scores the
argmax against the labels per class (sklearn's ``jaccard_score(..., average=None)``), ``update_state``s the Mean with
that vector and writes ``result().numpy()`` with ``md.summary.scalar``. The model is keras.io's MNIST convnet
(Dropout 0.5), ``categorical_crossentropy`` on ``to_categorical`` labels, ``fit(validation_split=0.1)``.

MNIST is made up: 192 training and 32 test 12x12 images of 10 classes (a bright patch where the class says); the jaccard
score is computed with numpy as sklearn defines it (scikit-learn is an optional test dependency). Shrunk: filters
8/16 (32/64), batch 32 (128), 4 epochs (15).
"""

import os

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/keras_recipes/sklearn_metric_callbacks/"
NUM_CLASSES, SIDE = 10, 12


def jaccard_score(y_true, y_pred, average=None):   # sklearn.metrics.jaccard_score(..., average=None)
    labels = np.unique(np.concatenate([y_true, y_pred]))
    scores = []
    for label in labels:
        t, p = y_true == label, y_pred == label
        union = np.sum(t | p)
        scores.append(np.sum(t & p) / union if union else 0.0)
    return np.asarray(scores)


def digits(rng, n):
    labels = rng.randint(0, NUM_CLASSES, n)
    images = rng.randint(0, 40, (n, SIDE, SIDE)).astype("uint8")
    for dy in range(3):   # a bright 3x3 patch on the diagonal, where the class says
        for dx in range(3):
            images[np.arange(n), labels + dy, (labels * 7) % (SIDE - 2) + dx] = 255
    return images, labels


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    rng = np.random.RandomState(0)
    (x_train, y_train), (x_test, y_test) = digits(rng, 192 * scale), digits(rng, 32)

    class JaccardScoreCallback(keras.callbacks.Callback):
        def __init__(self, name, x_test, y_test, log_dir):
            self.x_test = x_test
            self.y_test = y_test
            self.keras_metric = keras.metrics.Mean("jaccard_score")
            self.epoch = 0
            self.summary_writer = md.summary.create_file_writer(os.path.join(log_dir, name))
            self.seen = []

        def on_epoch_end(self, batch, logs=None):
            self.epoch += 1
            self.keras_metric.reset_state()
            predictions = self.model.predict(self.x_test, verbose=0)
            jaccard_value = jaccard_score(np.argmax(predictions, axis=-1), self.y_test, average=None)
            self.keras_metric.update_state(jaccard_value)
            self._write_metric(self.keras_metric.name, self.keras_metric.result().numpy().astype(float))

        def _write_metric(self, name, value):
            self.seen.append(value)
            with self.summary_writer.as_default():
                md.summary.scalar(name, value, step=self.epoch)
                self.summary_writer.flush()

    input_shape = (SIDE, SIDE, 1)
    x_train = np.expand_dims(x_train.astype("float32") / 255, -1)
    x_test = np.expand_dims(x_test.astype("float32") / 255, -1)
    y_train = keras.utils.to_categorical(y_train, NUM_CLASSES)
    y_test = keras.utils.to_categorical(y_test, NUM_CLASSES)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([
            keras.Input(shape=input_shape),
            layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(NUM_CLASSES, activation="softmax"),
        ])
        model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    callback = JaccardScoreCallback(model.name, x_test, np.argmax(y_test, axis=-1), os.path.join(workdir, "logs"))
    history = model.fit(x_train, y_train, batch_size=32, epochs=4, validation_split=0.1, callbacks=[callback],
                        verbose=0)
    written = sorted(os.listdir(os.path.join(workdir, "logs", model.name)))
    return {"_model": model, "history": history.history, "jaccard": callback.seen,
            "summaries_written": float(len(written) > 0)}
