"""keras.io/examples/structured_data/wide_deep_cross_networks as printed (Keras 3): numeric ``Input``s of shape ``()``
and STRING categorical ``Input``s looked up inside the model by ``StringLookup(vocabulary, mask_token=None,
num_oov_indices=0, output_mode="int" if use_embedding else "binary")`` (the wide part: the multi-hot of
``ops.expand_dims(inputs[name], -1)``; the deep part: an ``Embedding`` of ``int(math.sqrt(len(vocabulary)))`` dims),
``ops.expand_dims`` of the numeric features, ``layers.concatenate``; the Wide & Deep model (a BatchNormalization of
the wide features beside Dense-BatchNormalization-ReLU-Dropout blocks) and the Deep & Cross model (``cross = x0 * x
+ cross`` of functional tensors, a ``Dense(cross.shape[-1])`` per layer), each a softmax over the 7 cover types,
compiled with ``Adam``, ``SparseCategoricalCrossentropy`` and ``SparseCategoricalAccuracy()`` in ``run_experiment``.

The covertype CSVs are a made-up table (4 numeric features, Soil_Type of 6 values and Wilderness_Area of 4, read as
the CSV's strings). Shrunk: 256 training and 64 test rows, batch 32 (265), hidden_units [16, 16] ([32, 32]), 2
epochs (1); the baseline model is left out.
"""

import math

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/structured_data/wide_deep_cross_networks/"
NUMERIC_FEATURE_NAMES = ["Elevation", "Aspect", "Slope", "Hillshade_9am"]
CATEGORICAL_FEATURES_WITH_VOCABULARY = {"Soil_Type": [f"C{7700 + i}" for i in range(6)],
                                        "Wilderness_Area": ["Rawah", "Neota", "Comanche", "Cache"]}
CATEGORICAL_FEATURE_NAMES = list(CATEGORICAL_FEATURES_WITH_VOCABULARY.keys())
FEATURE_NAMES = NUMERIC_FEATURE_NAMES + CATEGORICAL_FEATURE_NAMES
NUM_CLASSES = 7
learning_rate, dropout_rate, batch_size, num_epochs, hidden_units = 0.001, 0.1, 32, 2, [16, 16]


def make_table(rng, n):
    x = {name: rng.normal(0, 1, n).astype("float32") for name in NUMERIC_FEATURE_NAMES}
    codes = {}
    for name, vocabulary in CATEGORICAL_FEATURES_WITH_VOCABULARY.items():
        codes[name] = rng.randint(0, len(vocabulary), n)
        x[name] = np.array(vocabulary)[codes[name]]
    y = (np.digitize(x["Elevation"] + 0.3 * codes["Soil_Type"], [-1, -0.5, 0, 0.5, 1, 1.5]) % NUM_CLASSES)
    return x, y.astype("int64")


def looked_up(x):
    """The categorical strings as their vocabulary indices (p88: before the model, as md.keras's error asks)."""
    ids = {name: {v: i for i, v in enumerate(vocabulary)} for name, vocabulary in
           CATEGORICAL_FEATURES_WITH_VOCABULARY.items()}
    return {k: np.array([ids[k][s] for s in v], "int64") if k in ids else v for k, v in x.items()}


def run(keras, strategy, workdir, scale=1, lookup_in_dataset=False):
    layers = keras.layers
    rng = np.random.RandomState(0)
    train_x, train_y = make_table(rng, 256 * scale)
    test_x, test_y = make_table(rng, 64)
    if lookup_in_dataset:
        train_x, test_x = looked_up(train_x), looked_up(test_x)

    def get_dataset(x, y, shuffle=False):
        dataset = md.data.Dataset.from_tensor_slices((x, y))
        return (dataset.shuffle(512, seed=0) if shuffle else dataset).batch(batch_size)

    def run_experiment(model):
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate),
                      loss=keras.losses.SparseCategoricalCrossentropy(),
                      metrics=[keras.metrics.SparseCategoricalAccuracy()])
        train_dataset = get_dataset(train_x, train_y, shuffle=True)
        test_dataset = get_dataset(test_x, test_y)
        history = model.fit(train_dataset, epochs=num_epochs, verbose=0)
        _, accuracy = model.evaluate(test_dataset, verbose=0)
        sample = {k: v[:8] for k, v in test_x.items()}
        return {"history": history.history, "accuracy": accuracy, "predict": model.predict(sample, verbose=0)}

    def create_model_inputs():
        inputs = {}
        for feature_name in FEATURE_NAMES:
            if feature_name in NUMERIC_FEATURE_NAMES:
                inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="float32")
            else:
                inputs[feature_name] = layers.Input(name=feature_name, shape=(),
                                                    dtype="int64" if lookup_in_dataset else "string")
        return inputs

    def encode_inputs(inputs, use_embedding=False):
        encoded_features = []
        for feature_name in inputs:
            if feature_name in CATEGORICAL_FEATURE_NAMES:
                vocabulary = CATEGORICAL_FEATURES_WITH_VOCABULARY[feature_name]
                lookup = layers.StringLookup(vocabulary=vocabulary, mask_token=None, num_oov_indices=0,
                                             output_mode="int" if use_embedding else "binary") \
                    if not lookup_in_dataset else (
                        (lambda ids: ids) if use_embedding   # p88: the ids themselves, or their one-hot
                        else layers.CategoryEncoding(num_tokens=len(vocabulary), output_mode="multi_hot"))
                if use_embedding:
                    encoded_feature = lookup(inputs[feature_name])
                    embedding_dims = int(math.sqrt(len(vocabulary)))
                    embedding = layers.Embedding(input_dim=len(vocabulary), output_dim=embedding_dims)
                    encoded_feature = embedding(encoded_feature)
                else:
                    encoded_feature = lookup(keras.ops.expand_dims(inputs[feature_name], -1))
            else:
                encoded_feature = keras.ops.expand_dims(inputs[feature_name], -1)
            encoded_features.append(encoded_feature)
        all_features = layers.concatenate(encoded_features)
        return all_features

    def create_wide_and_deep_model():
        inputs = create_model_inputs()
        wide = encode_inputs(inputs)
        wide = layers.BatchNormalization()(wide)
        deep = encode_inputs(inputs, use_embedding=True)
        for units in hidden_units:
            deep = layers.Dense(units)(deep)
            deep = layers.BatchNormalization()(deep)
            deep = layers.ReLU()(deep)
            deep = layers.Dropout(dropout_rate)(deep)
        merged = layers.concatenate([wide, deep])
        outputs = layers.Dense(units=NUM_CLASSES, activation="softmax")(merged)
        return keras.Model(inputs=inputs, outputs=outputs)

    def create_deep_and_cross_model():
        inputs = create_model_inputs()
        x0 = encode_inputs(inputs, use_embedding=True)
        cross = x0
        for _ in hidden_units:
            units = cross.shape[-1]
            x = layers.Dense(units)(cross)
            cross = x0 * x + cross
        cross = layers.BatchNormalization()(cross)
        deep = x0
        for units in hidden_units:
            deep = layers.Dense(units)(deep)
            deep = layers.BatchNormalization()(deep)
            deep = layers.ReLU()(deep)
            deep = layers.Dropout(dropout_rate)(deep)
        merged = layers.concatenate([cross, deep])
        outputs = layers.Dense(units=NUM_CLASSES, activation="softmax")(merged)
        return keras.Model(inputs=inputs, outputs=outputs)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        wide_and_deep_model = create_wide_and_deep_model()
        wide_and_deep = run_experiment(wide_and_deep_model)
        deep_and_cross_model = create_deep_and_cross_model()
        deep_and_cross = run_experiment(deep_and_cross_model)
    return {"_model": deep_and_cross_model, "wide_and_deep": wide_and_deep, "deep_and_cross": deep_and_cross}
