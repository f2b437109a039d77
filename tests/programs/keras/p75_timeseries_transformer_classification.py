"""keras.io/examples/timeseries/timeseries_classification_transformer as printed (Keras 3): transformer encoder
blocks over a univariate series (``MultiHeadAttention(dropout=...)``, ``Dropout``, ``LayerNormalization``, the
residual ``x + inputs`` of two ``KerasTensor``s, a ``Conv1D(kernel_size=1)`` feed-forward whose filters are
``inputs.shape[-1]``), ``GlobalAveragePooling1D(data_format="channels_last")``, an MLP head with dropout, Adam
1e-4 on ``sparse_categorical_crossentropy``, ``validation_split=0.2`` and
``EarlyStopping(patience=10, restore_best_weights=True)``, then ``evaluate``.

The example's FordA TSV files are made here (two classes of noisy sines, labels -1/1 mapped to 0/1 as printed).
Shrunk: series of 32 (500), head_size 8 (256), 2 heads (4), ff_dim 4, 2 blocks (4), mlp_units [16] (128), 96
training and 32 test series, batch 16 (64), 2 epochs (150), learning rate 1e-3 (1e-4, so a few steps move).
"""

import numpy as np

SOURCE = "https://keras.io/examples/timeseries/timeseries_classification_transformer/"


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    rng = np.random.RandomState(0)

    def readucr(n):
        y = rng.choice([-1, 1], n)
        t = np.linspace(0, 4 * np.pi, 32)
        x = np.sin(t[None, :] * (1.5 + 0.5 * y[:, None])) + rng.normal(0, 0.5, (n, 32))
        return x.astype("float32"), y.astype(int)

    x_train, y_train = readucr(96 * scale)
    x_test, y_test = readucr(32)
    x_train = x_train.reshape((x_train.shape[0], x_train.shape[1], 1))
    x_test = x_test.reshape((x_test.shape[0], x_test.shape[1], 1))
    n_classes = len(np.unique(y_train))
    idx = np.random.RandomState(1).permutation(len(x_train))
    x_train, y_train = x_train[idx], y_train[idx]
    y_train[y_train == -1] = 0
    y_test[y_test == -1] = 0

    def transformer_encoder(inputs, head_size, num_heads, ff_dim, dropout=0):
        # Attention and Normalization
        x = layers.MultiHeadAttention(key_dim=head_size, num_heads=num_heads, dropout=dropout)(inputs, inputs)
        x = layers.Dropout(dropout)(x)
        x = layers.LayerNormalization(epsilon=1e-6)(x)
        res = x + inputs
        # Feed Forward Part
        x = layers.Conv1D(filters=ff_dim, kernel_size=1, activation="relu")(res)
        x = layers.Dropout(dropout)(x)
        x = layers.Conv1D(filters=inputs.shape[-1], kernel_size=1)(x)
        x = layers.LayerNormalization(epsilon=1e-6)(x)
        return x + res

    def build_model(input_shape, head_size, num_heads, ff_dim, num_transformer_blocks, mlp_units, dropout=0,
                    mlp_dropout=0):
        inputs = keras.Input(shape=input_shape)
        x = inputs
        for _ in range(num_transformer_blocks):
            x = transformer_encoder(x, head_size, num_heads, ff_dim, dropout)
        x = layers.GlobalAveragePooling1D(data_format="channels_last")(x)
        for dim in mlp_units:
            x = layers.Dense(dim, activation="relu")(x)
            x = layers.Dropout(mlp_dropout)(x)
        outputs = layers.Dense(n_classes, activation="softmax")(x)
        return keras.Model(inputs, outputs)

    input_shape = x_train.shape[1:]
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = build_model(input_shape, head_size=8, num_heads=2, ff_dim=4, num_transformer_blocks=2,
                            mlp_units=[16], mlp_dropout=0.4, dropout=0.25)
        model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.Adam(learning_rate=1e-3),
                      metrics=["sparse_categorical_accuracy"])
    callbacks = [keras.callbacks.EarlyStopping(patience=10, restore_best_weights=True)]
    history = model.fit(x_train, y_train, validation_split=0.2, epochs=2, batch_size=16, callbacks=callbacks,
                        verbose=0)
    evaluation = model.evaluate(x_test, y_test, verbose=0)
    return {"_model": model, "history": history.history, "evaluate": evaluation,
            "predict": model.predict(x_test[:8], verbose=0)}
