"""keras.io/examples/nlp/pretrained_word_embeddings: a frozen pretrained embedding (``Embedding(num_tokens,
embedding_dim, trainable=False)``, ``embedding_layer.build((1,))``, ``embedding_layer.set_weights([embedding_matrix])``
with all-zero rows for padding, OOV and words missing from GloVe) under a Conv1D/MaxPooling1D stack,
GlobalMaxPooling1D, Dropout(0.5), softmax over the classes; ``sparse_categorical_crossentropy``, rmsprop,
``metrics=["acc"]``; then keras.io's end-to-end model (the string-input TextVectorization step left out:
it needs TensorFlow) and the older form of the same frozen table,
``embeddings_initializer=keras.initializers.Constant(embedding_matrix)``.

Shrunk: synthetic token ids (vocabulary 60 + padding and OOV, 200 per sample as keras.io's
``output_sequence_length``) whose class shifts which tokens occur, a seeded "GloVe" of dimension 8 (keras.io:
100) covering two thirds of the vocabulary, 8 filters (128), Dense(8), 64 training and 16 validation samples,
4 classes, 2 epochs of batch 16.
"""

import numpy as np

SOURCE = "https://keras.io/examples/nlp/pretrained_word_embeddings/"
NUM_TOKENS, EMBEDDING_DIM, LENGTH, CLASSES = 62, 8, 200, 4


def _data(rng, n):
    labels = rng.randint(0, CLASSES, n)
    ids = rng.randint(2, NUM_TOKENS, (n, LENGTH))
    ids[:, ::3] = (2 + 15 * labels[:, None] + rng.randint(0, 15, (n, (LENGTH + 2) // 3)))   # class words
    ids[rng.rand(n, LENGTH) < 0.1] = 0   # padding
    return ids.astype("int64"), labels


def _embedding_matrix(rng):
    """keras.io's loop over word_index: a row per word GloVe knows, zeros for the others (0 and 1 included)."""
    embeddings_index = {i: rng.normal(0, 1, EMBEDDING_DIM) for i in range(2, NUM_TOKENS) if i % 3}
    embedding_matrix = np.zeros((NUM_TOKENS, EMBEDDING_DIM))
    for i in range(NUM_TOKENS):
        embedding_vector = embeddings_index.get(i)
        if embedding_vector is not None:
            embedding_matrix[i] = embedding_vector
    return embedding_matrix


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    rng = np.random.RandomState(0)
    x_train, y_train = _data(rng, 64 * scale)
    x_val, y_val = _data(rng, 16)
    embedding_matrix = _embedding_matrix(rng)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        embedding_layer = layers.Embedding(NUM_TOKENS, EMBEDDING_DIM, trainable=False)
        embedding_layer.build((1,))
        embedding_layer.set_weights([embedding_matrix])
        int_sequences_input = keras.Input(shape=(None,), dtype="int64")
        embedded_sequences = embedding_layer(int_sequences_input)
        x = layers.Conv1D(8, 5, activation="relu")(embedded_sequences)
        x = layers.MaxPooling1D(5)(x)
        x = layers.Conv1D(8, 5, activation="relu")(x)
        x = layers.MaxPooling1D(5)(x)
        x = layers.Conv1D(8, 5, activation="relu")(x)
        x = layers.GlobalMaxPooling1D()(x)
        x = layers.Dense(8, activation="relu")(x)
        x = layers.Dropout(0.5)(x)
        preds = layers.Dense(CLASSES, activation="softmax")(x)
        model = keras.Model(int_sequences_input, preds)
        model.compile(loss="sparse_categorical_crossentropy", optimizer="rmsprop", metrics=["acc"])
        constant = layers.Embedding(NUM_TOKENS, EMBEDDING_DIM, trainable=False,
                                    embeddings_initializer=keras.initializers.Constant(embedding_matrix))
        constant.build((1,))
    history = model.fit(x_train, y_train, batch_size=16, epochs=2, validation_data=(x_val, y_val), verbose=0)
    string_free_end_to_end = keras.Model(int_sequences_input, preds)   # keras.io: keras.Input(dtype="string") first
    probabilities = string_free_end_to_end.predict(x_val[:4], verbose=0)
    return {"_model": model, "history": history.history, "predict": probabilities,
            "class": np.argmax(probabilities, axis=1),
            "frozen_table_unchanged": float(np.abs(np.asarray(embedding_layer.get_weights()[0]) - embedding_matrix).max()),
            "constant_table": constant.get_weights()[0], "trainable_weights": len(model.trainable_weights)}
