"""keras.io/examples/graph/gat_node_classification, its earlier tf.keras version (``tf.GradientTape`` ->
``md.GradientTape``, ``tf.gather`` -> ``ops.take``): the same graph attention layers (p111), but the
``GraphAttentionNetwork``'s ``call`` takes ``[node_states, edges]`` and returns every node's logits, and its own
``train_step(data)`` unpacks ``indices, labels = data``, runs the whole graph, and takes ``self.compiled_loss(labels,
tf.gather(outputs, indices))`` under the tape; it steps with the MODULE-LEVEL ``optimizer`` object that was handed
to ``compile`` (``optimizer.apply_gradients``), updates ``self.compiled_metrics`` and returns ``{m.name: m.result()
for m in self.metrics}``; ``predict_step`` returns ``tf.nn.softmax(tf.gather(outputs, indices))`` and ``test_step``
mirrors ``train_step``. The loss, optimizer and ``SparseCategoricalAccuracy(name="acc")`` are made at module level
(outside the strategy's scope), as printed; ``EarlyStopping(monitor="val_acc", min_delta=1e-5)``.

Keras 3 has no ``compiled_loss``: the example runs on md.keras (tf.keras's API) only. Graph and shrinking: p111.
"""

import numpy as np

import multidev as md
from tests.programs.keras.p111_gat_node_classification import (BATCH_SIZE, EPOCHS, HIDDEN_UNITS, NUM_CLASSES,
                                                               NUM_HEADS, NUM_LAYERS, citation_graph, gat_layers)

SOURCE = "https://keras.io/examples/graph/gat_node_classification/"


def run(keras, strategy, workdir, scale=1, build_first=False):
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

        def call(self, inputs):
            node_states, edges = inputs
            x = self.preprocess(node_states)
            for attention_layer in self.attention_layers:
                x = attention_layer([x, edges]) + x
            return self.output_layer(x)

        def train_step(self, data):
            indices, labels = data
            with md.GradientTape() as tape:
                outputs = self([self.node_states, self.edges])
                loss = self.compiled_loss(labels, ops.take(outputs, indices, axis=0))
            grads = tape.gradient(loss, self.trainable_weights)
            optimizer.apply_gradients(zip(grads, self.trainable_weights))
            self.compiled_metrics.update_state(labels, ops.take(outputs, indices, axis=0))
            return {m.name: m.result() for m in self.metrics}

        def predict_step(self, data):
            indices = data
            outputs = self([self.node_states, self.edges])
            return ops.softmax(ops.take(outputs, indices, axis=0))

        def test_step(self, data):
            indices, labels = data
            outputs = self([self.node_states, self.edges])
            self.compiled_loss(labels, ops.take(outputs, indices, axis=0))
            self.compiled_metrics.update_state(labels, ops.take(outputs, indices, axis=0))
            return {m.name: m.result() for m in self.metrics}

    keras.utils.set_random_seed(0)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
    accuracy_fn = keras.metrics.SparseCategoricalAccuracy(name="acc")
    early_stopping = keras.callbacks.EarlyStopping(monitor="val_acc", min_delta=1e-5, patience=5,
                                                   restore_best_weights=True)
    with strategy.scope():
        gat_model = GraphAttentionNetwork(node_states, edges, HIDDEN_UNITS, NUM_HEADS, NUM_LAYERS, NUM_CLASSES)
        if build_first:   # p116: what md.keras's error on replicas asks for
            gat_model([node_states, edges])
        gat_model.compile(loss=loss_fn, optimizer=optimizer, metrics=[accuracy_fn])
    history = gat_model.fit(x=train_indices, y=train_labels, validation_split=0.1, batch_size=BATCH_SIZE,
                            epochs=EPOCHS, callbacks=[early_stopping], verbose=0)
    _, test_accuracy = gat_model.evaluate(x=test_indices, y=test_labels, verbose=0)
    test_probs = gat_model.predict(x=test_indices, verbose=0)
    return {"_model": gat_model, "history": history.history, "test_accuracy": test_accuracy,
            "test_probs": test_probs}
