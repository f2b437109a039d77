"""keras.io/examples/vision/mixup, typed with ``tf_data`` -> ``md.data``: two shuffled copies of the training
set zipped, ``map(mix_up)`` mixing each pair of batches with a Beta(0.2, 0.2) draw per example (two gamma
draws, ``keras.random.gamma``: multidev has no ``tf.random.gamma``), a convnet with Dropout,
``save_weights``/``load_weights`` of the initial weights (``.weights.h5``), ``fit`` on the mixed dataset
with ``validation_data``, ``evaluate`` on the test dataset.

The pipeline runs on the host, so the global batch is mixed once and then split across the replicas.
Instrumented: ``md.random.set_seed`` and ``keras.utils.set_random_seed`` first (the shuffles and the
gamma draws repeat run after run), and ``num_parallel_calls=AUTO`` dropped from the ``map``: batches mapped in
parallel draw from the one random stream in thread order, so two one-device runs differ (TensorFlow 2.21's
parallel map of ``tf.random.gamma`` too: 5 of 6 seeded runs gave other numbers). Shrunk: 12x12 images, 128 training, 32 validation and 32 test images,
Conv2D(4)/Conv2D(8), Dense(16), batch 16, 2 epochs.
"""

import os

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/mixup/"
BATCH_SIZE = 16
EPOCHS = 2


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    md.random.set_seed(0)
    keras.utils.set_random_seed(0)
    rng = np.random.RandomState(0)
    x_train = rng.randint(0, 256, (160 * scale, 12, 12)).astype("float32") / 255.0
    x_train = np.reshape(x_train, (-1, 12, 12, 1))
    y_train = np.eye(10, dtype="float32")[rng.randint(0, 10, 160 * scale)]   # keras.ops.one_hot(y_train, 10)
    x_test = (rng.randint(0, 256, (32, 12, 12)).astype("float32") / 255.0).reshape(-1, 12, 12, 1)
    y_test = np.eye(10, dtype="float32")[rng.randint(0, 10, 32)]

    # Put aside a few samples to create our validation set
    val_samples = 32
    x_val, y_val = x_train[:val_samples], y_train[:val_samples]
    new_x_train, new_y_train = x_train[val_samples:], y_train[val_samples:]

    train_ds_one = md.data.Dataset.from_tensor_slices((new_x_train, new_y_train)).shuffle(BATCH_SIZE * 100).batch(
        BATCH_SIZE)
    train_ds_two = md.data.Dataset.from_tensor_slices((new_x_train, new_y_train)).shuffle(BATCH_SIZE * 100).batch(
        BATCH_SIZE)
    # Because we will be mixing up the images and their corresponding labels, we will be
    # combining two shuffled datasets from the same training data.
    train_ds = md.data.Dataset.zip((train_ds_one, train_ds_two))
    val_ds = md.data.Dataset.from_tensor_slices((x_val, y_val)).batch(BATCH_SIZE)
    test_ds = md.data.Dataset.from_tensor_slices((x_test, y_test)).batch(BATCH_SIZE)

    def sample_beta_distribution(size, concentration_0=0.2, concentration_1=0.2):
        gamma_1_sample = keras.random.gamma(shape=[size], alpha=concentration_1)
        gamma_2_sample = keras.random.gamma(shape=[size], alpha=concentration_0)
        return gamma_1_sample / (gamma_1_sample + gamma_2_sample)

    def mix_up(ds_one, ds_two, alpha=0.2):
        # Unpack two datasets
        images_one, labels_one = ds_one
        images_two, labels_two = ds_two
        batch_size = keras.ops.shape(images_one)[0]
        # Sample lambda and reshape it to do the mixup
        l = sample_beta_distribution(batch_size, alpha, alpha)  # noqa: E741 (the example's name)
        x_l = keras.ops.reshape(l, (batch_size, 1, 1, 1))
        y_l = keras.ops.reshape(l, (batch_size, 1))
        # Perform mixup on both images and labels by combining a pair of images/labels
        # (one from each dataset) into one image/label
        images = images_one * x_l + images_two * (1 - x_l)
        labels = labels_one * y_l + labels_two * (1 - y_l)
        return (images, labels)

    # First create the new dataset using our `mix_up` utility
    train_ds_mu = train_ds.map(lambda ds_one, ds_two: mix_up(ds_one, ds_two, alpha=0.2))   # (see above)

    def get_training_model():
        model = keras.Sequential([
            layers.Input(shape=(12, 12, 1)),
            layers.Conv2D(4, (3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Conv2D(8, (3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Dropout(0.2),
            layers.GlobalAveragePooling2D(),
            layers.Dense(16, activation="relu"),
            layers.Dense(10, activation="softmax"),
        ])
        return model

    weights = os.path.join(workdir, "initial_weights.weights.h5")
    with strategy.scope():
        initial_model = get_training_model()
    initial_model.save_weights(weights)
    with strategy.scope():
        model = get_training_model()
        model.load_weights(weights)
        model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    history = model.fit(train_ds_mu, validation_data=val_ds, epochs=EPOCHS, verbose=0)
    _, test_acc = model.evaluate(test_ds, verbose=0)
    return {"_model": model, "history": history.history, "test_acc": test_acc,
            "predict": model.predict(x_test[:4], verbose=0)}
