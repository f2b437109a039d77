"""keras.io/examples/nlp/text_classification_with_transformer: a ``TransformerBlock`` and a
``TokenAndPositionEmbedding`` layer (``keras.ops.shape``/``arange``), subclassed layers in a functional model.

Shrunk: vocabulary 100, maxlen 16, embed_dim 8, 2 heads, ff_dim 8, 64 reviews, 2 epochs; Dropout rates 0.
"""

import numpy as np

SOURCE = "https://keras.io/examples/nlp/text_classification_with_transformer/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class TransformerBlock(layers.Layer):
        def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
            super().__init__()
            self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
            self.ffn = keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
            self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
            self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
            self.dropout1 = layers.Dropout(rate)
            self.dropout2 = layers.Dropout(rate)

        def call(self, inputs):
            attn_output = self.att(inputs, inputs)
            attn_output = self.dropout1(attn_output)
            out1 = self.layernorm1(inputs + attn_output)
            ffn_output = self.ffn(out1)
            ffn_output = self.dropout2(ffn_output)
            return self.layernorm2(out1 + ffn_output)

    class TokenAndPositionEmbedding(layers.Layer):
        def __init__(self, maxlen, vocab_size, embed_dim):
            super().__init__()
            self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
            self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

        def call(self, x):
            maxlen = ops.shape(x)[-1]
            positions = ops.arange(start=0, stop=maxlen, step=1)
            positions = self.pos_emb(positions)
            x = self.token_emb(x)
            return x + positions

    vocab_size, maxlen, embed_dim, num_heads, ff_dim = 100, 16, 8, 2, 8
    rng = np.random.RandomState(0)
    x_train = keras.utils.pad_sequences([list(rng.randint(1, vocab_size, rng.randint(4, 17)))
                                         for _ in range(64 * scale)], maxlen=maxlen)
    y_train = rng.randint(0, 2, 64 * scale)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = layers.Input(shape=(maxlen,))
        x = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)(inputs)
        x = TransformerBlock(embed_dim, num_heads, ff_dim, rate=0.0)(x)
        x = layers.GlobalAveragePooling1D()(x)
        x = layers.Dropout(0.0)(x)
        x = layers.Dense(8, activation="relu")(x)
        outputs = layers.Dense(2, activation="softmax")(x)
        model = keras.Model(inputs=inputs, outputs=outputs)
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(x_train, y_train, batch_size=16, epochs=2, validation_data=(x_train[:16], y_train[:16]),
                        verbose=0)
    return {"_model": model, "history": history.history, "predict": model.predict(x_train[:4], verbose=0)}
