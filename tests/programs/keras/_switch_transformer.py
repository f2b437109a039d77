"""keras.io/examples/nlp/text_classification_with_switch_transformer as printed (shared by p51 and p52).

A Mixture-of-Experts transformer block: a ``Router`` (``Dense`` logits, uniform noise in training, ``ops.top_k``,
``ops.one_hot`` dispatch within each expert's capacity) whose ``call`` adds the load-balancing loss with
``self.add_loss``, a ``Switch`` layer reshaping the batch's tokens to ``[num_tokens_per_batch, embed_dim]`` (a
Python constant computed from the batch size, as printed) and running one feed-forward expert per slot. The
layers set attributes before ``super().__init__()``, as printed. Shrunk: vocabulary 40, 8 tokens per example,
embedding 16, 2 heads, 4 experts, 128 training and 32 validation examples, batch 16, 1 epoch.
"""

import numpy as np

SOURCE = "https://keras.io/examples/nlp/text_classification_with_switch_transformer/"


def run_switch(keras, strategy, batch_size, num_tokens_per_batch, scale=1, init_first=False):
    """Build, fit and evaluate the classifier; ``num_tokens_per_batch`` is the constant the Switch reshapes to;
    ``init_first``: the Router and Switch call ``super().__init__()`` first (Keras 3's torch backend needs it)."""
    layers, ops = keras.layers, keras.ops
    vocab_size, num_tokens_per_example = 40, 8
    embed_dim, num_heads, ff_dim, num_experts = 16, 2, 16, 4
    dropout_rate, learning_rate = 0.25, 0.001

    def create_feedforward_network(ff_dim, embed_dim, name=None):
        return keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)], name=name)

    def load_balanced_loss(router_probs, expert_mask):
        num_experts = ops.shape(expert_mask)[-1]
        density = ops.mean(expert_mask, axis=0)
        density_proxy = ops.mean(router_probs, axis=0)
        loss = ops.mean(density_proxy * density) * ops.cast((num_experts**2), "float32")
        return loss

    class Router(layers.Layer):
        def __init__(self, num_experts, expert_capacity):
            if init_first:
                super().__init__()
            self.num_experts = num_experts
            self.route = layers.Dense(units=num_experts)
            self.expert_capacity = expert_capacity
            if not init_first:
                super().__init__()

        def call(self, inputs, training=False):
            router_logits = self.route(inputs)
            if training:
                router_logits += keras.random.uniform(shape=router_logits.shape, minval=0.9, maxval=1.1)
            router_probs = keras.activations.softmax(router_logits, axis=-1)
            expert_gate, expert_index = ops.top_k(router_probs, k=1)
            expert_mask = ops.one_hot(expert_index, self.num_experts)
            aux_loss = load_balanced_loss(router_probs, expert_mask)
            self.add_loss(aux_loss)
            position_in_expert = ops.cast(ops.cumsum(expert_mask, axis=0) * expert_mask, "int32")
            expert_mask *= ops.cast(ops.less(ops.cast(position_in_expert, "int32"), self.expert_capacity), "float32")
            expert_mask_flat = ops.sum(expert_mask, axis=-1)
            expert_gate *= expert_mask_flat
            combined_tensor = ops.expand_dims(
                expert_gate * expert_mask_flat * ops.squeeze(ops.one_hot(expert_index, self.num_experts), 1), -1,
            ) * ops.squeeze(ops.one_hot(position_in_expert, self.expert_capacity), 1)
            dispatch_tensor = ops.cast(combined_tensor, "float32")
            return dispatch_tensor, combined_tensor

    class Switch(layers.Layer):
        def __init__(self, num_experts, embed_dim, ff_dim, num_tokens_per_batch, capacity_factor=1):
            if init_first:
                super().__init__()
            self.num_experts = num_experts
            self.embed_dim = embed_dim
            self.experts = [create_feedforward_network(ff_dim, embed_dim) for _ in range(num_experts)]
            self.expert_capacity = num_tokens_per_batch // self.num_experts
            self.router = Router(self.num_experts, self.expert_capacity)
            if not init_first:
                super().__init__()

        def call(self, inputs):
            batch_size = ops.shape(inputs)[0]
            num_tokens_per_example = ops.shape(inputs)[1]
            inputs = ops.reshape(inputs, [num_tokens_per_batch, self.embed_dim])
            dispatch_tensor, combine_tensor = self.router(inputs)
            expert_inputs = ops.einsum("ab,acd->cdb", inputs, dispatch_tensor)
            expert_inputs = ops.reshape(expert_inputs, [self.num_experts, self.expert_capacity, self.embed_dim])
            expert_input_list = ops.unstack(expert_inputs, axis=0)
            expert_output_list = [self.experts[idx](expert_input)
                                  for idx, expert_input in enumerate(expert_input_list)]
            expert_outputs = ops.stack(expert_output_list, axis=1)
            expert_outputs_combined = ops.einsum("abc,xba->xc", expert_outputs, combine_tensor)
            outputs = ops.reshape(expert_outputs_combined, [batch_size, num_tokens_per_example, self.embed_dim])
            return outputs

    class TransformerBlock(layers.Layer):
        def __init__(self, embed_dim, num_heads, ffn, dropout_rate=0.1):
            super().__init__()
            self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
            self.ffn = ffn
            self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
            self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
            self.dropout1 = layers.Dropout(dropout_rate)
            self.dropout2 = layers.Dropout(dropout_rate)

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
            self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
            self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

        def call(self, x):
            maxlen = ops.shape(x)[-1]
            positions = ops.arange(start=0, stop=maxlen, step=1)
            positions = self.pos_emb(positions)
            x = self.token_emb(x)
            return x + positions

    def create_classifier():
        switch = Switch(num_experts, embed_dim, ff_dim, num_tokens_per_batch)
        transformer_block = TransformerBlock(embed_dim // num_heads, num_heads, switch)
        inputs = layers.Input(shape=(num_tokens_per_example,))
        embedding_layer = TokenAndPositionEmbedding(num_tokens_per_example, vocab_size, embed_dim)
        x = embedding_layer(inputs)
        x = transformer_block(x)
        x = layers.GlobalAveragePooling1D()(x)
        x = layers.Dropout(dropout_rate)(x)
        x = layers.Dense(ff_dim, activation="relu")(x)
        x = layers.Dropout(dropout_rate)(x)
        outputs = layers.Dense(2, activation="softmax")(x)
        return keras.Model(inputs=inputs, outputs=outputs)

    rng = np.random.RandomState(0)
    x = rng.randint(1, vocab_size, size=(160 * scale, num_tokens_per_example)).astype("int64")
    y = (x[:, :4].sum(axis=1) > 2 * vocab_size).astype("int64")
    x_train, y_train, x_val, y_val = x[:128 * scale], y[:128 * scale], x[128 * scale:], y[128 * scale:]
    keras.utils.set_random_seed(0)
    with strategy.scope():
        classifier = create_classifier()
        classifier.compile(optimizer=keras.optimizers.Adam(learning_rate),
                           loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = classifier.fit(x_train, y_train, batch_size=batch_size, epochs=1, validation_data=(x_val, y_val),
                             verbose=0)
    evaluation = classifier.evaluate(x_val, y_val, batch_size=batch_size, verbose=0)
    return {"_model": classifier, "history": history.history, "evaluate": evaluation,
            "predict": classifier.predict(x_val, batch_size=batch_size, verbose=0)}
