"""keras.io/examples/nlp/ner_transformers' model (shared by p60 and p61): ``TokenAndPositionEmbedding``, a
``TransformerBlock`` (``MultiHeadAttention``, ``Dropout``, ``LayerNormalization``), a subclassed ``NERModel`` with
dropout and a softmax over the tags; synthetic sentences of 3..12 tokens padded with 0 to 12, tags 0 on padding.
"""

import numpy as np

SOURCE = "https://keras.io/examples/nlp/ner_transformers/"
NUM_TAGS, VOCAB_SIZE, MAXLEN = 5, 30, 12


def data(scale=1):
    """``(tokens, tags)`` padded with 0: a token's tag is its id modulo 4, plus 1 (0 marks padding)."""
    rng = np.random.RandomState(0)
    n = 96 * scale
    lengths = rng.randint(3, MAXLEN + 1, n)
    tokens = np.zeros((n, MAXLEN), "int64")
    for i, length in enumerate(lengths):
        tokens[i, :length] = rng.randint(1, VOCAB_SIZE, length)
    tags = np.where(tokens > 0, tokens % (NUM_TAGS - 1) + 1, 0)
    return tokens, tags


def ner_model(keras):
    """A fresh ``NERModel`` as printed (embed_dim 16, 2 heads, ff_dim 16)."""
    layers, ops = keras.layers, keras.ops

    class TransformerBlock(layers.Layer):
        def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
            super().__init__()
            self.att = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
            self.ffn = keras.Sequential([keras.layers.Dense(ff_dim, activation="relu"), keras.layers.Dense(embed_dim)])
            self.layernorm1 = keras.layers.LayerNormalization(epsilon=1e-6)
            self.layernorm2 = keras.layers.LayerNormalization(epsilon=1e-6)
            self.dropout1 = keras.layers.Dropout(rate)
            self.dropout2 = keras.layers.Dropout(rate)

        def call(self, inputs, training=False):
            attn_output = self.att(inputs, inputs)
            attn_output = self.dropout1(attn_output, training=training)
            out1 = self.layernorm1(inputs + attn_output)
            ffn_output = self.ffn(out1)
            ffn_output = self.dropout2(ffn_output, training=training)
            return self.layernorm2(out1 + ffn_output)

    class TokenAndPositionEmbedding(layers.Layer):
        def __init__(self, maxlen, vocab_size, embed_dim):
            super().__init__()
            self.token_emb = keras.layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
            self.pos_emb = keras.layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

        def call(self, inputs):
            maxlen = ops.shape(inputs)[-1]
            positions = ops.arange(start=0, stop=maxlen, step=1)
            position_embeddings = self.pos_emb(positions)
            token_embeddings = self.token_emb(inputs)
            return token_embeddings + position_embeddings

    class NERModel(keras.Model):
        def __init__(self, num_tags, vocab_size, maxlen=128, embed_dim=32, num_heads=2, ff_dim=32):
            super().__init__()
            self.embedding_layer = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)
            self.transformer_block = TransformerBlock(embed_dim, num_heads, ff_dim)
            self.dropout1 = layers.Dropout(0.1)
            self.ff = layers.Dense(ff_dim, activation="relu")
            self.dropout2 = layers.Dropout(0.1)
            self.ff_final = layers.Dense(num_tags, activation="softmax")

        def call(self, inputs, training=False):
            x = self.embedding_layer(inputs)
            x = self.transformer_block(x)
            x = self.dropout1(x, training=training)
            x = self.ff(x)
            x = self.dropout2(x, training=training)
            x = self.ff_final(x)
            return x

    return NERModel(NUM_TAGS, VOCAB_SIZE, maxlen=MAXLEN, embed_dim=16, num_heads=2, ff_dim=16)


def tag_accuracy(keras, model, tokens, tags):
    """The example's evaluation: argmax tags of the non-padding tokens predicted as entities, compared."""
    ops = keras.ops
    output = model.predict(tokens, verbose=0)
    predictions = ops.convert_to_numpy(ops.reshape(ops.argmax(output, axis=-1), [-1]))
    true_tag_ids = tags.reshape(-1)
    mask = (true_tag_ids > 0) & (predictions > 0)
    return float((true_tag_ids[mask] == predictions[mask]).mean()) if mask.any() else 0.0, output
