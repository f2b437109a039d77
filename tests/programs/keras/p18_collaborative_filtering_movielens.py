"""keras.io/examples/structured_data/collaborative_filtering_movielens: a subclassed ``RecommenderNet`` (user and
movie ``Embedding``s with an l2 ``embeddings_regularizer`` and per-id biases, ``ops.tensordot``, sigmoid),
``BinaryCrossentropy`` on ratings scaled to [0, 1], validation data.

Shrunk: synthetic ratings (20 users, 15 movies, 128 ratings of 0.5-5 stars), embedding size 4, batch 32,
2 epochs. As in keras.io, ``ops.tensordot(user_vector, movie_vector, 2)`` contracts the batch axis too: every
prediction adds one number summed over the whole batch.
"""

import numpy as np

SOURCE = "https://keras.io/examples/structured_data/collaborative_filtering_movielens/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    EMBEDDING_SIZE = 4

    class RecommenderNet(keras.Model):
        def __init__(self, num_users, num_movies, embedding_size, **kwargs):
            super().__init__(**kwargs)
            self.num_users = num_users
            self.num_movies = num_movies
            self.embedding_size = embedding_size
            self.user_embedding = layers.Embedding(num_users, embedding_size, embeddings_initializer="he_normal",
                                                   embeddings_regularizer=keras.regularizers.l2(1e-6))
            self.user_bias = layers.Embedding(num_users, 1)
            self.movie_embedding = layers.Embedding(num_movies, embedding_size, embeddings_initializer="he_normal",
                                                    embeddings_regularizer=keras.regularizers.l2(1e-6))
            self.movie_bias = layers.Embedding(num_movies, 1)

        def call(self, inputs):
            user_vector = self.user_embedding(inputs[:, 0])
            user_bias = self.user_bias(inputs[:, 0])
            movie_vector = self.movie_embedding(inputs[:, 1])
            movie_bias = self.movie_bias(inputs[:, 1])
            dot_user_movie = ops.tensordot(user_vector, movie_vector, 2)
            # Add all the components (including bias)
            x = dot_user_movie + user_bias + movie_bias
            # The sigmoid activation forces the rating to between 0 and 1
            return ops.nn.sigmoid(x)

    num_users, num_movies = 20, 15
    rng = np.random.RandomState(0)
    n = 128 * scale
    x = np.stack([rng.randint(0, num_users, n), rng.randint(0, num_movies, n)], axis=1).astype("int64")
    ratings = rng.randint(1, 11, n) / 2.0
    min_rating, max_rating = ratings.min(), ratings.max()
    y = ((ratings - min_rating) / (max_rating - min_rating)).astype("float32")
    train_indices = int(0.9 * n)
    x_train, x_val, y_train, y_val = x[:train_indices], x[train_indices:], y[:train_indices], y[train_indices:]
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = RecommenderNet(num_users, num_movies, EMBEDDING_SIZE)
        model.compile(loss=keras.losses.BinaryCrossentropy(), optimizer=keras.optimizers.Adam(learning_rate=0.001))
    history = model.fit(x=x_train, y=y_train, batch_size=32, epochs=2, verbose=0, validation_data=(x_val, y_val))
    return {"_model": model, "history": history.history, "predict": model.predict(x_val[:4], verbose=0)}
