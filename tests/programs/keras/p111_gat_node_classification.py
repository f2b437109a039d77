"""keras.io/examples/graph/gat_node_classification as printed (Keras 3 version): ``GraphAttention`` layers over an
edge list (``ops.take`` of the target and source nodes, ``ops.leaky_relu``, ``ops.exp(ops.clip(...))``, two
``ops.segment_sum(..., num_segments=num_nodes)``), ``MultiHeadGraphAttention`` concatenating its heads, and a
``GraphAttentionNetwork(keras.Model)`` that keeps the whole graph (``node_states``, ``edges``) as tensor attributes
and whose ``call`` takes the indices of the nodes to classify (``ops.take(outputs, indices, axis=0)``); compiled with
``SparseCategoricalCrossentropy(from_logits=True)`` and ``SGD(momentum=0.9)``, fit on the training indices with
``validation_split=0.1``, ``batch_size`` and ``EarlyStopping(monitor="val_accuracy", restore_best_weights=True)``,
then ``evaluate`` and ``predict`` of the test indices and ``ops.softmax`` of the logits.

Cora is made up: 48 papers of 3 subjects with 12 word features (the subject's words more frequent), 150 citations
mostly within a subject. Shrunk: hidden 4 units x 2 heads, 2 layers (100 x 8, 3), batch 8 (256), 4 epochs (100),
learning rate 0.1 (0.003).
"""

import numpy as np

SOURCE = "https://keras.io/examples/graph/gat_node_classification/"
NUM_NODES, NUM_FEATURES, NUM_CLASSES, NUM_EDGES = 48, 12, 3, 150
HIDDEN_UNITS, NUM_HEADS, NUM_LAYERS, BATCH_SIZE, EPOCHS = 4, 2, 2, 8, 4


def citation_graph(rng):
    subjects = rng.randint(0, NUM_CLASSES, NUM_NODES)
    words = rng.binomial(1, 0.2, (NUM_NODES, NUM_FEATURES))
    words[np.arange(NUM_NODES), subjects * 4 + rng.randint(0, 4, NUM_NODES)] = 1
    target = rng.randint(0, NUM_NODES, NUM_EDGES)
    same = [rng.choice(np.flatnonzero(subjects == subjects[t])) for t in target]
    source = np.where(rng.uniform(size=NUM_EDGES) < 0.8, same, rng.randint(0, NUM_NODES, NUM_EDGES))
    edges = np.stack([target, source], axis=1).astype("int64")
    order = rng.permutation(NUM_NODES)
    return words.astype("float32"), edges, subjects.astype("int64"), order[:32], order[32:]


def gat_layers(keras):
    """The example's GraphAttention and MultiHeadGraphAttention (shared by p112)."""
    layers, ops = keras.layers, keras.ops

    class GraphAttention(layers.Layer):
        def __init__(self, units, kernel_initializer="glorot_uniform", kernel_regularizer=None, **kwargs):
            super().__init__(**kwargs)
            self.units = units
            self.kernel_initializer = keras.initializers.get(kernel_initializer)
            self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)

        def build(self, input_shape):
            self.kernel = self.add_weight(shape=(input_shape[0][-1], self.units), trainable=True,
                                          initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
                                          name="kernel")
            self.kernel_attention = self.add_weight(shape=(self.units * 2, 1), trainable=True,
                                                    initializer=self.kernel_initializer,
                                                    regularizer=self.kernel_regularizer, name="kernel_attention")
            self.built = True

        def call(self, inputs):
            node_states, edges = inputs
            z = ops.matmul(node_states, self.kernel)
            source_indices = edges[:, 1]
            target_indices = edges[:, 0]
            z_target = ops.take(z, target_indices, axis=0)
            z_source = ops.take(z, source_indices, axis=0)
            z_concat = ops.concatenate([z_target, z_source], axis=-1)
            attention_scores = ops.leaky_relu(ops.matmul(z_concat, self.kernel_attention))
            attention_scores = ops.squeeze(attention_scores, -1)
            attention_scores = ops.exp(ops.clip(attention_scores, -2, 2))
            num_nodes = ops.shape(node_states)[0]
            attention_sum = ops.segment_sum(attention_scores, target_indices, num_segments=num_nodes)
            attention_sum_per_edge = ops.take(attention_sum, target_indices, axis=0)
            attention_norm = attention_scores / (attention_sum_per_edge + 1e-8)
            node_states_neighbors = ops.take(z, source_indices, axis=0)
            weighted_neighbors = node_states_neighbors * ops.expand_dims(attention_norm, axis=-1)
            return ops.segment_sum(weighted_neighbors, target_indices, num_segments=num_nodes)

    class MultiHeadGraphAttention(layers.Layer):
        def __init__(self, units, num_heads=8, merge_type="concat", **kwargs):
            super().__init__(**kwargs)
            self.num_heads = num_heads
            self.merge_type = merge_type
            self.attention_layers = [GraphAttention(units) for _ in range(num_heads)]

        def call(self, inputs):
            node_states, edges = inputs
            outputs = [layer([node_states, edges]) for layer in self.attention_layers]
            if self.merge_type == "concat":
                outputs = ops.concatenate(outputs, axis=-1)
            else:
                outputs = ops.mean(ops.stack(outputs, axis=0), axis=0)
            return ops.relu(outputs)

    return GraphAttention, MultiHeadGraphAttention


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    features, edges_np, subjects, train_nodes, test_nodes = citation_graph(np.random.RandomState(0))
    train_indices, train_labels = train_nodes, subjects[train_nodes]
    test_indices, test_labels = test_nodes, subjects[test_nodes]
    node_states = ops.convert_to_tensor(features, dtype="float32")
    edges = ops.convert_to_tensor(edges_np)
    _, MultiHeadGraphAttention = gat_layers(keras)

    class GraphAttentionNetwork(keras.Model):
        def __init__(self, node_states, edges, hidden_units, num_heads, num_layers, output_dim, **kwargs):
            super().__init__(**kwargs)
            self.node_states = node_states
            self.edges = edges
            self.preprocess = layers.Dense(hidden_units * num_heads, activation="relu")
            self.attention_layers = [MultiHeadGraphAttention(hidden_units, num_heads) for _ in range(num_layers)]
            self.output_layer = layers.Dense(output_dim)

        def call(self, inputs, training=False):
            indices = inputs
            x = self.preprocess(self.node_states)
            for attention_layer in self.attention_layers:
                x = attention_layer([x, self.edges]) + x
            outputs = self.output_layer(x)
            return ops.take(outputs, indices, axis=0)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        gat_model = GraphAttentionNetwork(node_states, edges, HIDDEN_UNITS, NUM_HEADS, NUM_LAYERS, NUM_CLASSES)
        gat_model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9), metrics=["accuracy"])
    history = gat_model.fit(x=train_indices, y=train_labels, validation_split=0.1, batch_size=BATCH_SIZE,
                            epochs=EPOCHS, verbose=0,
                            callbacks=[keras.callbacks.EarlyStopping(monitor="val_accuracy", patience=5,
                                                                     restore_best_weights=True)])
    _, test_accuracy = gat_model.evaluate(x=test_indices, y=test_labels, verbose=0)
    test_logits = gat_model.predict(x=test_indices, verbose=0)
    test_probs_np = ops.convert_to_numpy(ops.softmax(test_logits))
    return {"_model": gat_model, "history": history.history, "test_accuracy": test_accuracy,
            "test_probs": test_probs_np}
