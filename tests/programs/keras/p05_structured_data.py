"""keras.io/examples/structured_data/structured_data_classification_from_scratch (its pre-FeatureSpace form).

Numeric features through ``Normalization`` layers adapted on the training data, a categorical feature
one-hot encoded with ``CategoryEncoding``, one input per feature, concatenated into an MLP.
Shrunk: 96 synthetic patients, 3 numeric + 1 categorical feature, 2 epochs; Dropout rate 0.
"""

import numpy as np

SOURCE = "https://keras.io/examples/structured_data/structured_data_classification_from_scratch/"


def encode_numerical_feature(keras, feature, values):
    normalizer = keras.layers.Normalization()
    normalizer.adapt(values)
    return normalizer(feature)


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    rng = np.random.RandomState(0)
    n = 96 * scale
    data = {"age": rng.randint(29, 78, (n, 1)).astype("float32"),
            "trestbps": rng.randint(94, 200, (n, 1)).astype("float32"),
            "thalach": rng.randint(71, 202, (n, 1)).astype("float32"),
            "cp": rng.randint(0, 4, (n, 1)).astype("int32")}
    target = (data["age"][:, 0] + rng.randn(n) * 10 > 55).astype("float32")

    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = {name: keras.Input(shape=(1,), name=name, dtype="int32" if name == "cp" else "float32")
                  for name in data}
        features = [encode_numerical_feature(keras, inputs[name], data[name]) for name in ("age", "trestbps", "thalach")]
        features.append(layers.CategoryEncoding(num_tokens=4, output_mode="one_hot")(inputs["cp"]))
        all_features = layers.concatenate(features)
        x = layers.Dense(32, activation="relu")(all_features)
        x = layers.Dropout(0.0)(x)
        output = layers.Dense(1, activation="sigmoid")(x)
        model = keras.Model(inputs, output)
        model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
    history = model.fit(data, target, batch_size=16, epochs=2, validation_split=0.25, verbose=0)
    sample = {name: value[:4] for name, value in data.items()}
    return {"_model": model, "history": history.history, "predict": model.predict(sample, verbose=0)}
