"""Layers: lazy build, shapes (channels-last), names, weights API, Keras semantics, bad input."""

import numpy as np
import pytest
import torch

from multidev.keras import layers


def test_auto_names_follow_keras():
    names = [layers.Dense(1).name, layers.Dense(1).name, layers.Conv1D(2, 3).name, layers.MaxPooling1D().name,
             layers.MaxPool1D().name, layers.BatchNormalization().name, layers.GlobalAveragePooling1D().name,
             layers.LSTM(2).name]
    assert names == ["dense", "dense_1", "conv1d", "max_pooling1d", "max_pooling1d_1", "batch_normalization",
                     "global_average_pooling1d", "lstm"]


def test_dense_builds_on_first_call_with_keras_initializers():
    layer = layers.Dense(4)
    assert not layer.built and layer.weights == []
    out = layer(torch.ones(2, 3))
    assert out.shape == (2, 4) and layer.built
    assert tuple(layer.kernel.shape) == (3, 4) and torch.all(layer.bias == 0)
    limit = np.sqrt(6 / (3 + 4))
    assert float(layer.kernel.detach().abs().max()) <= limit
    assert layer.count_params() == 16
    torch.testing.assert_close(out, torch.ones(2, 3) @ layer.kernel.detach() + layer.bias.detach())


def test_dense_wrong_last_dim_is_a_clear_error():
    layer = layers.Dense(4)
    layer(torch.ones(2, 3))
    with pytest.raises(ValueError, match=r'layer "dense".*expected axis -1 of input shape to have value 3.*\(2, 5\)'):
        layer(torch.ones(2, 5))


def test_invalid_units_and_unknown_names():
    with pytest.raises(ValueError, match="units=0"):
        layers.Dense(0)
    with pytest.raises(ValueError, match="Unknown activation function: 'relux'.*'relu'"):
        layers.Dense(2, activation="relux")
    with pytest.raises(ValueError, match="Unknown initializer: 'glorot'"):
        layers.Dense(2, kernel_initializer="glorot")
    with pytest.raises(TypeError, match="Keyword argument not understood"):
        layers.Dense(2, unitz=3)


def test_get_set_weights_and_mismatch_listing():
    layer = layers.Dense(2)
    layer(torch.ones(1, 3))
    w = layer.get_weights()
    assert [a.shape for a in w] == [(3, 2), (2,)]
    layer.set_weights([np.ones((3, 2)), np.full(2, 0.5)])
    torch.testing.assert_close(layer(torch.ones(1, 3)), torch.full((1, 2), 3.5))
    with pytest.raises(ValueError, match=r"weight 0: expected \(3, 2\), received \(2, 2\)"):
        layer.set_weights([np.ones((2, 2)), np.ones(2)])
    torch.testing.assert_close(layer.bias.detach(), torch.full((2,), 0.5))


def test_trainable_flag_moves_weights():
    layer = layers.Dense(2)
    layer(torch.ones(1, 3))
    layer.trainable = False
    assert layer.trainable_weights == [] and len(layer.non_trainable_weights) == 2
    assert not layer.kernel.requires_grad
    layer.trainable = True
    assert len(layer.trainable_weights) == 2 and layer.kernel.requires_grad


def test_embedding_ranges_and_input_length():
    emb = layers.Embedding(10, 3, input_length=5)
    assert emb._batch_input_shape == (None, 5)
    out = emb(torch.tensor([[1, 2, 3, 4, 9]]))
    assert out.shape == (1, 5, 3)
    assert float(emb.embeddings.detach().abs().max()) <= 0.05
    with pytest.raises(ValueError, match=r"input id 10 is out of range.*0\.\.9"):
        emb(torch.tensor([[10]]))


def test_conv_and_pooling_shapes_channels_last():
    x = torch.randn(2, 20, 3)
    assert layers.Conv1D(4, 5)(x).shape == (2, 16, 4)
    assert layers.Conv1D(4, 5, padding="same")(x).shape == (2, 20, 4)
    assert layers.Conv1D(4, 3, strides=2, padding="same")(x).shape == (2, 10, 4)
    assert layers.Conv1D(4, 3, padding="causal")(x).shape == (2, 20, 4)
    assert layers.MaxPool1D()(x).shape == (2, 10, 3)
    assert layers.AveragePooling1D(3, padding="same")(x).shape == (2, 7, 3)
    assert layers.GlobalMaxPooling1D()(x).shape == (2, 3)
    img = torch.randn(2, 8, 6, 3)
    assert layers.Conv2D(5, (3, 3))(img).shape == (2, 6, 4, 5)
    assert layers.MaxPooling2D()(img).shape == (2, 4, 3, 3)
    assert layers.AveragePooling2D()(img).shape == (2, 4, 3, 3)
    assert layers.GlobalAveragePooling2D()(img).shape == (2, 3)
    with pytest.raises(ValueError, match="expected ndim=3, found ndim=2"):
        layers.Conv1D(4, 3)(torch.randn(2, 3))


def test_conv1d_matches_a_torch_conv_with_permuted_kernel():
    conv = layers.Conv1D(4, 3)
    x = torch.randn(2, 10, 3)
    y = conv(x)
    ref = torch.nn.functional.conv1d(x.transpose(1, 2), conv.kernel.detach().permute(2, 1, 0), conv.bias.detach())
    torch.testing.assert_close(y, ref.transpose(1, 2))


def test_average_pooling_same_excludes_padding():
    x = torch.tensor([[[1.0], [2.0], [3.0]]])
    out = layers.AveragePooling1D(2, padding="same")(x)
    torch.testing.assert_close(out.reshape(-1), torch.tensor([1.5, 3.0]))


def test_batch_normalization_keras_semantics():
    bn = layers.BatchNormalization()
    x = torch.randn(64, 4) * 3 + 2
    y = bn(x, training=True)
    torch.testing.assert_close(y.mean(0), torch.zeros(4), atol=1e-5, rtol=0)
    expected_mean = 0.01 * x.mean(0)
    expected_var = 0.99 + 0.01 * x.var(0, unbiased=False)
    torch.testing.assert_close(bn.moving_mean, expected_mean)
    torch.testing.assert_close(bn.moving_variance, expected_var)
    assert [tuple(w.shape) for w in bn.weights] == [(4,)] * 4
    assert len(bn.trainable_weights) == 2 and "moving_mean" in bn._buffers
    inference = bn(x)                         # direct call: inference mode, uses moving statistics
    torch.testing.assert_close(inference, (x - expected_mean) / torch.sqrt(expected_var + 1e-3))


def test_sync_batch_norm_uses_the_aggregation_hook():
    seen = []

    def aggregator(total, total_sq, count):
        seen.append(float(count))
        return total * 2, total_sq * 2, count * 2   # as if a second replica had identical data

    sync = layers.experimental.SyncBatchNormalization()
    assert sync.synchronized
    previous = layers.BatchNormalization.__dict__["moments_aggregator"]   # the staticmethod, as declared
    layers.BatchNormalization.moments_aggregator = aggregator
    try:
        x = torch.randn(8, 3)
        y = sync(x, training=True)
    finally:
        layers.BatchNormalization.moments_aggregator = previous  # not None: later tests need the real hook
    assert seen == [8.0]
    plain = layers.BatchNormalization()(x, training=True)
    torch.testing.assert_close(y, plain)


def test_layer_normalization():
    ln = layers.LayerNormalization()
    x = torch.randn(3, 5)
    torch.testing.assert_close(ln(x), torch.nn.functional.layer_norm(x, (5,), eps=1e-3))


def test_dropout_only_when_training():
    d = layers.Dropout(0.5)
    x = torch.ones(1000)
    assert torch.equal(d(x), x)
    y = d(x, training=True)
    assert 300 < int((y == 0).sum()) < 700 and set(y.unique().tolist()) <= {0.0, 2.0}


@pytest.mark.parametrize("cls,gates", [(layers.LSTM, 4), (layers.GRU, 3)])
def test_recurrent_shapes_states_and_keras_param_counts(cls, gates):
    layer = cls(6, return_sequences=True, return_state=True)
    out = layer(torch.randn(2, 7, 3))
    seq, states = out[0], out[1:]
    assert seq.shape == (2, 7, 6) and len(states) == (2 if cls is layers.LSTM else 1)
    torch.testing.assert_close(seq[:, -1], states[0])
    bias = gates * 6 if cls is layers.LSTM else 2 * gates * 6
    assert layer.count_params() == gates * 6 * (3 + 6) + bias
    last = cls(6)(torch.randn(2, 7, 3))
    assert last.shape == (2, 6)


def test_lstm_matches_torch_lstm_with_same_weights():
    layer = layers.LSTM(4, return_sequences=True)
    x = torch.randn(2, 5, 3)
    y = layer(x)
    ref = torch.nn.LSTM(3, 4, batch_first=True)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(layer.kernel.t())
        ref.weight_hh_l0.copy_(layer.recurrent_kernel.t())
        ref.bias_ih_l0.copy_(layer.bias)
        ref.bias_hh_l0.zero_()
    torch.testing.assert_close(y, ref(x)[0])
    assert float(layer.bias.detach()[4:8].min()) == 1.0     # unit_forget_bias


def test_bidirectional_merge_modes():
    x = torch.randn(2, 5, 3)
    assert layers.Bidirectional(layers.LSTM(4))(x).shape == (2, 8)
    assert layers.Bidirectional(layers.GRU(4, return_sequences=True), merge_mode="sum")(x).shape == (2, 5, 4)
    with pytest.raises(ValueError, match="Invalid merge mode"):
        layers.Bidirectional(layers.LSTM(2), merge_mode="max")


def test_merge_reshape_flatten_activation():
    a, b = torch.ones(2, 3), torch.full((2, 3), 2.0)
    assert torch.equal(layers.Add()([a, b]), torch.full((2, 3), 3.0))
    assert layers.Concatenate()([a, torch.ones(2, 4)]).shape == (2, 7)
    with pytest.raises(ValueError, match="list of at least 2 inputs"):
        layers.Add()([a])
    assert layers.Reshape((3, 2))(torch.ones(4, 6)).shape == (4, 3, 2)
    with pytest.raises(ValueError, match="total size of new array must be unchanged"):
        layers.Reshape((4, 2))(torch.ones(4, 6))
    assert layers.Flatten()(torch.ones(2, 3, 4)).shape == (2, 12)
    torch.testing.assert_close(layers.Activation("softmax")(torch.zeros(1, 4)), torch.full((1, 4), 0.25))


def test_custom_layer_add_weight_is_a_registered_parameter():
    class Scale(layers.Layer):
        def build(self, input_shape):
            self.add_weight("w", shape=(input_shape[-1],), initializer="ones")

        def call(self, x):
            return x * self.w

    layer = Scale()
    assert layer.name == "scale"
    out = layer(torch.full((2, 3), 2.0))
    assert torch.equal(out, torch.full((2, 3), 2.0))
    assert "w" in layer._parameters and dict(layer.named_parameters())["w"] is layer.w


def test_lambda_layer_in_a_functional_graph():
    inp = layers.Input(shape=(4,))
    out = layers.Lambda(lambda t, scale: t * scale, arguments={"scale": 3.0})(inp)
    from multidev.keras import Model
    model = Model(inputs=inp, outputs=out)
    torch.testing.assert_close(model(torch.ones(2, 4)), torch.full((2, 4), 3.0))
    with pytest.raises(NotImplementedError, match="does not serialize"):
        model.get_config()
