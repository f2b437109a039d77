"""An md.keras loss with its default mean reduction in a custom loop's replica function: divided by
the replica count, as Keras 3's losses are under a TensorFlow strategy (TF 2.21: MeanSquaredError of
ones vs zeros gives 0.5 on each of 2 replicas, 1.0 outside; a 'sum' loss is not scaled), so the
replicas' summed gradients are the global batch's mean gradient, with TF's apply_gradients and with
loss.backward() and a torch optimizer alike."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import multidev as md


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def test_mean_loss_is_divided_by_the_replicas_and_sum_is_not(strategy):
    mse = md.keras.losses.MeanSquaredError()
    total = md.keras.losses.MeanSquaredError(reduction="sum")
    ones, zeros = torch.ones(4, 1), torch.zeros(4, 1)
    mean, summed = strategy.run(lambda: (mse(ones, zeros), total(ones, zeros)))
    assert [float(v) for v in strategy.experimental_local_results(mean)] == [0.5, 0.5]
    assert [float(v) for v in strategy.experimental_local_results(summed)] == [4.0, 4.0]
    assert float(mse(ones, zeros)) == 1.0                          # outside strategy.run: unscaled


def _train(strat, x, y, torch_style):
    torch.manual_seed(0)
    with strat.scope():
        model = md.keras.Sequential([md.keras.layers.Dense(3, activation="tanh", input_shape=(4,)),
                                     md.keras.layers.Dense(1)])
        model(torch.zeros(1, 4))
        keras_opt = md.keras.optimizers.SGD(0.1)
        torch_opt = torch.optim.SGD(model.parameters(), lr=0.1) if torch_style else None
    loss_fn = md.keras.losses.MeanSquaredError()

    def step(xb, yb):
        if torch_style:
            torch_opt.zero_grad()
            loss_fn(yb, model(xb)).backward()
            torch_opt.step()
            return
        with md.GradientTape() as tape:
            loss = loss_fn(yb, model(xb))
        grads = tape.gradient(loss, model.trainable_variables)
        keras_opt.apply_gradients(zip(grads, model.trainable_variables))

    data = md.data.Dataset.from_tensor_slices((x, y)).batch(8)
    for xb, yb in strat.experimental_distribute_dataset(data):
        strat.run(step, args=(xb, yb))
    return [np.array(w) for w in model.get_weights()]


@pytest.mark.parametrize("torch_style", [False, True], ids=["tape_apply_gradients", "backward_torch_optim"])
def test_custom_loop_with_a_keras_mean_loss_equals_one_device(strategy, torch_style):
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g)
    one = _train(md.distribute.OneDeviceStrategy("/cpu:0"), x, y, torch_style)
    two = _train(strategy, x, y, torch_style)
    for a, b in zip(one, two):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
