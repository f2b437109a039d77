"""keras.io/examples/graph/gnn_citations, its GNN node classifier, typed with Keras 3 ops for the TF ones
(``tf.gather`` -> ``ops.take``, ``tf.math.unsorted_segment_sum`` -> ``ops.segment_sum``, ``tf.concat`` ->
``ops.concatenate``, ``tf.nn.l2_normalize`` -> ``ops.normalize``): a subclassed ``GNNNodeClassifier`` holding
the whole graph (node features, edges, normalised edge weights) that runs ``preprocess`` FFN, two
``GraphConvLayer``s (messages from gathered neighbours, summed per node, concatenated and updated by an FFN,
l2-normalised), ``postprocess`` and gathers the logits of the batch's node indices; its FFNs are
``BatchNormalization`` -> ``Dropout`` -> ``Dense(gelu)``. Trained with ``fit`` on node indices
(``validation_split``, ``EarlyStopping(restore_best_weights)``), then ``evaluate`` and ``predict``.

Every step runs the whole graph on every replica, so BatchNormalization sees all nodes on each (one
device's statistics). ``GNNNodeClassifier.call`` takes no ``training``: Keras 3's ``fit`` then calls the model
without it and the nested BatchNormalization and Dropout run in inference mode (on one device too); md.keras
(tf.keras 2's rule) passes ``training`` on to them, and its Dropout (0.5, as the example) draws over the graph's
nodes, not the batch: each replica draws its own mask, as TensorFlow's replicas do, so md.keras's run differs
from one device; with ``dropout_rate=0`` (p39) it equals one device. Shrunk: 48 nodes of 12 features, 96 random citations,
4 classes, hidden units [16, 16], batch 16, 2 epochs.
"""

import numpy as np

SOURCE = "https://keras.io/examples/graph/gnn_citations/"
hidden_units = [16, 16]
learning_rate = 0.01
num_epochs = 2
batch_size = 16


def run(keras, strategy, workdir, scale=1, dropout_rate=0.5):
    layers, ops = keras.layers, keras.ops

    def create_ffn(hidden_units, dropout_rate, name=None):
        fnn_layers = []
        for units in hidden_units:
            fnn_layers.append(layers.BatchNormalization())
            fnn_layers.append(layers.Dropout(dropout_rate))
            fnn_layers.append(layers.Dense(units, activation=keras.activations.gelu))
        return keras.Sequential(fnn_layers, name=name)

    class GraphConvLayer(layers.Layer):
        def __init__(self, hidden_units, dropout_rate=0.2, aggregation_type="mean", combination_type="concat",
                     normalize=False, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.aggregation_type = aggregation_type
            self.combination_type = combination_type
            self.normalize = normalize
            self.ffn_prepare = create_ffn(hidden_units, dropout_rate)
            self.update_fn = create_ffn(hidden_units, dropout_rate)

        def prepare(self, node_repesentations, weights=None):
            # node_repesentations shape is [num_edges, embedding_dim].
            messages = self.ffn_prepare(node_repesentations)
            if weights is not None:
                messages = messages * ops.expand_dims(weights, -1)
            return messages

        def aggregate(self, node_indices, neighbour_messages, node_repesentations):
            # node_indices shape is [num_edges].
            # neighbour_messages shape: [num_edges, representation_dim].
            # node_repesentations shape is [num_nodes, representation_dim]
            num_nodes = node_repesentations.shape[0]
            if self.aggregation_type == "sum":
                aggregated_message = ops.segment_sum(neighbour_messages, node_indices, num_segments=num_nodes)
            else:
                raise ValueError(f"Invalid aggregation type: {self.aggregation_type}.")
            return aggregated_message

        def update(self, node_repesentations, aggregated_messages):
            # node_repesentations shape is [num_nodes, representation_dim].
            # aggregated_messages shape is [num_nodes, representation_dim].
            if self.combination_type == "concat":
                # Concatenate the node_repesentations and aggregated_messages.
                h = ops.concatenate([node_repesentations, aggregated_messages], axis=1)
            elif self.combination_type == "add":
                # Add node_repesentations and aggregated_messages.
                h = node_repesentations + aggregated_messages
            else:
                raise ValueError(f"Invalid combination type: {self.combination_type}.")
            # Apply the processing function.
            node_embeddings = self.update_fn(h)
            if self.normalize:
                node_embeddings = ops.normalize(node_embeddings, axis=-1)
            return node_embeddings

        def call(self, inputs):
            """Process the inputs to produce the node_embeddings.

            inputs: a tuple of three elements: node_repesentations, edges, edge_weights.
            Returns: node_embeddings of shape [num_nodes, representation_dim].
            """
            node_repesentations, edges, edge_weights = inputs
            # Get node_indices (source) and neighbour_indices (target) from edges.
            node_indices, neighbour_indices = edges[0], edges[1]
            # neighbour_repesentations shape is [num_edges, representation_dim].
            neighbour_repesentations = ops.take(node_repesentations, neighbour_indices, axis=0)
            # Prepare the messages of the neighbours.
            neighbour_messages = self.prepare(neighbour_repesentations, edge_weights)
            # Aggregate the neighbour messages.
            aggregated_messages = self.aggregate(node_indices, neighbour_messages, node_repesentations)
            # Update the node embedding with the neighbour messages.
            return self.update(node_repesentations, aggregated_messages)

    class GNNNodeClassifier(keras.Model):
        def __init__(self, graph_info, num_classes, hidden_units, aggregation_type="sum", combination_type="concat",
                     dropout_rate=0.2, normalize=True, *args, **kwargs):
            super().__init__(*args, **kwargs)
            # Unpack graph_info to three elements: node_features, edges, and edge_weight.
            node_features, edges, edge_weights = graph_info
            self.node_features = node_features
            self.edges = edges
            self.edge_weights = edge_weights
            # Set edge_weights to ones if not provided.
            if self.edge_weights is None:
                self.edge_weights = ops.ones(shape=edges.shape[1])
            # Scale edge_weights to sum to 1.
            self.edge_weights = self.edge_weights / ops.sum(self.edge_weights)
            # Create a process layer.
            self.preprocess = create_ffn(hidden_units, dropout_rate, name="preprocess")
            # Create the first GraphConv layer.
            self.conv1 = GraphConvLayer(hidden_units, dropout_rate, aggregation_type, combination_type, normalize,
                                        name="graph_conv1")
            # Create the second GraphConv layer.
            self.conv2 = GraphConvLayer(hidden_units, dropout_rate, aggregation_type, combination_type, normalize,
                                        name="graph_conv2")
            # Create a postprocess layer.
            self.postprocess = create_ffn(hidden_units, dropout_rate, name="postprocess")
            # Create a compute logits layer.
            self.compute_logits = layers.Dense(units=num_classes, name="logits")

        def call(self, input_node_indices):
            # Preprocess the node_features to produce node representations.
            x = self.preprocess(self.node_features)
            # Apply the first graph conv layer.
            x1 = self.conv1((x, self.edges, self.edge_weights))
            # Skip connection.
            x = x1 + x
            # Apply the second graph conv layer.
            x2 = self.conv2((x, self.edges, self.edge_weights))
            # Skip connection.
            x = x2 + x
            # Postprocess node embedding.
            x = self.postprocess(x)
            # Fetch node embeddings for the input node_indices.
            node_embeddings = ops.take(x, ops.squeeze(input_node_indices), axis=0)
            # Compute logits
            return self.compute_logits(node_embeddings)

    rng = np.random.RandomState(0)
    num_nodes, num_classes = 48, 4
    node_features = ops.convert_to_tensor(rng.randint(0, 2, (num_nodes, 12)).astype("float32"))
    edges = ops.convert_to_tensor(np.stack([rng.randint(0, num_nodes, 96), rng.randint(0, num_nodes, 96)]))
    graph_info = (node_features, edges, None)
    x_train = np.arange(num_nodes * scale).reshape(-1, 1) % num_nodes
    y_train = rng.randint(0, num_classes, num_nodes * scale)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        gnn_model = GNNNodeClassifier(graph_info=graph_info, num_classes=num_classes, hidden_units=hidden_units,
                                      dropout_rate=dropout_rate, name="gnn_model")
        gnn_model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")])
    # Create an early stopping callback.
    early_stopping = keras.callbacks.EarlyStopping(monitor="val_acc", patience=50, restore_best_weights=True)
    history = gnn_model.fit(x=x_train, y=y_train, epochs=num_epochs, batch_size=batch_size, validation_split=0.25,
                            callbacks=[early_stopping], verbose=0)
    results = gnn_model.evaluate(x=x_train[:16], y=y_train[:16], verbose=0)
    return {"_model": gnn_model, "history": history.history, "evaluate": results,
            "logits": gnn_model.predict(x_train[:8], verbose=0)}
