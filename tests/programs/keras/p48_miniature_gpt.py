"""keras.io/examples/generative/text_generation_with_miniature_gpt as printed (Keras 3 text), with the data
pipeline replaced: ``causal_attention_mask`` (``ops.arange`` comparison, ``ops.tile`` by a shape built with
``ops.concatenate([ops.expand_dims(batch_size, -1), ops.convert_to_tensor([1, 1])], 0)``), a
``TransformerBlock`` (``MultiHeadAttention`` with ``attention_mask``, Dropout, LayerNormalization),
``TokenAndPositionEmbedding``, a model with two outputs compiled with ``loss=[loss_fn, None]``, and the
``TextGenerator`` callback that, at each epoch's end, generates tokens one ``self.model.predict`` of one
sequence at a time (``ops.top_k``, ``keras.activations.softmax``, ``np.random.choice``).

The example reads IMDB reviews through ``TextVectorization`` and a ``tf.data`` pipeline; here the token ids
are synthetic (a seeded walk over a 40-word vocabulary) and fed as numpy arrays. Shrunk: maxlen 12, 96
sequences, embed_dim 16, 2 heads, feed-forward 16, batch 16, 2 epochs, 4 generated tokens per epoch.
"""

import numpy as np

SOURCE = "https://keras.io/examples/generative/text_generation_with_miniature_gpt/"
vocab_size = 40  # Only consider the top 20k words
maxlen = 12  # Max sequence size
embed_dim = 16  # Embedding size for each token
num_heads = 2  # Number of attention heads
feed_forward_dim = 16  # Hidden layer size in feed forward network inside transformer


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    def causal_attention_mask(batch_size, n_dest, n_src, dtype):
        """
        Mask the upper half of the dot product matrix in self attention.
        This prevents flow of information from future tokens to current token.
        1's in the lower triangle, counting from the lower right corner.
        """
        i = ops.arange(n_dest)[:, None]
        j = ops.arange(n_src)
        m = i >= j - n_src + n_dest
        mask = ops.cast(m, dtype)
        mask = ops.reshape(mask, [1, n_dest, n_src])
        mult = ops.concatenate([ops.expand_dims(batch_size, -1), ops.convert_to_tensor([1, 1])], 0)
        return ops.tile(mask, mult)

    class TransformerBlock(layers.Layer):
        def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
            super().__init__()
            self.att = layers.MultiHeadAttention(num_heads, embed_dim)
            self.ffn = keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
            self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
            self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
            self.dropout1 = layers.Dropout(rate)
            self.dropout2 = layers.Dropout(rate)

        def call(self, inputs):
            input_shape = ops.shape(inputs)
            batch_size = input_shape[0]
            seq_len = input_shape[1]
            causal_mask = causal_attention_mask(batch_size, seq_len, seq_len, "bool")
            attention_output = self.att(inputs, inputs, attention_mask=causal_mask)
            attention_output = self.dropout1(attention_output)
            out1 = self.layernorm1(inputs + attention_output)
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
            positions = ops.arange(0, maxlen, 1)
            positions = self.pos_emb(positions)
            x = self.token_emb(x)
            return x + positions

    def create_model():
        inputs = layers.Input(shape=(maxlen,), dtype="int32")
        embedding_layer = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)
        x = embedding_layer(inputs)
        transformer_block = TransformerBlock(embed_dim, num_heads, feed_forward_dim)
        x = transformer_block(x)
        outputs = layers.Dense(vocab_size)(x)
        model = keras.Model(inputs=inputs, outputs=[outputs, x])
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        model.compile("adam", loss=[loss_fn, None])  # No loss and optimization based on word embeddings from transformer block
        return model

    class TextGenerator(keras.callbacks.Callback):
        """A callback to generate text from a trained model.
        1. Feed some starting prompt to the model
        2. Predict probabilities for the next token
        3. Sample the next token and add it to the next input
        """

        def __init__(self, max_tokens, start_tokens, index_to_word, top_k=10, print_every=1):
            self.max_tokens = max_tokens
            self.start_tokens = start_tokens
            self.index_to_word = index_to_word
            self.print_every = print_every
            self.k = top_k
            self.generated = []

        def sample_from(self, logits):
            logits, indices = ops.top_k(logits, k=self.k, sorted=True)
            indices = np.asarray(indices).astype("int32")
            preds = keras.activations.softmax(ops.expand_dims(logits, 0))[0]
            preds = np.asarray(preds).astype("float32")
            return np.random.choice(indices, p=preds / preds.sum())

        def detokenize(self, number):
            return self.index_to_word[number]

        def on_epoch_end(self, epoch, logs=None):
            start_tokens = [_ for _ in self.start_tokens]
            if (epoch + 1) % self.print_every != 0:
                return
            num_tokens_generated = 0
            tokens_generated = []
            while num_tokens_generated <= self.max_tokens:
                pad_len = maxlen - len(start_tokens)
                sample_index = len(start_tokens) - 1
                if pad_len < 0:
                    x = start_tokens[:maxlen]
                    sample_index = maxlen - 1
                elif pad_len > 0:
                    x = start_tokens + [0] * pad_len
                else:
                    x = start_tokens
                x = np.array([x])
                y, _ = self.model.predict(x, verbose=0)
                sample_token = self.sample_from(y[0][sample_index])
                tokens_generated.append(sample_token)
                start_tokens.append(sample_token)
                num_tokens_generated = len(tokens_generated)
            txt = " ".join([self.detokenize(_) for _ in self.start_tokens + tokens_generated])
            self.generated.append([int(t) for t in tokens_generated] + [len(txt)])

    rng = np.random.RandomState(0)
    steps = rng.randint(1, 4, (96 * scale, maxlen + 1))
    tokens = (np.cumsum(steps, axis=1) + rng.randint(0, vocab_size, (96 * scale, 1))) % (vocab_size - 2) + 2
    x_train, y_train = tokens[:, :-1].astype("int32"), tokens[:, 1:].astype("int32")
    vocab = ["", "[UNK]"] + [f"w{i}" for i in range(vocab_size - 2)]
    np.random.seed(0)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = create_model()
    text_gen_callback = TextGenerator(4, [7, 9, 11], vocab)
    history = model.fit(x_train, y_train, batch_size=16, epochs=2, callbacks=[text_gen_callback], verbose=0)
    logits, _ = model.predict(x_train[:4], verbose=0)
    return {"_model": model, "history": history.history, "generated": text_gen_callback.generated,
            "logits": logits[:, :, :8]}
