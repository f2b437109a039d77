"""keras.io/examples/structured_data/classification_with_grn_and_vsn as printed (Keras 3): ``GatedLinearUnit``,
``GatedResidualNetwork`` (ELU and linear ``Dense``, ``Dropout``, a ``project`` Dense used only when the input width
differs, so built for some instances and never for others, ``inputs + self.gated_linear_unit(x)``,
``LayerNormalization``) and ``VariableSelection`` layers (a Python list of GRNs, ``layers.concatenate`` of the
feature list inside ``call``, a softmax ``Dense`` of feature weights, ``ops.stack``, ``ops.matmul`` of the
transposed weights, ``ops.squeeze``); every feature encoded to ``encoding_size`` (``Embedding`` of the lookup
index, or ``Dense`` of ``ops.expand_dims(numeric, -1)``); a sigmoid head, ``BinaryCrossentropy``, ``BinaryAccuracy``
and ``EarlyStopping(monitor="val_loss", patience=5, restore_best_weights=True)``; the training data carry the
example's ``fnlwgt`` weight column as sample weights (a dataset of ``(features, target, weight)``).

The census CSVs are a made-up table (3 numeric, 2 categorical features; categorical values looked up to indices
before the model, as Keras 3 on torch takes no string inputs). Shrunk: 256 training and 64 validation rows, batch
32 (265), 2 epochs (20), encoding_size 8 (16), dropout 0.15.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/structured_data/classification_with_grn_and_vsn/"
NUMERIC_FEATURE_NAMES = ["age", "capital_gains", "wage_per_hour"]
CATEGORICAL_FEATURES_WITH_VOCABULARY = {"education": ["Bachelors", "HS-grad", "Masters", "Doctorate"],
                                        "sex": ["Female", "Male"]}
CATEGORICAL_FEATURE_NAMES = list(CATEGORICAL_FEATURES_WITH_VOCABULARY)
FEATURE_NAMES = NUMERIC_FEATURE_NAMES + CATEGORICAL_FEATURE_NAMES
learning_rate, dropout_rate, batch_size, num_epochs, encoding_size = 0.01, 0.15, 32, 2, 8


def make_table(rng, n):
    x = {name: rng.normal(0, 1, n).astype("float32") for name in NUMERIC_FEATURE_NAMES}
    for name, vocabulary in CATEGORICAL_FEATURES_WITH_VOCABULARY.items():
        x[name] = rng.randint(0, len(vocabulary), n).astype("int32")
    y = ((x["age"] + 0.5 * x["capital_gains"] + (x["education"] >= 2)) > 0.5).astype("float32")
    fnlwgt = rng.uniform(0.5, 2.0, n).astype("float32")
    return x, y, fnlwgt


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class GatedLinearUnit(layers.Layer):
        def __init__(self, units):
            super().__init__()
            self.linear = layers.Dense(units)
            self.sigmoid = layers.Dense(units, activation="sigmoid")

        def call(self, inputs):
            return self.linear(inputs) * self.sigmoid(inputs)

    class GatedResidualNetwork(layers.Layer):
        def __init__(self, units, dropout_rate):
            super().__init__()
            self.units = units
            self.elu_dense = layers.Dense(units, activation="elu")
            self.linear_dense = layers.Dense(units)
            self.dropout = layers.Dropout(dropout_rate)
            self.gated_linear_unit = GatedLinearUnit(units)
            self.layer_norm = layers.LayerNormalization()
            self.project = layers.Dense(units)

        def call(self, inputs):
            x = self.elu_dense(inputs)
            x = self.linear_dense(x)
            x = self.dropout(x)
            if inputs.shape[-1] != self.units:
                inputs = self.project(inputs)
            x = inputs + self.gated_linear_unit(x)
            x = self.layer_norm(x)
            return x

    class VariableSelection(layers.Layer):
        def __init__(self, num_features, units, dropout_rate):
            super().__init__()
            self.grns = list()
            # Create a GRN for each feature independently
            for idx in range(num_features):
                grn = GatedResidualNetwork(units, dropout_rate)
                self.grns.append(grn)
            # Create a GRN for the concatenation of all the features
            self.grn_concat = GatedResidualNetwork(units, dropout_rate)
            self.softmax = layers.Dense(units=num_features, activation="softmax")

        def call(self, inputs):
            v = layers.concatenate(inputs)
            v = self.grn_concat(v)
            v = ops.expand_dims(self.softmax(v), axis=-1)
            x = []
            for idx, input in enumerate(inputs):
                x.append(self.grns[idx](input))
            x = ops.stack(x, axis=1)
            outputs = ops.squeeze(ops.matmul(ops.transpose(v, axes=[0, 2, 1]), x), axis=1)
            return outputs

    def create_model_inputs():
        inputs = {}
        for feature_name in FEATURE_NAMES:
            if feature_name in NUMERIC_FEATURE_NAMES:
                inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="float32")
            else:
                inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="int32")
        return inputs

    def encode_inputs(inputs, encoding_size):
        encoded_features = []
        for feature_name in inputs:
            if feature_name in CATEGORICAL_FEATURE_NAMES:
                vocabulary = CATEGORICAL_FEATURES_WITH_VOCABULARY[feature_name]
                value_index = inputs[feature_name]
                embedding_ecoder = layers.Embedding(input_dim=len(vocabulary), output_dim=encoding_size)
                encoded_feature = embedding_ecoder(value_index)
            else:
                # Project the numeric feature to encoding_size using linear transformation.
                encoded_feature = keras.ops.expand_dims(inputs[feature_name], -1)
                encoded_feature = layers.Dense(units=encoding_size)(encoded_feature)
            encoded_features.append(encoded_feature)
        return encoded_features

    def create_model(encoding_size):
        inputs = create_model_inputs()
        feature_list = encode_inputs(inputs, encoding_size)
        num_features = len(feature_list)
        features = VariableSelection(num_features, encoding_size, dropout_rate)(feature_list)
        outputs = layers.Dense(units=1, activation="sigmoid")(features)
        model = keras.Model(inputs=inputs, outputs=outputs)
        return model

    rng = np.random.RandomState(0)
    train_x, train_y, train_w = make_table(rng, 256 * scale)
    valid_x, valid_y, valid_w = make_table(rng, 64)
    train_dataset = md.data.Dataset.from_tensor_slices((train_x, train_y, train_w)).batch(batch_size)
    valid_dataset = md.data.Dataset.from_tensor_slices((valid_x, valid_y, valid_w)).batch(batch_size)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = create_model(encoding_size)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate),
                      loss=keras.losses.BinaryCrossentropy(), metrics=[keras.metrics.BinaryAccuracy(name="accuracy")])
    early_stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=5, restore_best_weights=True)
    history = model.fit(train_dataset, epochs=num_epochs, validation_data=valid_dataset, callbacks=[early_stopping],
                        verbose=0)
    _, accuracy = model.evaluate(valid_dataset, verbose=0)
    sample = {k: v[:8] for k, v in valid_x.items()}
    return {"_model": model, "history": history.history, "accuracy": accuracy,
            "predict": model.predict(sample, verbose=0), "weights": len(model.weights)}
