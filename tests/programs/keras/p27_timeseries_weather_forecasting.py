"""keras.io/examples/timeseries/timeseries_weather_forecasting: features normalized with the training split's
mean and standard deviation, windows of the past made by ``keras.utils.timeseries_dataset_from_array``
(``sampling_rate=step``, the target ``future`` steps after each window), an ``LSTM(32)`` -> ``Dense(1)``
regression trained with ``fit(dataset_train, validation_data=dataset_val)`` under ``EarlyStopping(monitor="val_loss",
patience=5)`` and ``ModelCheckpoint(save_weights_only=True, save_best_only=True)`` into
``model_checkpoint.weights.h5``; then ``predict`` on batches taken from the validation dataset. Added: the
best weights restored with ``model.load_weights(path_checkpoint)`` before predicting (the example leaves the
checkpoint unused).

Shrunk: a synthetic 7-feature hourly "Jena climate" series (daily cycles and noise, 640 steps, not the
downloaded CSV), step 2, past 24 (12 steps a window), future 6, LSTM(8), batch 32, 3 epochs.
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/timeseries/timeseries_weather_forecasting/"


def _climate(rng, n):
    hours = np.arange(n)[:, None]
    phase = rng.uniform(0, 2 * np.pi, (1, 7))
    return (np.sin(2 * np.pi * hours / 24 + phase) * rng.uniform(1, 5, (1, 7)) + rng.normal(0, 0.3, (n, 7))
            + rng.uniform(-10, 10, (1, 7))).astype("float32")


def normalize(data, train_split):
    data_mean = data[:train_split].mean(axis=0)
    data_std = data[:train_split].std(axis=0)
    return (data - data_mean) / data_std


def run(keras, strategy, workdir, scale=1):
    rng = np.random.RandomState(0)
    features = normalize(_climate(rng, 640 * scale), int(0.715 * 640 * scale))
    split_fraction, step, past, future, batch_size, epochs = 0.715, 2, 24, 6, 32, 3
    train_split = int(split_fraction * len(features))
    train_data, val_data = features[:train_split], features[train_split:]

    start = past + future
    end = start + train_split
    x_train = train_data[:, :7]
    y_train = features[start:end][:, [1]]
    sequence_length = int(past / step)
    dataset_train = keras.utils.timeseries_dataset_from_array(
        x_train, y_train, sequence_length=sequence_length, sampling_rate=step, batch_size=batch_size)

    x_end = len(val_data) - past - future
    label_start = train_split + past + future
    x_val = val_data[:x_end, :7]
    y_val = features[label_start:][:, [1]]
    dataset_val = keras.utils.timeseries_dataset_from_array(
        x_val, y_val, sequence_length=sequence_length, sampling_rate=step, batch_size=batch_size)

    for batch in dataset_train.take(1):
        inputs, targets = batch
    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.layers.Input(shape=(inputs.shape[1], inputs.shape[2]))
        lstm_out = keras.layers.LSTM(8)(inputs)
        outputs = keras.layers.Dense(1)(lstm_out)
        model = keras.Model(inputs=inputs, outputs=outputs)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")

    path_checkpoint = os.path.join(workdir, "model_checkpoint.weights.h5")
    es_callback = keras.callbacks.EarlyStopping(monitor="val_loss", min_delta=0, patience=5)
    modelckpt_callback = keras.callbacks.ModelCheckpoint(monitor="val_loss", filepath=path_checkpoint, verbose=0,
                                                         save_weights_only=True, save_best_only=True)
    history = model.fit(dataset_train, epochs=epochs, validation_data=dataset_val,
                        callbacks=[es_callback, modelckpt_callback], verbose=0)
    model.load_weights(path_checkpoint)
    predictions = [model.predict(x, verbose=0)[0] for x, y in dataset_val.take(2)]
    return {"_model": model, "history": history.history, "predictions": predictions,
            "val_targets": [np.asarray(y[0]) for x, y in dataset_val.take(2)]}
