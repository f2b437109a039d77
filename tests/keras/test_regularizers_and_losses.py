"""Regularizers, ``add_loss``/``model.losses``, their place in ``fit``'s loss, and per-replica scaling."""

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import layers, models, regularizers

PR = md.distribute.PerReplica


def test_penalty_values_names_configs_and_bad_factors():
    x = torch.tensor([1.0, -2.0, 3.0])
    assert float(regularizers.L1(0.1)(x)) == pytest.approx(0.6)
    assert float(regularizers.L2(0.1)(x)) == pytest.approx(1.4)
    assert float(regularizers.L1L2(l1=0.1, l2=0.1)(x)) == pytest.approx(2.0)
    assert regularizers.get("l2").l2 == 0.01 and isinstance(regularizers.get("l1_l2"), regularizers.L1L2)
    again = regularizers.deserialize(regularizers.serialize(regularizers.L1L2(0.5, 0.25)))
    assert (again.l1, again.l2) == (0.5, 0.25)
    with pytest.raises(ValueError, match=r"l2=-1"):
        regularizers.L2(-1)
    with pytest.raises(ValueError, match=r"'l3'.*Valid names"):
        regularizers.get("l3")


def _model(**dense_kwargs):
    torch.manual_seed(0)
    return models.Sequential([layers.Dense(4, activation="tanh", input_shape=(3,), **dense_kwargs), layers.Dense(1)])


def test_weight_penalties_are_read_on_the_current_weights():
    model = _model(kernel_regularizer=regularizers.L2(0.5), bias_regularizer="l1")
    kernel, bias = model.layers[0].kernel, model.layers[0].bias
    assert len(model.losses) == 2
    expected = 0.5 * kernel.square().sum() + 0.01 * bias.abs().sum()
    torch.testing.assert_close(sum(model.losses), expected)
    with torch.no_grad():
        kernel.mul_(2)
    torch.testing.assert_close(model.losses[0], 0.5 * kernel.square().sum())


def test_fit_adds_the_penalties_to_the_loss_it_minimizes_and_reports():
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(1))
    y = torch.randn(16, 1, generator=torch.Generator().manual_seed(2))
    model = _model(kernel_regularizer=regularizers.L2(0.1))
    model.compile(optimizer=md.keras.optimizers.SGD(0.1), loss="mse")
    reference = _model()
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    mse = ((reference(x) - y) ** 2).mean()
    loss = mse + 0.1 * reference.layers[0].kernel.square().sum()
    loss.backward()
    ref_opt.step()
    history = model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    assert history.history["loss"][0] == pytest.approx(loss.item(), rel=1e-5)
    for got, want in zip(model.weights, reference.parameters()):
        torch.testing.assert_close(got.detach(), want.detach(), rtol=1e-5, atol=1e-6)


class ActivityLoss(layers.Layer):
    def call(self, x):
        self.add_loss(x.abs().mean())
        return x


def test_add_loss_holds_the_last_call_only():
    model = models.Sequential([ActivityLoss(input_shape=(2,)), layers.Dense(1)])
    model(torch.ones(4, 2))
    model(torch.full((4, 2), 3.0))
    assert [float(v) for v in model.losses] == [3.0]


def test_activity_regularizer_is_divided_by_the_batch_size_as_keras_3():
    layer = layers.Dense(2, kernel_initializer="ones", use_bias=False, activity_regularizer=regularizers.L1(1.0))
    out = layer(torch.ones(4, 3))
    assert len(layer.losses) == 1
    assert float(layer.losses[0]) == pytest.approx(float(out.abs().sum()) / 4)


def test_fit_on_two_replicas_with_penalties_equals_one_device():
    x = torch.randn(20, 3, generator=torch.Generator().manual_seed(3))
    y = torch.randn(20, 1, generator=torch.Generator().manual_seed(4))

    def train(strategy):
        scope = strategy.scope() if strategy else md.distribute.get_strategy().scope()
        with scope:
            model = _model(kernel_regularizer=regularizers.L2(0.05), activity_regularizer=regularizers.L2(0.01))
            model.compile(optimizer=md.keras.optimizers.SGD(0.05), loss="mse")
        history = model.fit(x, y, batch_size=10, epochs=2, shuffle=False, verbose=0)
        return model, history.history["loss"]

    one, one_loss = train(None)
    two, two_loss = train(md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    np.testing.assert_allclose(two_loss, one_loss, rtol=1e-5)
    for got, want in zip(two.weights, one.weights):
        for component in getattr(got, "values", [got]):
            torch.testing.assert_close(component.detach(), want.detach(), rtol=1e-5, atol=1e-6)


def test_each_replica_sees_its_own_call_losses_and_scales_them():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = models.Sequential([ActivityLoss(input_shape=(1,))])

    def step(x):
        model(x)
        return md.nn.scale_regularization_loss(model.losses)

    out = strategy.run(step, args=(PR((torch.full((2, 1), 2.0), torch.full((2, 1), 6.0))),))
    assert [float(v) for v in strategy.experimental_local_results(out)] == [1.0, 3.0]
    assert float(strategy.reduce("SUM", out, axis=None)) == 4.0


def test_penalties_round_trip_through_save_and_load(tmp_path):
    model = _model(kernel_regularizer=regularizers.L1L2(0.1, 0.2), activity_regularizer="l2")
    model.save(str(tmp_path / "m"))
    restored = models.load_model(str(tmp_path / "m"))
    dense = restored.layers[0]
    assert (dense.kernel_regularizer.l1, dense.kernel_regularizer.l2) == (0.1, 0.2)
    assert dense.activity_regularizer.l2 == 0.01
    torch.testing.assert_close(sum(restored.losses), sum(model.losses))
