"""Idioms of the keras.io programs p51+ (tests/programs/keras) on md.keras, one device: each was refused or wrong
before. Sublayers assigned before ``super().__init__()`` (switch transformer), a reshape to a constant of the batch
in a functional model (switch transformer), a model compiled without a loss whose layer adds it (captcha OCR's
CTCLayer: Keras logs it), ``validation_data=(x,)``, ``GroupNormalization(groups=-1)`` (CycleGAN), a Loss subclass
overriding ``__call__`` (supervised contrastive), ``keras.utils.normalize`` of a tensor (differentiable)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import multidev as md
from tests.integrations._keras3_env import import_keras3

K = md.keras
keras = import_keras3()


class Router(K.layers.Layer):
    def __init__(self, units):
        self.units = units
        self.route = K.layers.Dense(units)          # before super().__init__(), as keras.io's switch transformer
        self.experts = [K.layers.Dense(units) for _ in range(2)]
        super().__init__(name="router")

    def call(self, x):
        return self.route(x) + self.experts[0](x) + self.experts[1](x)


def test_sublayers_assigned_before_init_are_kept_and_trained():
    layer = Router(3)
    out = layer(torch.ones(2, 4))
    assert out.shape == (2, 3) and layer.name == "router" and layer.units == 3
    assert len(layer.trainable_weights) == 6 and len(list(layer.parameters())) == 6


def test_a_reshape_to_a_constant_of_the_batch_builds_at_that_batch():
    class Tokens(K.layers.Layer):   # the Switch: [num_tokens_per_batch, embed_dim] with a constant of batch 4
        def call(self, x):
            flat = K.ops.reshape(x, [4 * 3, 2])
            return K.ops.reshape(flat * 2.0, [K.ops.shape(x)[0], 3, 2])

    inputs = K.Input((3, 2))
    model = K.Model(inputs, Tokens()(inputs))
    assert model.output_shape == (None, 3, 2)
    x = np.arange(24, dtype="float32").reshape(4, 3, 2)
    np.testing.assert_allclose(model.predict(x, batch_size=4, verbose=0), x * 2)
    with pytest.raises(RuntimeError, match=r"shape '\[12, 2\]' is invalid for input of size 12"):
        model.predict(x, batch_size=2, verbose=0)   # another batch: the constant's error, as TensorFlow's


def _add_loss_model(front):
    class Endpoint(front.layers.Layer):
        def call(self, y, x):
            self.add_loss(front.ops.sum(front.ops.square(x - y), axis=-1, keepdims=True))   # (batch, 1): Keras sums
            return x

    a, b = front.layers.Input((3,), name="a"), front.layers.Input((1,), name="b")
    model = front.Model([a, b], Endpoint()(b, front.layers.Dense(1)(a)))
    model.compile(optimizer=front.optimizers.SGD(0.1))
    model.set_weights([np.full((3, 1), 0.1, "float32"), np.zeros(1, "float32")])
    return model


def test_a_model_compiled_without_a_loss_logs_its_added_losses_as_keras3():
    x = np.random.RandomState(0).rand(32, 3).astype("float32")
    y = np.random.RandomState(1).rand(32, 1).astype("float32")
    got, want = [], []
    for front, out in ((K, got), (keras, want)):
        model = _add_loss_model(front)
        history = model.fit({"a": x, "b": y}, batch_size=8, epochs=2, shuffle=False, verbose=0,
                            validation_data=({"a": x[:8], "b": y[:8]},))   # (x,): Keras 3 takes it
        out += [history.history["loss"], history.history["val_loss"], model.evaluate([x, y], batch_size=8, verbose=0),
                model.get_weights()[0]]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_group_normalization_of_one_group_per_channel_equals_keras3():
    x = np.random.RandomState(0).rand(2, 4, 4, 6).astype("float32")
    ours, theirs = K.layers.GroupNormalization(groups=-1), keras.layers.GroupNormalization(groups=-1)
    np.testing.assert_allclose(ours(torch.as_tensor(x)).detach().numpy(), np.asarray(theirs(x).detach()), rtol=1e-5,
                               atol=1e-5)
    assert ours.groups == 6
    with pytest.raises(ValueError, match="Number of groups"):
        K.layers.GroupNormalization(groups=4)(torch.as_tensor(x))


def test_a_loss_subclass_overriding_call_dunder_is_the_compiled_loss():
    class Reduced(K.losses.Loss):   # keras.io's SupervisedContrastiveLoss overrides __call__, not call
        def __call__(self, labels, predictions, sample_weight=None):
            return K.ops.mean(K.ops.square(predictions - 1.0))

    model = K.Sequential([K.Input((2,)), K.layers.Dense(1, kernel_initializer="zeros")])
    model.compile(optimizer=K.optimizers.SGD(0.1), loss=Reduced())
    loss = model.fit(np.ones((4, 2), "float32"), np.zeros((4, 1), "float32"), batch_size=4, verbose=0)
    assert loss.history["loss"] == [pytest.approx(1.0)]
    with pytest.raises(NotImplementedError, match="must implement `call"):
        K.losses.Loss()(torch.zeros(1), torch.zeros(1))


def test_normalize_of_a_tensor_keeps_its_gradient():
    x = torch.tensor([[3.0, 4.0], [0.0, 0.0]], requires_grad=True)
    out = K.utils.normalize(x, axis=1, order=2)
    out[0, 0].backward()
    assert torch.allclose(out.detach(), torch.tensor([[0.6, 0.8], [0.0, 0.0]]))
    assert x.grad is not None and x.grad[0].abs().sum() > 0
    np.testing.assert_allclose(K.utils.normalize(np.array([[3.0, 4.0]])), [[0.6, 0.8]])   # numpy stays numpy
