"""Two of keras.io's keras_recipes: endpoint_layer_pattern as printed (a ``LogisticEndpoint`` layer that takes
the targets and sample weights as model inputs and ``add_loss``es a ``BinaryCrossentropy(from_logits=True)``, a
model compiled with only an optimizer and fit on a dict with no ``y``), and memory_efficient_embeddings'
``QREmbedding`` (quotient-remainder: two small ``Embedding``s multiplied) and ``MDEmbedding`` (mixed-dimension
blocks, each projected by a ``Dense`` to the base dimension and masked by block) in a small rating model.

The embeddings recipe maps string ids through ``StringLookup`` and ``tf.lookup.StaticHashTable`` (TensorFlow
ops); here the ids are integers already, so the lookups are ``keras.ops`` arithmetic (``floor_divide``,
``mod``, comparisons with each block's id range). Shrunk: 16 features for the endpoint model, 256 examples,
a vocabulary of 60 ids in 8 buckets, blocks of 10/20/30 ids with 8/4/2 dimensions, batch 32, 2 epochs.
"""

import numpy as np

SOURCE = "https://keras.io/examples/keras_recipes/endpoint_layer_pattern/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class LogisticEndpoint(keras.layers.Layer):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

        def call(self, logits, targets=None, sample_weight=None):
            if targets is not None:
                # Compute the training-time loss value and add it
                # to the layer using `self.add_loss()`.
                loss = self.loss_fn(targets, logits, sample_weight)
                self.add_loss(loss)
            # Return the inference-time prediction tensor (for `.predict()`).
            return ops.softmax(logits)

    class QREmbedding(keras.layers.Layer):
        def __init__(self, vocabulary_size, embedding_dim, num_buckets, name=None):
            super().__init__(name=name)
            self.num_buckets = num_buckets
            self.q_embeddings = layers.Embedding(vocabulary_size // num_buckets + 1, embedding_dim)
            self.r_embeddings = layers.Embedding(num_buckets, embedding_dim)

        def call(self, inputs):
            # Get the quotient index.
            quotient_index = ops.floor_divide(inputs, self.num_buckets)
            # Get the reminder index.
            remainder_index = ops.mod(inputs, self.num_buckets)
            # Lookup the quotient_embedding using the quotient_index.
            quotient_embedding = self.q_embeddings(quotient_index)
            # Lookup the remainder_embedding using the remainder_index.
            remainder_embedding = self.r_embeddings(remainder_index)
            # Use multiplication as a combiner operation
            return quotient_embedding * remainder_embedding

    class MDEmbedding(keras.layers.Layer):
        def __init__(self, blocks_sizes, blocks_embedding_dims, base_embedding_dim, name=None):
            super().__init__(name=name)
            self.num_blocks = len(blocks_sizes)
            self.base_embedding_dim = base_embedding_dim
            self.starts = list(np.cumsum([0] + list(blocks_sizes))[:-1])
            self.sizes = list(blocks_sizes)
            self.block_embedding_encoders = []
            self.block_embedding_projectors = []
            # Create block embedding encoders and projectors.
            for idx in range(self.num_blocks):
                embedding_dim = blocks_embedding_dims[idx]
                self.block_embedding_encoders.append(layers.Embedding(blocks_sizes[idx] + 1, embedding_dim))
                if embedding_dim == base_embedding_dim:
                    self.block_embedding_projectors.append(layers.Lambda(lambda x: x))
                else:
                    self.block_embedding_projectors.append(layers.Dense(units=base_embedding_dim))

        def call(self, inputs):
            embeddings = ops.zeros((ops.shape(inputs)[0], self.base_embedding_dim))
            for idx in range(self.num_blocks):
                start, size = int(self.starts[idx]), self.sizes[idx]
                in_block = ops.logical_and(inputs >= start, inputs < start + size)
                # Ids of other blocks look up the out-of-vocabulary row (index `size`), then are masked out.
                local = ops.where(in_block, inputs - start, size)
                block_embeddings = self.block_embedding_encoders[idx](local)
                # Project embeddings to base_embedding_dim.
                block_embeddings = self.block_embedding_projectors[idx](block_embeddings)
                # Create a mask to filter out embeddings of items that do not belong to the current block.
                mask = ops.expand_dims(ops.cast(in_block, "float32"), 1)
                # Set the embeddings for the items not belonging to the current block to zeros.
                embeddings = embeddings + block_embeddings * mask
            return embeddings

    rng = np.random.RandomState(0)
    n = 256 * scale
    out = {}
    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input((16,), name="inputs")
        logits = keras.layers.Dense(1)(inputs)
        targets = keras.Input((1,), name="targets")
        sample_weight = keras.Input((1,), name="sample_weight")
        preds = LogisticEndpoint()(logits, targets, sample_weight)
        model = keras.Model([inputs, targets, sample_weight], preds)
        model.compile(keras.optimizers.Adam(1e-2))
    data = {
        "inputs": rng.random((n, 16)).astype("float32"),
        "targets": rng.random((n, 1)).astype("float32"),
        "sample_weight": rng.random((n, 1)).astype("float32"),
    }
    out["endpoint"] = model.fit(data, epochs=2, batch_size=32, verbose=0).history
    out["endpoint_predict"] = model.predict(data, batch_size=32, verbose=0)[:4]

    users = rng.randint(0, 60, (n, 1))
    items = rng.randint(0, 60, (n, 1))
    ratings = ((users * 7 + items * 3) % 11 / 10.0).astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        user_input = keras.Input(shape=(1,), name="user_id", dtype="int32")
        item_input = keras.Input(shape=(1,), name="item_id", dtype="int32")
        user_embedding = layers.Reshape((8,))(QREmbedding(60, 8, num_buckets=8)(user_input))
        item_embedding = MDEmbedding([10, 20, 30], [8, 4, 2], base_embedding_dim=8)(ops.squeeze(item_input, 1))
        prediction = ops.sum(user_embedding * item_embedding, axis=1, keepdims=True)
        recommender = keras.Model([user_input, item_input], prediction)
        recommender.compile(optimizer=keras.optimizers.Adam(0.01), loss=keras.losses.MeanSquaredError(),
                            metrics=[keras.metrics.MeanAbsoluteError(name="mae")])
    out["embeddings"] = recommender.fit([users, items], ratings, batch_size=32, epochs=2, verbose=0).history
    out["embeddings_predict"] = recommender.predict([users[:4], items[:4]], verbose=0)
    return {"_model": recommender, **out}
