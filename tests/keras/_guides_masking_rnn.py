"""Guides "Understanding masking & padding" and "Working with RNNs": masks, their loss, RNN layers and cells."""

import numpy as np

from _guides_common import K, L, deterministic, fingerprint, history, ints, ops, rnd, scope, tf

RAW = [[711, 632, 71], [73, 8, 3215, 55, 927], [83, 91, 1, 645, 1253, 927]]
TOKENS = np.array([[3, 1, 4, 0, 0], [2, 7, 1, 8, 2], [5, 0, 0, 0, 0], [9, 2, 6, 5, 0]])
SEQ = np.sin(np.arange(4 * 5 * 3) * 0.37).reshape(4, 5, 3).astype("float32")


def padding_and_masks(r):
    padded = K.utils.pad_sequences(RAW, padding="post")
    out = {"post": ints(padded), "pre": ints(K.utils.pad_sequences(RAW)),
           "maxlen": ints(K.utils.pad_sequences(RAW, maxlen=4, truncating="post", value=-1))}
    with scope(r):
        embedding = L.Embedding(input_dim=5000, output_dim=16, mask_zero=True)
        masked_output = embedding(padded)
    out["embedding_mask"] = ints(masked_output._keras_mask)
    out["compute_mask"] = ints(embedding.compute_mask(padded))
    unmasked = np.tile(np.expand_dims(padded, axis=-1), [1, 1, 10]).astype("float32")
    masked_embedding = L.Masking()(unmasked)
    out["masking_mask"] = ints(masked_embedding._keras_mask)
    return out


def _masked_sequence_model(r, rnn, loss="mse", metrics=None):
    with scope(r):
        model = K.Sequential([K.Input((5,)), L.Embedding(10, 3, mask_zero=True), rnn, L.Dense(1)])
        deterministic(model)
        model.compile(optimizer=K.optimizers.SGD(0.1), loss=loss, metrics=metrics)
    return model


def mask_into_loss(r):
    """Masked timesteps are left out of the loss (and its mean) through return_sequences=True."""
    y = np.cos(np.arange(20.0)).reshape(4, 5, 1).astype("float32")
    out = {}
    for name, rnn in (("lstm", lambda: L.LSTM(4, return_sequences=True)), ("gru", lambda: L.GRU(4, return_sequences=True)),
                      ("bidirectional", lambda: L.Bidirectional(L.LSTM(2, return_sequences=True))),
                      ("simple_rnn_cell", lambda: L.Bidirectional(L.SimpleRNN(2, return_sequences=True)))):
        model = _masked_sequence_model(r, rnn(), metrics=["mae"])
        first = model.predict(TOKENS, verbose=0)
        h = model.fit(TOKENS, y, batch_size=2, epochs=2, shuffle=False, verbose=0)
        out[name] = {"first": rnd(first[:, :, 0]), "h": history(h), "w": fingerprint(model.get_weights()),
                     "evaluate": rnd(model.evaluate(TOKENS, y, batch_size=4, verbose=0))}
    return out


def mask_with_temporal_sample_weight(r):
    """Masks and (batch, timesteps) sample weights together, over batches of 3 (the last one of 1)."""
    y = np.cos(np.arange(20.0)).reshape(4, 5, 1).astype("float32")
    model = _masked_sequence_model(r, L.LSTM(4, return_sequences=True), metrics=["mae"])
    h = model.fit(TOKENS, y, batch_size=3, epochs=2, shuffle=False, verbose=0,
                  sample_weight=np.linspace(0.5, 2.0, 20).reshape(4, 5))
    return {"h": history(h), "w": fingerprint(model.get_weights()),
            "evaluate": rnd(model.evaluate(TOKENS, y, batch_size=3, verbose=0))}


def mask_last_output(r):
    """A masked LSTM without return_sequences gives the last unmasked step's output."""
    model = _masked_sequence_model(r, L.LSTM(4))
    y = np.array([[0.5], [-0.5], [1.0], [0.0]], "float32")
    h = model.fit(TOKENS, y, batch_size=2, epochs=2, shuffle=False, verbose=0)
    return {"h": history(h), "w": fingerprint(model.get_weights())}


class TemporalSplit(L.Layer):
    """Split the input tensor into 2 tensors along the time dimension."""

    def call(self, inputs):
        return ops.split(inputs, 2, axis=1)

    def compute_mask(self, inputs, mask=None):
        if mask is None:
            return None
        return ops.split(mask, 2, axis=1)


class CustomEmbedding(L.Layer):
    def __init__(self, input_dim, output_dim, mask_zero=False, **kwargs):
        super().__init__(**kwargs)
        self.input_dim, self.output_dim, self.mask_zero = input_dim, output_dim, mask_zero

    def build(self, input_shape):
        self.embeddings = self.add_weight(shape=(self.input_dim, self.output_dim), initializer="random_normal",
                                          dtype="float32")

    def call(self, inputs):
        inputs = ops.cast(inputs, "int32")
        return ops.take(self.embeddings, inputs, axis=0)

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)


class MyActivation(L.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True   # signal that the layer is safe for mask propagation

    def call(self, inputs):
        return ops.relu(inputs)


class TemporalSoftmax(L.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        assert mask is not None
        broadcast_float_mask = ops.expand_dims(ops.cast(mask, "float32"), -1)
        inputs_exp = ops.exp(inputs) * broadcast_float_mask
        inputs_sum = ops.sum(inputs_exp * broadcast_float_mask, axis=-1, keepdims=True)
        return inputs_exp / inputs_sum


def custom_mask_layers(r):
    out = {}
    first_half, second_half = TemporalSplit()(L.Embedding(input_dim=10, output_dim=16, mask_zero=True)(
        TOKENS[:, :4]))
    out["split_masks"] = [ints(first_half._keras_mask), ints(second_half._keras_mask)]
    with scope(r):
        layer = CustomEmbedding(10, 4, mask_zero=True)
        x = layer(TOKENS)
    out["custom_embedding_mask"] = ints(layer.compute_mask(TOKENS))
    out["custom_embedding_shape"] = list(x.shape)
    with scope(r):
        inputs = K.Input(shape=(None,), dtype="int32")
        x = L.Embedding(input_dim=10, output_dim=5, mask_zero=True)(inputs)
        x = MyActivation()(x)
        outputs = L.LSTM(3)(x)
        model = K.Model(inputs, outputs)
        deterministic(model)
    out["activation_lstm"] = rnd(model(TOKENS))
    with scope(r):
        inputs = K.Input(shape=(None,), dtype="int32")
        x = L.Embedding(input_dim=10, output_dim=3, mask_zero=True)(inputs)
        x = L.Dense(1)(x)
        outputs = TemporalSoftmax()(x)
        model = K.Model(inputs, outputs)
        deterministic(model)
    out["temporal_softmax"] = rnd(model(TOKENS)[..., 0])
    return out


def rnn_outputs(r):
    out = {}
    with scope(r):
        inputs = K.Input((5, 3))
        seq, h, c = L.LSTM(4, return_sequences=True, return_state=True)(inputs)
        gru_seq, gru_h = L.GRU(3, return_sequences=True, return_state=True)(seq)
        model = K.Model(inputs, [seq, h, c, gru_seq, gru_h])
        deterministic(model)
    out["lstm_gru"] = [rnd(v) for v in model(SEQ)]
    with scope(r):
        model = K.Sequential([K.Input((5, 3)), L.Bidirectional(L.LSTM(4, return_sequences=True)),
                              L.Bidirectional(L.LSTM(2)), L.Dense(1)])
        deterministic(model)
    out["bidirectional"] = rnd(model(SEQ))
    return out


def simple_rnn(r):
    out = {}
    with scope(r):
        model = K.Sequential([K.Input((5, 3)), L.SimpleRNN(4, return_sequences=True), L.SimpleRNN(2)])
        deterministic(model)
    out["simple_rnn"] = rnd(model(SEQ))
    return out


def initial_state(r):
    """The guide's encoder-decoder: the encoder's states start the decoder."""
    with scope(r):
        encoder_input = K.Input(shape=(None,))
        encoder_embedded = L.Embedding(input_dim=10, output_dim=4)(encoder_input)
        output, state_h, state_c = L.LSTM(6, return_state=True, name="encoder")(encoder_embedded)
        encoder_state = [state_h, state_c]
        decoder_input = K.Input(shape=(None,))
        decoder_embedded = L.Embedding(input_dim=12, output_dim=4)(decoder_input)
        decoder_output = L.LSTM(6, name="decoder")(decoder_embedded, initial_state=encoder_state)
        output = L.Dense(3)(decoder_output)
        model = K.Model([encoder_input, decoder_input], output)
        for layer in model.layers:   # layer by layer: multidev lists this graph's two embeddings in another order
            deterministic(layer, scale=0.3 + 0.01 * sum(np.size(w) for w in layer.get_weights()) % 7)
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    y = np.cos(np.arange(12.0)).reshape(4, 3).astype("float32")
    h = model.fit([TOKENS, TOKENS[:, ::-1]], y, batch_size=2, epochs=2, shuffle=False, verbose=0)
    return {"h": history(h), "w": fingerprint(model.get_weights())}


class MinimalRNNCell(L.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), initializer="uniform", name="kernel")
        self.recurrent_kernel = self.add_weight(shape=(self.units, self.units), initializer="uniform",
                                                name="recurrent_kernel")

    def call(self, inputs, states):
        prev_output = states[0]
        h = ops.matmul(inputs, self.kernel)
        output = h + ops.matmul(prev_output, self.recurrent_kernel)
        return output, [output]


def rnn_cells(r):
    out = {}
    with scope(r):
        model = K.Sequential([K.Input((5, 3)), L.RNN(MinimalRNNCell(4), return_sequences=True), L.Dense(1)])
        deterministic(model)
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    y = np.cos(np.arange(20.0)).reshape(4, 5, 1).astype("float32")
    out["custom_cell"] = {"h": history(model.fit(SEQ, y, batch_size=2, epochs=2, shuffle=False, verbose=0)),
                          "w": fingerprint(model.get_weights())}
    with scope(r):
        model = K.Sequential([K.Input((5, 3)), L.RNN(L.LSTMCell(4)), L.Dense(1)])
        deterministic(model)
    out["lstm_cell"] = rnd(model(SEQ))
    with scope(r):
        inputs = K.Input((5, 3))
        seq, state = L.RNN(L.GRUCell(3), return_sequences=True, return_state=True, go_backwards=True)(inputs)
        model = K.Model(inputs, [seq, state])
        deterministic(model)
    out["gru_cell_backwards"] = [rnd(v) for v in model(SEQ)]
    return out


def stateful(r):
    """The guide's stateful LSTM over three paragraphs, reset_states(), then fit with stateful=True."""
    out = {}
    with scope(r):
        lstm_layer = L.LSTM(4, stateful=True)
        lstm_layer(SEQ[:, :2])
        deterministic(lstm_layer)
    lstm_layer.reset_states()   # the call that built it carried states from the random weights
    output = lstm_layer(SEQ[:, :2])
    output = lstm_layer(SEQ[:, 2:4])
    output = lstm_layer(SEQ[:, 4:])
    out["streamed"] = rnd(output)
    lstm_layer.reset_states()
    out["after_reset"] = rnd(lstm_layer(SEQ[:, 4:]))
    with scope(r):
        rnn = L.SimpleRNN(3, stateful=True, return_sequences=True)
        rnn(SEQ[:, :2])
        deterministic(rnn)
    rnn.reset_states()
    first, second = rnn(SEQ[:, :2]), rnn(SEQ[:, 2:])
    out["simple_rnn"] = [rnd(first), rnd(second), rnd(rnn.states[0])]
    with scope(r):
        model = K.Sequential([K.Input((5, 3), batch_size=2), L.LSTM(4, stateful=True), L.Dense(1)])
        deterministic(model)
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    h = model.fit(SEQ, np.ones((4, 1), "float32"), batch_size=2, epochs=2, shuffle=False, verbose=0)
    out["fit"] = {"h": history(h), "w": fingerprint(model.get_weights())}
    return out


SNIPPETS = [padding_and_masks, mask_into_loss, mask_with_temporal_sample_weight, mask_last_output, custom_mask_layers, rnn_outputs, simple_rnn,
            initial_state,
            rnn_cells, stateful]
