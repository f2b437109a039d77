"""keras.io/examples/nlp/neural_machine_translation_with_transformer (English-to-Spanish): a sequence-to-sequence
Transformer with a ``PositionalEmbedding`` whose ``compute_mask`` masks the padding (token 0), a
``TransformerEncoder`` and a ``TransformerDecoder`` that take the mask (``supports_masking``, ``call(..., mask=None)``),
the decoder's causal attention mask (``get_causal_attention_mask``) combined with the padding mask, and the
two-input functional model trained with teacher forcing (targets shifted by one).

Shrunk: synthetic "sentence pairs" of token ids (vocabulary 24, sequence_length 6, zero padding; no
TextVectorization, which needs TensorFlow), embed_dim 8, latent_dim 8, 2 heads, 48 pairs, 1 epoch of batch 16;
the decoder's Dropout kept at keras.io's 0.5.
"""

import numpy as np

SOURCE = "https://keras.io/examples/nlp/neural_machine_translation_with_transformer/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class TransformerEncoder(layers.Layer):
        def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):
            super().__init__(**kwargs)
            self.embed_dim = embed_dim
            self.dense_dim = dense_dim
            self.num_heads = num_heads
            self.attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
            self.dense_proj = keras.Sequential([layers.Dense(dense_dim, activation="relu"), layers.Dense(embed_dim)])
            self.layernorm_1 = layers.LayerNormalization()
            self.layernorm_2 = layers.LayerNormalization()
            self.supports_masking = True

        def call(self, inputs, mask=None):
            if mask is not None:
                padding_mask = ops.cast(mask[:, None, :], dtype="int32")
            else:
                padding_mask = None
            attention_output = self.attention(query=inputs, value=inputs, key=inputs, attention_mask=padding_mask)
            proj_input = self.layernorm_1(inputs + attention_output)
            proj_output = self.dense_proj(proj_input)
            return self.layernorm_2(proj_input + proj_output)

    class PositionalEmbedding(layers.Layer):
        def __init__(self, sequence_length, vocab_size, embed_dim, **kwargs):
            super().__init__(**kwargs)
            self.token_embeddings = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
            self.position_embeddings = layers.Embedding(input_dim=sequence_length, output_dim=embed_dim)
            self.sequence_length = sequence_length
            self.vocab_size = vocab_size
            self.embed_dim = embed_dim

        def call(self, inputs):
            length = ops.shape(inputs)[-1]
            positions = ops.arange(0, length, 1)
            embedded_tokens = self.token_embeddings(inputs)
            embedded_positions = self.position_embeddings(positions)
            return embedded_tokens + embedded_positions

        def compute_mask(self, inputs, mask=None):
            return ops.not_equal(inputs, 0)

    class TransformerDecoder(layers.Layer):
        def __init__(self, embed_dim, latent_dim, num_heads, **kwargs):
            super().__init__(**kwargs)
            self.embed_dim = embed_dim
            self.latent_dim = latent_dim
            self.num_heads = num_heads
            self.attention_1 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
            self.attention_2 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
            self.dense_proj = keras.Sequential([layers.Dense(latent_dim, activation="relu"), layers.Dense(embed_dim)])
            self.layernorm_1 = layers.LayerNormalization()
            self.layernorm_2 = layers.LayerNormalization()
            self.layernorm_3 = layers.LayerNormalization()
            self.supports_masking = True

        def call(self, inputs, encoder_outputs, mask=None):
            causal_mask = self.get_causal_attention_mask(inputs)
            if mask is not None:
                padding_mask = ops.cast(mask[:, None, :], dtype="int32")
                padding_mask = ops.minimum(padding_mask, causal_mask)
            else:
                padding_mask = None
            attention_output_1 = self.attention_1(query=inputs, value=inputs, key=inputs,
                                                  attention_mask=causal_mask)
            out_1 = self.layernorm_1(inputs + attention_output_1)
            attention_output_2 = self.attention_2(query=out_1, value=encoder_outputs, key=encoder_outputs,
                                                  attention_mask=padding_mask)
            out_2 = self.layernorm_2(out_1 + attention_output_2)
            proj_output = self.dense_proj(out_2)
            return self.layernorm_3(out_2 + proj_output)

        def get_causal_attention_mask(self, inputs):
            input_shape = ops.shape(inputs)
            batch_size, sequence_length = input_shape[0], input_shape[1]
            i = ops.arange(sequence_length)[:, None]
            j = ops.arange(sequence_length)
            mask = ops.cast(i >= j, dtype="int32")
            mask = ops.reshape(mask, (1, input_shape[1], input_shape[1]))
            mult = ops.concatenate([ops.expand_dims(batch_size, -1), ops.convert_to_tensor([1, 1])], axis=0)
            return ops.tile(mask, mult)

    vocab_size, sequence_length, embed_dim, latent_dim, num_heads = 24, 6, 8, 8, 2
    rng = np.random.RandomState(0)
    n = 48 * scale

    def sentences(length_low):   # token ids 2.. with zero padding; 1 starts a target ("[start]")
        out = np.zeros((n, sequence_length + 1), dtype="int64")
        for row in out:
            k = rng.randint(length_low, sequence_length)
            row[:k] = rng.randint(2, vocab_size, k)
        return out

    eng = sentences(2)[:, :sequence_length]
    spa = sentences(2)
    spa[:, 1:] = spa[:, :-1]
    spa[:, 0] = 1
    x = {"encoder_inputs": eng, "decoder_inputs": spa[:, :-1]}
    y = spa[:, 1:]

    keras.utils.set_random_seed(0)
    with strategy.scope():
        encoder_inputs = keras.Input(shape=(None,), dtype="int64", name="encoder_inputs")
        e = PositionalEmbedding(sequence_length, vocab_size, embed_dim)(encoder_inputs)
        encoder_outputs = TransformerEncoder(embed_dim, latent_dim, num_heads)(e)
        encoder = keras.Model(encoder_inputs, encoder_outputs)

        decoder_inputs = keras.Input(shape=(None,), dtype="int64", name="decoder_inputs")
        encoded_seq_inputs = keras.Input(shape=(None, embed_dim), name="decoder_state_inputs")
        d = PositionalEmbedding(sequence_length, vocab_size, embed_dim)(decoder_inputs)
        d = TransformerDecoder(embed_dim, latent_dim, num_heads)(d, encoded_seq_inputs)
        d = layers.Dropout(0.5)(d)
        decoder_outputs = layers.Dense(vocab_size, activation="softmax")(d)
        decoder = keras.Model([decoder_inputs, encoded_seq_inputs], decoder_outputs)

        decoder_outputs = decoder([decoder_inputs, encoder_outputs])
        transformer = keras.Model([encoder_inputs, decoder_inputs], decoder_outputs, name="transformer")
        transformer.compile("rmsprop", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = transformer.fit([x["encoder_inputs"], x["decoder_inputs"]], y, batch_size=16, epochs=1, verbose=0,
                              validation_data=([eng[:16], spa[:16, :-1]], y[:16]))
    return {"_model": transformer, "history": history.history,
            "predict": transformer.predict([eng[:4], spa[:4, :-1]], verbose=0)}
