"""keras.io/examples/nlp/text_classification_from_scratch: text files -> TextVectorization -> Conv1D.

Shrunk: 48 synthetic reviews of 12 words in pos/neg directories, 200 tokens, sequences of 16,
2 epochs; Dropout rates 0 so two replicas can be compared with one device.
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/nlp/text_classification_from_scratch/"
WORDS = "good bad great awful fine poor nice dull movie plot actor scene film story".split()


def _write_reviews(root, n):
    rng = np.random.RandomState(0)
    for label in ("neg", "pos"):
        os.makedirs(os.path.join(root, label), exist_ok=True)
        for i in range(n // 2):
            words = rng.choice(WORDS, 12)
            with open(os.path.join(root, label, f"{i}.txt"), "w") as f:
                f.write(" ".join(words) + (" great" if label == "pos" else " awful") + "<br />")


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    root = os.path.join(workdir, "aclImdb", "train")
    _write_reviews(root, 48 * scale)
    raw_train_ds = keras.utils.text_dataset_from_directory(root, batch_size=8, validation_split=0.25,
                                                           subset="training", seed=1337, verbose=False)
    raw_val_ds = keras.utils.text_dataset_from_directory(root, batch_size=8, validation_split=0.25,
                                                         subset="validation", seed=1337, verbose=False)
    max_features, embedding_dim, sequence_length = 200, 8, 16
    vectorize_layer = layers.TextVectorization(max_tokens=max_features, output_mode="int",
                                               output_sequence_length=sequence_length)
    vectorize_layer.adapt(raw_train_ds.map(lambda x, y: x))

    def vectorize_text(text, label):
        return vectorize_layer(text), label

    train_ds = raw_train_ds.map(vectorize_text)
    val_ds = raw_val_ds.map(vectorize_text)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input(shape=(None,), dtype="int64")
        x = layers.Embedding(max_features, embedding_dim)(inputs)
        x = layers.Dropout(0.0)(x)
        x = layers.Conv1D(16, 3, padding="valid", activation="relu", strides=2)(x)
        x = layers.Conv1D(16, 3, padding="valid", activation="relu", strides=2)(x)
        x = layers.GlobalMaxPooling1D()(x)
        x = layers.Dense(16, activation="relu")(x)
        x = layers.Dropout(0.0)(x)
        predictions = layers.Dense(1, activation="sigmoid", name="predictions")(x)
        model = keras.Model(inputs, predictions)
        model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    history = model.fit(train_ds, validation_data=val_ds, epochs=2, verbose=0)
    return {"_model": model, "history": history.history, "evaluate": model.evaluate(val_ds, verbose=0)}
