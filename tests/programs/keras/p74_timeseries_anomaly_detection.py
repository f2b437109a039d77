"""keras.io/examples/timeseries/timeseries_anomaly_detection as printed (Keras 3): a Conv1D autoencoder
(``Conv1D(strides=2)``, ``Dropout``, ``Conv1DTranspose(strides=2, padding="same")``) fit on windows of a
normalised series with ``validation_split=0.1`` and ``EarlyStopping(monitor="val_loss", patience=5, mode="min")``;
the threshold is the largest training MAE of ``model.predict``; test windows whose MAE passes it are anomalies.

The example's pandas frames (the NAB "art_daily" CSVs) are numpy series made here: a daily-like sine with noise
for training, the same with a spike for test. Shrunk: 32 time steps (288), 400 points (4032), filters 8/4 (32/16),
batch 32 (128), 4 epochs (50).
"""

import numpy as np

SOURCE = "https://keras.io/examples/timeseries/timeseries_anomaly_detection/"
TIME_STEPS = 32


def create_sequences(values, time_steps=TIME_STEPS):
    output = []
    for i in range(len(values) - time_steps + 1):
        output.append(values[i : (i + time_steps)])
    return np.stack(output)


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    rng = np.random.RandomState(0)
    n = 400 * scale
    t = np.arange(n)
    df_small_noise = (np.sin(t * 2 * np.pi / 48) * 20 + 40 + rng.normal(0, 1, n)).reshape(-1, 1)
    df_daily_jumpsup = (np.sin(t * 2 * np.pi / 48) * 20 + 40 + rng.normal(0, 1, n)).reshape(-1, 1)
    df_daily_jumpsup[200:212] += 60
    training_mean = df_small_noise.mean()
    training_std = df_small_noise.std()
    df_training_value = (df_small_noise - training_mean) / training_std
    x_train = create_sequences(df_training_value).astype("float32")

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([
            layers.Input(shape=(x_train.shape[1], x_train.shape[2])),
            layers.Conv1D(filters=8, kernel_size=7, padding="same", strides=2, activation="relu"),
            layers.Dropout(rate=0.2),
            layers.Conv1D(filters=4, kernel_size=7, padding="same", strides=2, activation="relu"),
            layers.Conv1DTranspose(filters=4, kernel_size=7, padding="same", strides=2, activation="relu"),
            layers.Dropout(rate=0.2),
            layers.Conv1DTranspose(filters=8, kernel_size=7, padding="same", strides=2, activation="relu"),
            layers.Conv1DTranspose(filters=1, kernel_size=7, padding="same"),
        ])
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")
    history = model.fit(x_train, x_train, epochs=4, batch_size=32, validation_split=0.1,
                        callbacks=[keras.callbacks.EarlyStopping(monitor="val_loss", patience=5, mode="min")],
                        verbose=0)
    x_train_pred = model.predict(x_train, verbose=0)
    train_mae_loss = np.mean(np.abs(x_train_pred - x_train), axis=1)
    threshold = np.max(train_mae_loss)

    df_test_value = (df_daily_jumpsup - training_mean) / training_std
    x_test = create_sequences(df_test_value).astype("float32")
    x_test_pred = model.predict(x_test, verbose=0)
    test_mae_loss = np.mean(np.abs(x_test_pred - x_test), axis=1)
    test_mae_loss = test_mae_loss.reshape((-1))
    anomalies = test_mae_loss > threshold
    return {"_model": model, "history": history.history, "threshold": threshold,
            "test_mae": test_mae_loss, "anomalies": np.sum(anomalies)}
