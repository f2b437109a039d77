"""keras.io/examples/structured_data/deep_neural_decision_forests as printed (Keras 3): ``Input(shape=())``
features in a dict (numeric ``float32``, categorical ``int32`` indices made by ``StringLookup`` outside the model),
``encode_inputs`` embedding each categorical (``Embedding`` of ``int(math.sqrt(lookup.vocabulary_size()))``) and
``ops.expand_dims`` of each numeric feature whose ``shape[-1] is None``, ``layers.concatenate``,
``BatchNormalization``; a ``NeuralDecisionTree(keras.Model)`` whose ``__init__`` samples its features with the
global ``np.random.choice`` (a constant mask ``ops.convert_to_tensor(one_hot[...])``) and makes its leaves' class
weights with ``self.add_weight`` before any build, routes the batch breadth-first (``ops.ones([batch_size, 1,
1])``, ``ops.tile``, slices of ``decisions``), and a ``NeuralDecisionForest(keras.Model)`` holding a Python list of
trees and averaging them with ``outputs += tree(inputs)`` and ``outputs /= len(self.ensemble)``. Both are fit in
``run_experiment`` (Adam, ``SparseCategoricalCrossentropy``, ``SparseCategoricalAccuracy``) and evaluated.

The example's census CSVs and tf.data pipeline are a made-up table of 3 numeric and 2 categorical features fed as
a dict of arrays (the ``encode_categorical`` map applied to the arrays once). Shrunk: 256 rows (32561), 64 test
rows, batch 32 (265), 2 epochs (10), depth 3 (10), 3 trees (25), used_features_rate 0.5.
"""

import math

import numpy as np

SOURCE = "https://keras.io/examples/structured_data/deep_neural_decision_forests/"
NUMERIC_FEATURE_NAMES = ["age", "hours_per_week", "capital_gain"]
CATEGORICAL_FEATURES_WITH_VOCABULARY = {"workclass": ["Private", "State-gov", "Self-emp"],
                                        "education": ["Bachelors", "HS-grad", "Masters", "Doctorate"]}
CATEGORICAL_FEATURE_NAMES = list(CATEGORICAL_FEATURES_WITH_VOCABULARY.keys())
FEATURE_NAMES = NUMERIC_FEATURE_NAMES + CATEGORICAL_FEATURE_NAMES
TARGET_LABELS = [" <=50K", " >50K"]
learning_rate, batch_size, num_epochs = 0.01, 32, 2
depth, used_features_rate, num_trees = 3, 0.5, 3
num_classes = len(TARGET_LABELS)


def make_table(rng, n):
    x = {"age": rng.uniform(-1, 1, n), "hours_per_week": rng.uniform(-1, 1, n), "capital_gain": rng.normal(0, 1, n)}
    x = {k: v.astype("float32") for k, v in x.items()}
    for name, vocabulary in CATEGORICAL_FEATURES_WITH_VOCABULARY.items():
        x[name] = np.array(vocabulary)[rng.randint(0, len(vocabulary), n)]
    score = x["age"] + x["hours_per_week"] + (x["education"] == "Masters") - 0.5 * (x["workclass"] == "Private")
    y = np.array(TARGET_LABELS)[(score > 0.3).astype(int)]
    return x, y


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    target_label_lookup = layers.StringLookup(vocabulary=TARGET_LABELS, mask_token=None, num_oov_indices=0)
    lookup_dict = {}
    for feature_name in CATEGORICAL_FEATURE_NAMES:
        vocabulary = CATEGORICAL_FEATURES_WITH_VOCABULARY[feature_name]
        lookup = layers.StringLookup(vocabulary=vocabulary, mask_token=None, num_oov_indices=0)
        lookup_dict[feature_name] = lookup

    def encode_categorical(batch_x, batch_y):
        for feature_name in CATEGORICAL_FEATURE_NAMES:
            batch_x[feature_name] = ops.convert_to_numpy(lookup_dict[feature_name](batch_x[feature_name]))
        return batch_x, ops.convert_to_numpy(target_label_lookup(batch_y))

    def create_model_inputs():
        inputs = {}
        for feature_name in FEATURE_NAMES:
            if feature_name in NUMERIC_FEATURE_NAMES:
                inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="float32")
            else:
                inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="int32")
        return inputs

    def encode_inputs(inputs):
        encoded_features = []
        for feature_name in inputs:
            if feature_name in CATEGORICAL_FEATURE_NAMES:
                value_index = inputs[feature_name]
                lookup = lookup_dict[feature_name]
                embedding_dims = int(math.sqrt(lookup.vocabulary_size()))
                embedding = layers.Embedding(input_dim=lookup.vocabulary_size(), output_dim=embedding_dims)
                encoded_feature = embedding(value_index)
            else:
                encoded_feature = inputs[feature_name]
                if inputs[feature_name].shape[-1] is None:
                    encoded_feature = keras.ops.expand_dims(encoded_feature, -1)
            encoded_features.append(encoded_feature)
        encoded_features = layers.concatenate(encoded_features)
        return encoded_features

    class NeuralDecisionTree(keras.Model):
        def __init__(self, depth, num_features, used_features_rate, num_classes):
            super().__init__()
            self.depth = depth
            self.num_leaves = 2**depth
            self.num_classes = num_classes
            # Create a mask for the randomly selected features.
            num_used_features = int(num_features * used_features_rate)
            one_hot = np.eye(num_features)
            sampled_feature_indices = np.random.choice(np.arange(num_features), num_used_features, replace=False)
            self.used_features_mask = ops.convert_to_tensor(one_hot[sampled_feature_indices], dtype="float32")
            # Initialize the weights of the classes in leaves.
            self.pi = self.add_weight(initializer="random_normal", shape=[self.num_leaves, self.num_classes],
                                      dtype="float32", trainable=True)
            # Initialize the stochastic routing layer.
            self.decision_fn = layers.Dense(units=self.num_leaves, activation="sigmoid", name="decision")

        def call(self, features):
            batch_size = ops.shape(features)[0]
            # Apply the feature mask to the input features.
            features = ops.matmul(features, ops.transpose(self.used_features_mask))
            # Compute the routing probabilities.
            decisions = ops.expand_dims(self.decision_fn(features), axis=2)
            # Concatenate the routing probabilities with their complements.
            decisions = layers.concatenate([decisions, 1 - decisions], axis=2)
            mu = ops.ones([batch_size, 1, 1])
            begin_idx = 1
            end_idx = 2
            # Traverse the tree in breadth-first order.
            for level in range(self.depth):
                mu = ops.reshape(mu, [batch_size, -1, 1])
                mu = ops.tile(mu, (1, 1, 2))
                level_decisions = decisions[:, begin_idx:end_idx, :]
                mu = mu * level_decisions
                begin_idx = end_idx
                end_idx = begin_idx + 2 ** (level + 1)
            mu = ops.reshape(mu, [batch_size, self.num_leaves])
            probabilities = keras.activations.softmax(self.pi)
            outputs = ops.matmul(mu, probabilities)
            return outputs

    class NeuralDecisionForest(keras.Model):
        def __init__(self, num_trees, depth, num_features, used_features_rate, num_classes):
            super().__init__()
            self.ensemble = []
            # Initialize the ensemble by adding NeuralDecisionTree instances.
            # Each tree will have its own randomly selected input features to use.
            for _ in range(num_trees):
                self.ensemble.append(NeuralDecisionTree(depth, num_features, used_features_rate, num_classes))

        def call(self, inputs):
            # Initialize the outputs: a [batch_size, num_classes] matrix of zeros.
            batch_size = ops.shape(inputs)[0]
            outputs = ops.zeros([batch_size, num_classes])
            # Aggregate the outputs of trees in the ensemble.
            for tree in self.ensemble:
                outputs += tree(inputs)
            # Divide the outputs by the ensemble size to get the average.
            outputs /= len(self.ensemble)
            return outputs

    def run_experiment(model):
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate),
                      loss=keras.losses.SparseCategoricalCrossentropy(),
                      metrics=[keras.metrics.SparseCategoricalAccuracy()])
        history = model.fit(train_x, train_y, batch_size=batch_size, epochs=num_epochs, verbose=0)
        _, accuracy = model.evaluate(test_x, test_y, batch_size=batch_size, verbose=0)
        return history.history, accuracy

    def create_tree_model():
        inputs = create_model_inputs()
        features = encode_inputs(inputs)
        features = layers.BatchNormalization()(features)
        num_features = features.shape[1]
        tree = NeuralDecisionTree(depth, num_features, used_features_rate, num_classes)
        outputs = tree(features)
        model = keras.Model(inputs=inputs, outputs=outputs)
        return model, tree

    def create_forest_model():
        inputs = create_model_inputs()
        features = encode_inputs(inputs)
        features = layers.BatchNormalization()(features)
        num_features = features.shape[1]
        forest_model = NeuralDecisionForest(num_trees, depth, num_features, used_features_rate, num_classes)
        outputs = forest_model(features)
        model = keras.Model(inputs=inputs, outputs=outputs)
        return model, forest_model

    rng = np.random.RandomState(0)
    train_x, train_y = encode_categorical(*make_table(rng, 256 * scale))
    test_x, test_y = encode_categorical(*make_table(rng, 64))
    keras.utils.set_random_seed(0)
    with strategy.scope():
        tree_model, tree = create_tree_model()
        tree_history, tree_accuracy = run_experiment(tree_model)
        forest_model, forest = create_forest_model()
        forest_history, forest_accuracy = run_experiment(forest_model)
    sample = {k: v[:8] for k, v in test_x.items()}
    return {"_model": forest_model, "tree_history": tree_history, "tree_accuracy": tree_accuracy,
            "forest_history": forest_history, "forest_accuracy": forest_accuracy,
            "masks": [ops.convert_to_numpy(t.used_features_mask) for t in [tree] + forest.ensemble],
            "tree_pi": tree.pi, "forest_predict": forest_model.predict(sample, verbose=0)}
