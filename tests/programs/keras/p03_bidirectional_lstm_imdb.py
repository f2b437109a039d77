"""keras.io/examples/nlp/bidirectional_lstm_imdb: Embedding -> 2 x Bidirectional(LSTM) on padded reviews.

Shrunk: 64 synthetic reviews of 4-20 token ids, vocabulary 100, maxlen 20, units 8, 2 epochs.
"""

import numpy as np

SOURCE = "https://keras.io/examples/nlp/bidirectional_lstm_imdb/"


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    max_features, maxlen = 100, 20
    rng = np.random.RandomState(0)
    x_train = [list(rng.randint(1, max_features, rng.randint(4, 21))) for _ in range(64 * scale)]
    y_train = rng.randint(0, 2, 64 * scale)
    x_train = keras.utils.pad_sequences(x_train, maxlen=maxlen)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input(shape=(None,), dtype="int32")
        x = layers.Embedding(max_features, 16)(inputs)
        x = layers.Bidirectional(layers.LSTM(8, return_sequences=True))(x)
        x = layers.Bidirectional(layers.LSTM(8))(x)
        outputs = layers.Dense(1, activation="sigmoid")(x)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    history = model.fit(x_train, y_train, batch_size=16, epochs=2, validation_split=0.25, verbose=0)
    return {"_model": model, "history": history.history, "predict": model.predict(x_train[:8], verbose=0)}
