"""keras.io/examples/keras_recipes/reproducibility_recipes as printed (``tf.config`` -> ``md.config``, ``tf.data`` ->
``md.data``, the map's ``tf.cast``/``tf.expand_dims``/``tf.image.resize`` -> ``keras.ops``): ``keras.utils.
set_random_seed(812)`` and ``enable_op_determinism()``; each initializer called twice with ``seed=42``; two
``GlorotNormal(seed=42)`` objects equal, two unseeded ones not; a convnet with three ``Dropout(0.2)`` compiled with
``jit_compile=False`` and fit on ``Dataset.shuffle(buffer_size=len(...)).batch(64).map(prepare_dataset,
num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)``, then the "restarted kernel": the same seed, the same pipeline,
the same training, whose history must equal the first one's (the program raises if not: the test's "runs").

MNIST is made up: 128 training and 32 test 12x12 images (resized to 16x16; 32x32 printed). Shrunk: 8 filters (32),
Dense 16 (64), batch 32 (64), 2 epochs.
"""

import numpy as np
import torch

import multidev as md

SOURCE = "https://keras.io/examples/keras_recipes/reproducibility_recipes/"
SIDE, RESIZED = 12, 16


def digits(rng, n):
    labels = rng.randint(0, 10, n)
    images = rng.randint(0, 60, (n, SIDE, SIDE)).astype("uint8")
    images[np.arange(n), labels, :] = 255
    return images, labels.astype("int64")


def run(keras, strategy, workdir, scale=1):
    determinism = torch.are_deterministic_algorithms_enabled()
    try:
        return _run(keras, strategy, scale)
    finally:   # the harness runs every program in one interpreter: the next ones as they were
        torch.use_deterministic_algorithms(determinism)


def _run(keras, strategy, scale):
    layers, initializers, ops = keras.layers, keras.initializers, keras.ops
    rng = np.random.RandomState(0)
    (train_images, train_labels), (test_images, test_labels) = digits(rng, 128 * scale), digits(rng, 32)

    def start():   # the top of the notebook, run again after the "kernel restart"
        keras.utils.set_random_seed(812)
        md.config.experimental.enable_op_determinism()

    def initializer_cells():
        initializers_list = [initializers.RandomNormal, initializers.RandomUniform, initializers.TruncatedNormal,
                             initializers.VarianceScaling, initializers.GlorotNormal, initializers.GlorotUniform,
                             initializers.HeNormal, initializers.HeUniform, initializers.LecunNormal,
                             initializers.LecunUniform, initializers.Orthogonal]
        seeded = [[float(initializer(seed=42)(shape=(1, 1))) for _ in range(2)] for initializer in initializers_list]
        result_1 = initializers.GlorotNormal(seed=42)(shape=(3, 5))
        result_2 = initializers.GlorotNormal(seed=42)(shape=(3, 5))
        result_3 = initializers.GlorotNormal()(shape=(3, 5))
        result_4 = initializers.GlorotNormal()(shape=(3, 5))
        return seeded, float(np.allclose(result_1, result_2)), float(np.allclose(result_3, result_4))

    def train_model(train_data, test_data):
        with strategy.scope():
            model = keras.Sequential([
                layers.Conv2D(8, (3, 3), activation="relu"), layers.MaxPooling2D((2, 2)), layers.Dropout(0.2),
                layers.Conv2D(8, (3, 3), activation="relu"), layers.MaxPooling2D((2, 2)), layers.Dropout(0.2),
                layers.Conv2D(8, (1, 1), activation="relu"), layers.GlobalAveragePooling2D(),
                layers.Dense(16, activation="relu"), layers.Dropout(0.2), layers.Dense(10, activation="softmax"),
            ])
            model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                          jit_compile=False)
        history = model.fit(train_data, epochs=2, validation_data=test_data, verbose=0)
        return history.history, model.evaluate(test_data, verbose=0)[1], model

    def prepare_dataset(image, label):
        image = ops.cast(image, "float32") / 255.0
        image = ops.expand_dims(image, axis=-1)
        image = ops.image.resize(image, (RESIZED, RESIZED))
        return image, label

    def pipelines():
        train_ds = md.data.Dataset.from_tensor_slices((train_images, train_labels))
        test_ds = md.data.Dataset.from_tensor_slices((test_images, test_labels))
        train_data = (train_ds.shuffle(buffer_size=len(train_images)).batch(batch_size=32)
                      .map(prepare_dataset, num_parallel_calls=md.data.AUTOTUNE).prefetch(buffer_size=md.data.AUTOTUNE))
        test_data = (test_ds.batch(batch_size=32).map(prepare_dataset, num_parallel_calls=md.data.AUTOTUNE)
                     .prefetch(buffer_size=md.data.AUTOTUNE))
        return train_data, test_data

    def notebook():   # every cell, from the top, but the one that writes history.json
        start()
        cells = initializer_cells()
        return (*cells, *train_model(*pipelines()))

    seeded, seeded_equal, unseeded_equal, history, accuracy, _ = notebook()
    _, _, _, history_loaded, accuracy_loaded, model = notebook()   # "restart the kernel", run it again
    not_equal = [key for key in history for i in range(len(history[key]))
                 if not np.allclose(history[key][i], history_loaded[key][i])]
    if not_equal or accuracy != accuracy_loaded:   # the recipe prints "{key} not equal": every mode must reproduce
        raise AssertionError(f"the seeded notebook did not reproduce its run: {not_equal} not equal")
    return {"_model": model, "seeded": seeded, "history": history, "accuracy": accuracy,
            "history_loaded": history_loaded, "accuracy_loaded": accuracy_loaded,
            "seeded_objects_equal": seeded_equal, "unseeded_objects_equal": unseeded_equal}
