"""keras.io/examples/structured_data/tabtransformer as printed (Keras 3): every feature an ``Input`` of shape ``()``
and dtype float32, the categorical ones too (their lookup indices reach ``Embedding`` as floats); the categorical
embeddings stacked (``ops.stack(..., axis=1)``) through a Transformer block (``MultiHeadAttention`` with dropout,
``Add``, ``LayerNormalization(epsilon=1e-6)``, a feedforward ``create_mlp`` Sequential whose normalization layer is
a ``functools.partial(layers.LayerNormalization, epsilon=1e-6)``), the numeric features ``ops.expand_dims``'ed,
concatenated and layer-normalised; a final MLP of BatchNormalization-Dense(selu)-Dropout blocks and a sigmoid;
``AdamW(learning_rate, weight_decay)``, ``BinaryCrossentropy``, ``BinaryAccuracy(name="accuracy")``; the dataset
yields ``(features, target_index, weights)`` (the census ``fnlwgt`` as sample weights), looked up in the dataset
(``encode_categorical``) as printed, here before it (Keras 3 on torch takes no strings).

The census CSVs are a made-up table (3 numeric, 3 categorical features). Shrunk: 256 training and 64 test rows,
batch 32 (265), 2 epochs (15), 1 Transformer block (3), 2 heads (4), embedding_dims 8 (16).
"""

from functools import partial

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/structured_data/tabtransformer/"
NUMERIC_FEATURE_NAMES = ["age", "capital_gains", "hours_per_week"]
CATEGORICAL_FEATURES_WITH_VOCABULARY = {"workclass": ["Private", "Self-emp", "Gov"],
                                        "education": ["Bachelors", "HS-grad", "Masters", "Doctorate"],
                                        "sex": ["Female", "Male"]}
CATEGORICAL_FEATURE_NAMES = list(CATEGORICAL_FEATURES_WITH_VOCABULARY)
FEATURE_NAMES = NUMERIC_FEATURE_NAMES + CATEGORICAL_FEATURE_NAMES
LEARNING_RATE, WEIGHT_DECAY, DROPOUT_RATE, BATCH_SIZE, NUM_EPOCHS = 0.001, 0.0001, 0.2, 32, 2
NUM_TRANSFORMER_BLOCKS, NUM_HEADS, EMBEDDING_DIMS, MLP_HIDDEN_UNITS_FACTORS = 1, 2, 8, [2, 1]


def make_table(rng, n):
    x = {name: rng.normal(0, 1, n).astype("float32") for name in NUMERIC_FEATURE_NAMES}
    for name, vocabulary in CATEGORICAL_FEATURES_WITH_VOCABULARY.items():
        x[name] = rng.randint(0, len(vocabulary), n).astype("float32")   # encode_categorical's indices
    y = ((x["age"] + 0.5 * x["hours_per_week"] + (x["education"] >= 2)) > 0.5).astype("int64")
    return x, y, rng.uniform(0.5, 2.0, n).astype("float32")


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    def create_model_inputs():
        inputs = {}
        for feature_name in FEATURE_NAMES:
            if feature_name in NUMERIC_FEATURE_NAMES:
                inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="float32")
            else:
                inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="float32")
        return inputs

    def encode_inputs(inputs, embedding_dims):
        encoded_categorical_feature_list = []
        numerical_feature_list = []
        for feature_name in inputs:
            if feature_name in CATEGORICAL_FEATURE_NAMES:
                vocabulary = CATEGORICAL_FEATURES_WITH_VOCABULARY[feature_name]
                embedding = layers.Embedding(input_dim=len(vocabulary), output_dim=embedding_dims)
                encoded_categorical_feature = embedding(inputs[feature_name])
                encoded_categorical_feature_list.append(encoded_categorical_feature)
            else:
                numerical_feature = ops.expand_dims(inputs[feature_name], -1)
                numerical_feature_list.append(numerical_feature)
        return encoded_categorical_feature_list, numerical_feature_list

    def create_mlp(hidden_units, dropout_rate, activation, normalization_layer, name=None):
        mlp_layers = []
        for units in hidden_units:
            mlp_layers.append(normalization_layer()),
            mlp_layers.append(layers.Dense(units, activation=activation))
            mlp_layers.append(layers.Dropout(dropout_rate))
        return keras.Sequential(mlp_layers, name=name)

    def create_tabtransformer_classifier(num_transformer_blocks, num_heads, embedding_dims,
                                         mlp_hidden_units_factors, dropout_rate, use_column_embedding=False):
        inputs = create_model_inputs()
        encoded_categorical_feature_list, numerical_feature_list = encode_inputs(inputs, embedding_dims)
        encoded_categorical_features = ops.stack(encoded_categorical_feature_list, axis=1)
        numerical_features = layers.concatenate(numerical_feature_list)
        for block_idx in range(num_transformer_blocks):
            attention_output = layers.MultiHeadAttention(
                num_heads=num_heads, key_dim=embedding_dims, dropout=dropout_rate,
                name=f"multihead_attention_{block_idx}")(encoded_categorical_features, encoded_categorical_features)
            x = layers.Add(name=f"skip_connection1_{block_idx}")([attention_output, encoded_categorical_features])
            x = layers.LayerNormalization(name=f"layer_norm1_{block_idx}", epsilon=1e-6)(x)
            feedforward_output = create_mlp(
                hidden_units=[embedding_dims], dropout_rate=dropout_rate, activation=keras.activations.gelu,
                normalization_layer=partial(layers.LayerNormalization, epsilon=1e-6),
                name=f"feedforward_{block_idx}")(x)
            x = layers.Add(name=f"skip_connection2_{block_idx}")([feedforward_output, x])
            encoded_categorical_features = layers.LayerNormalization(name=f"layer_norm2_{block_idx}",
                                                                     epsilon=1e-6)(x)
        categorical_features = layers.Flatten()(encoded_categorical_features)
        numerical_features = layers.LayerNormalization(epsilon=1e-6)(numerical_features)
        features = layers.concatenate([categorical_features, numerical_features])
        mlp_hidden_units = [factor * features.shape[-1] for factor in mlp_hidden_units_factors]
        features = create_mlp(hidden_units=mlp_hidden_units, dropout_rate=dropout_rate,
                              activation=keras.activations.selu, normalization_layer=layers.BatchNormalization,
                              name="MLP")(features)
        outputs = layers.Dense(units=1, activation="sigmoid", name="sigmoid")(features)
        return keras.Model(inputs=inputs, outputs=outputs)

    rng = np.random.RandomState(0)
    train_x, train_y, train_w = make_table(rng, 256 * scale)
    test_x, test_y, test_w = make_table(rng, 64)
    train_dataset = md.data.Dataset.from_tensor_slices((train_x, train_y, train_w)).shuffle(
        512, seed=0).batch(BATCH_SIZE)
    validation_dataset = md.data.Dataset.from_tensor_slices((test_x, test_y, test_w)).batch(BATCH_SIZE)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        tabtransformer_model = create_tabtransformer_classifier(
            num_transformer_blocks=NUM_TRANSFORMER_BLOCKS, num_heads=NUM_HEADS, embedding_dims=EMBEDDING_DIMS,
            mlp_hidden_units_factors=MLP_HIDDEN_UNITS_FACTORS, dropout_rate=DROPOUT_RATE)
        optimizer = keras.optimizers.AdamW(learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
        tabtransformer_model.compile(optimizer=optimizer, loss=keras.losses.BinaryCrossentropy(),
                                     metrics=[keras.metrics.BinaryAccuracy(name="accuracy")])
    history = tabtransformer_model.fit(train_dataset, epochs=NUM_EPOCHS, validation_data=validation_dataset,
                                       verbose=0)
    _, accuracy = tabtransformer_model.evaluate(validation_dataset, verbose=0)
    sample = {k: v[:8] for k, v in test_x.items()}
    return {"_model": tabtransformer_model, "history": history.history, "accuracy": accuracy,
            "params": tabtransformer_model.count_params(), "predict": tabtransformer_model.predict(sample, verbose=0)}
