"""keras.io/examples/keras_recipes/memory_efficient_embeddings as printed (Keras 3 on TensorFlow there): a
``QREmbedding`` layer (quotient and remainder of the item index by ``num_buckets``, ``floordiv``/``floormod``, two
``Embedding`` tables, their product) for the users and an ``MDEmbedding`` layer for the movies (one ``keras.
Sequential`` embedding encoder per popularity block, a ``Dense`` projector, or ``layers.Lambda(lambda x: x)`` where
the block has the full dimension; ``tf.zeros(shape=(tf.shape(inputs)[0], base_embedding_dim))`` accumulated with
``embeddings += block_embeddings * mask``); ``layers.Dot(axes=1)`` of the two and
``keras.activations.sigmoid(logits) * 5`` on functional tensors; a model of ``inputs=[user_input, movie_input]`` fed
a DICT of features keyed by the inputs' names (make_csv_dataset's), ``MeanSquaredError``, ``MeanAbsoluteError(
name="mae")``, validation data. The baseline model is trained too.

The string lookups (``StringLookup``, ``tf.lookup.StaticHashTable``) are integer tables here: the ids are the
vocabulary indices, the block of each movie and its index inside the block (0: the block's OOV, as
``num_oov_indices=1``) are ``ops.take`` of constant tables. MovieLens is a made-up table of 40 users, 30 movies and
512 ratings. Shrunk: learning rate 0.02 (0.001: it moves in 16 steps), batch 64 (128), 2 epochs (3), base_embedding_dim 8 (64), blocks [8, 4, 2] ([64, 32, 16]),
user buckets 40 // 5 (// 50).
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/keras_recipes/memory_efficient_embeddings/"
num_users, num_movies, learning_rate, batch_size, num_epochs, base_embedding_dim = 40, 30, 0.02, 64, 2, 8


def ratings(rng, n):
    popularity = np.arange(num_movies, 0, -1, dtype="float64") ** 1.5
    movie = rng.choice(num_movies, n, p=popularity / popularity.sum())
    user = rng.randint(0, num_users, n)
    rating = np.clip(np.round(2.5 + np.sin(user) + np.cos(movie) + rng.normal(0, 0.5, n)), 1, 5)
    return {"user_id": user.astype("int64"), "movie_id": movie.astype("int64")}, rating.astype("float32")


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    rng = np.random.RandomState(0)
    train_x, train_y = ratings(rng, 512 * scale)
    eval_x, eval_y = ratings(rng, 128)
    user_vocabulary = list(range(num_users))
    movie_frequencies = np.bincount(train_x["movie_id"], minlength=num_movies)
    sorted_movie_vocabulary = list(np.argsort(-movie_frequencies, kind="stable"))
    movie_blocks_vocabulary = [sorted_movie_vocabulary[:6], sorted_movie_vocabulary[6:16],
                               sorted_movie_vocabulary[16:]]
    movie_blocks_embedding_dims = [8, 4, 2]
    user_embedding_num_buckets = len(user_vocabulary) // 5

    def run_experiment(model):
        model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=keras.losses.MeanSquaredError(),
                      metrics=[keras.metrics.MeanAbsoluteError(name="mae")])
        train_dataset = md.data.Dataset.from_tensor_slices((train_x, train_y)).shuffle(1024, seed=0).batch(batch_size)
        eval_dataset = md.data.Dataset.from_tensor_slices((eval_x, eval_y)).batch(batch_size)
        history = model.fit(train_dataset, epochs=num_epochs, validation_data=eval_dataset, verbose=0)
        return history

    def block_lookup(vocabulary, num_oov_indices):
        """The index of each movie id in ``vocabulary`` (StringLookup's, OOV first): an ``ops.take`` table."""
        table = np.zeros(num_movies, "int64")
        table[np.asarray(vocabulary, "int64")] = np.arange(len(vocabulary)) + num_oov_indices
        return layers.Lambda(lambda ids: ops.take(ops.convert_to_tensor(table), ids))

    def embedding_encoder(vocabulary, embedding_dim, num_oov_indices=0, name=None):
        return keras.Sequential([
            block_lookup(vocabulary, num_oov_indices),
            layers.Embedding(input_dim=len(vocabulary) + num_oov_indices, output_dim=embedding_dim),
        ], name=f"{name}_embedding" if name else None)

    class QREmbedding(keras.layers.Layer):
        def __init__(self, vocabulary, embedding_dim, num_buckets, name=None):
            super(QREmbedding, self).__init__(name=name)
            self.num_buckets = num_buckets
            self.q_embeddings = layers.Embedding(num_buckets, embedding_dim,)
            self.r_embeddings = layers.Embedding(num_buckets, embedding_dim,)

        def call(self, inputs):
            embedding_index = inputs   # the user id is its vocabulary index
            quotient_index = ops.floor_divide(embedding_index, self.num_buckets)
            remainder_index = ops.mod(embedding_index, self.num_buckets)
            quotient_embedding = self.q_embeddings(quotient_index)
            remainder_embedding = self.r_embeddings(remainder_index)
            return quotient_embedding * remainder_embedding

    class MDEmbedding(keras.layers.Layer):
        def __init__(self, blocks_vocabulary, blocks_embedding_dims, base_embedding_dim, name=None):
            super(MDEmbedding, self).__init__(name=name)
            self.num_blocks = len(blocks_vocabulary)
            keys = []
            values = []
            for block_idx, block_vocab in enumerate(blocks_vocabulary):
                keys.extend(block_vocab)
                values.extend([block_idx] * len(block_vocab))
            table = np.full(num_movies, -1, "int64")
            table[np.asarray(keys, "int64")] = values
            self.vocab_to_block = table
            self.block_embedding_encoders = []
            self.block_embedding_projectors = []
            for idx in range(self.num_blocks):
                vocabulary = blocks_vocabulary[idx]
                embedding_dim = blocks_embedding_dims[idx]
                block_embedding_encoder = embedding_encoder(vocabulary, embedding_dim, num_oov_indices=1)
                self.block_embedding_encoders.append(block_embedding_encoder)
                if embedding_dim == base_embedding_dim:
                    self.block_embedding_projectors.append(layers.Lambda(lambda x: x))
                else:
                    self.block_embedding_projectors.append(layers.Dense(units=base_embedding_dim))

        def call(self, inputs):
            block_indicies = ops.take(ops.convert_to_tensor(self.vocab_to_block), inputs)
            embeddings = ops.zeros(shape=(ops.shape(inputs)[0], base_embedding_dim))
            for idx in range(self.num_blocks):
                block_embeddings = self.block_embedding_encoders[idx](inputs)
                block_embeddings = self.block_embedding_projectors[idx](block_embeddings)
                mask = ops.expand_dims(ops.cast(block_indicies == idx, "float32"), 1)
                block_embeddings = block_embeddings * mask
                embeddings += block_embeddings
            return embeddings

    def create_baseline_model():
        user_input = layers.Input(name="user_id", shape=(), dtype="int64")
        user_embedding = layers.Embedding(num_users, base_embedding_dim, name="user_embedding")(user_input)
        movie_input = layers.Input(name="movie_id", shape=(), dtype="int64")
        movie_embedding = embedding_encoder(vocabulary=sorted_movie_vocabulary, embedding_dim=base_embedding_dim,
                                            name="movie")(movie_input)
        logits = layers.Dot(axes=1, name="dot_similarity")([user_embedding, movie_embedding])
        prediction = keras.activations.sigmoid(logits) * 5
        return keras.Model(inputs=[user_input, movie_input], outputs=prediction, name="baseline_model")

    def create_memory_efficient_model():
        user_input = layers.Input(name="user_id", shape=(), dtype="int64")
        user_embedding = QREmbedding(vocabulary=user_vocabulary, embedding_dim=base_embedding_dim,
                                     num_buckets=user_embedding_num_buckets, name="user_embedding")(user_input)
        movie_input = layers.Input(name="movie_id", shape=(), dtype="int64")
        movie_embedding = MDEmbedding(blocks_vocabulary=movie_blocks_vocabulary,
                                      blocks_embedding_dims=movie_blocks_embedding_dims,
                                      base_embedding_dim=base_embedding_dim, name="movie_embedding")(movie_input)
        logits = layers.Dot(axes=1, name="dot_similarity")([user_embedding, movie_embedding])
        prediction = keras.activations.sigmoid(logits) * 5
        return keras.Model(inputs=[user_input, movie_input], outputs=prediction, name="baseline_model")

    keras.utils.set_random_seed(0)
    sample = {k: v[:8] for k, v in eval_x.items()}
    with strategy.scope():
        baseline_model = create_baseline_model()
    baseline = run_experiment(baseline_model)
    with strategy.scope():
        memory_efficient_model = create_memory_efficient_model()
    history = run_experiment(memory_efficient_model)
    return {"_model": memory_efficient_model, "baseline": baseline.history, "history": history.history,
            "params": [baseline_model.count_params(), memory_efficient_model.count_params()],
            "predict": memory_efficient_model.predict(sample, verbose=0)}
