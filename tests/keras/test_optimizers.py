"""Optimizers: Keras defaults, apply_gradients/minimize, schedules, clipping, config, iterations."""

import math

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import optimizers
from multidev.keras.optimizers import schedules


def test_keras_defaults():
    assert optimizers.Adam().learning_rate == pytest.approx(0.001) and optimizers.Adam().epsilon == 1e-7
    assert optimizers.SGD().learning_rate == pytest.approx(0.01)
    assert optimizers.AdamW().weight_decay == 0.004
    assert optimizers.RMSprop().rho == 0.9
    assert optimizers.Adagrad().initial_accumulator_value == 0.1
    assert isinstance(optimizers.get("nadam"), optimizers.Nadam)
    with pytest.raises(ValueError, match="Valid names: .*'rmsprop'"):
        optimizers.get("adamax2")


def test_sgd_momentum_apply_gradients_matches_torch():
    w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    ref = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    opt = optimizers.SGD(0.1, momentum=0.9, nesterov=True)
    torch_opt = torch.optim.SGD([ref], lr=0.1, momentum=0.9, nesterov=True)
    for _ in range(3):
        g = torch.tensor([0.5, -1.0])
        opt.apply_gradients([(g, w)])
        ref.grad = g.clone()
        torch_opt.step()
    torch.testing.assert_close(w.detach(), ref.detach())
    assert int(opt.iterations) == 3 and w.grad is None


def test_minimize_and_none_gradients():
    w = torch.nn.Parameter(torch.tensor(3.0))
    unused = torch.nn.Parameter(torch.tensor(1.0))
    opt = optimizers.SGD(0.5)
    opt.minimize(lambda: w * w, [w, unused])
    assert float(w.detach()) == pytest.approx(0.0) and float(unused.detach()) == 1.0
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.apply_gradients([(None, w)])


def test_clipping():
    w = torch.nn.Parameter(torch.zeros(2))
    optimizers.SGD(1.0, clipnorm=1.0).apply_gradients([(torch.tensor([3.0, 4.0]), w)])
    torch.testing.assert_close(w.detach(), torch.tensor([-0.6, -0.8]))
    w2 = torch.nn.Parameter(torch.zeros(2))
    optimizers.SGD(1.0, clipvalue=0.5).apply_gradients([(torch.tensor([3.0, -0.1]), w2)])
    torch.testing.assert_close(w2.detach(), torch.tensor([-0.5, 0.1]))
    a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    optimizers.SGD(1.0, global_clipnorm=1.0).apply_gradients([(torch.tensor([3.0]), a), (torch.tensor([4.0]), b)])
    assert float(a.detach()) == pytest.approx(-0.6) and float(b.detach()) == pytest.approx(-0.8)
    with pytest.raises(ValueError, match="both `clipnorm` and `global_clipnorm`"):
        optimizers.Adam(clipnorm=1.0, global_clipnorm=1.0)


def test_schedules():
    assert schedules.ExponentialDecay(1.0, 10, 0.5)(20) == pytest.approx(0.25)
    assert schedules.ExponentialDecay(1.0, 10, 0.5, staircase=True)(15) == pytest.approx(0.5)
    pw = schedules.PiecewiseConstantDecay([10, 20], [1.0, 0.5, 0.1])
    assert [pw(5), pw(10), pw(11), pw(25)] == [1.0, 1.0, 0.5, 0.1]
    assert schedules.InverseTimeDecay(1.0, 1, 0.5)(2) == pytest.approx(0.5)
    assert schedules.PolynomialDecay(1.0, 10, 0.0)(5) == pytest.approx(0.5)
    assert schedules.CosineDecay(1.0, 10)(5) == pytest.approx(0.5 * (1 + math.cos(math.pi / 2)))
    lr = schedules.ExponentialDecay(0.1, 1, 0.5)
    opt = optimizers.SGD(lr)
    w = torch.nn.Parameter(torch.zeros(1))
    opt.apply_gradients([(torch.ones(1), w)])      # step 0: lr 0.1
    opt.apply_gradients([(torch.ones(1), w)])      # step 1: lr 0.05
    assert float(w.detach()) == pytest.approx(-0.15) and opt.learning_rate == pytest.approx(0.025)


def test_config_round_trip_and_lr_setter():
    opt = optimizers.Adam(learning_rate=schedules.CosineDecay(0.01, 100), beta_1=0.8, clipnorm=2.0)
    clone = optimizers.Adam.from_config(opt.get_config())
    assert clone.beta_1 == 0.8 and clone.clipnorm == 2.0 and clone.learning_rate == pytest.approx(0.01)
    with pytest.raises(TypeError, match="not settable"):      # Keras: a schedule's rate is not settable
        opt.learning_rate = 0.5
    opt.learning_rate = schedules.ExponentialDecay(0.5, 10, 0.5)   # another schedule replaces it
    assert float(opt.learning_rate) == 0.5
    plain = optimizers.Adam(0.1)
    plain.learning_rate = 0.5
    assert plain.learning_rate.numpy() == 0.5 and float(plain.lr) == 0.5


def test_learning_rate_is_a_variable():
    """As in Keras: ``.numpy()``, ``.assign()``, float32, among ``variables``; the update reads the new value."""
    opt = optimizers.SGD(0.1)
    lr = opt.learning_rate
    assert isinstance(lr, md.Variable) and lr.dtype == torch.float32 and lr.numpy() == np.float32(0.1)
    assert lr.name.startswith("learning_rate") and not lr.trainable
    w = torch.nn.Parameter(torch.zeros(1))
    opt.apply_gradients([(torch.ones(1), w)])
    lr.assign(0.5)
    opt.apply_gradients([(torch.ones(1), w)])
    assert float(w.detach()) == pytest.approx(-0.6) and opt.learning_rate is lr
    assert opt.variables[0] is opt.iterations and opt.variables[1] is lr
    assert opt.get_config()["learning_rate"] == pytest.approx(0.5)
    assert optimizers.SGD.from_config(opt.get_config()).learning_rate.numpy() == np.float32(0.5)
    with pytest.raises(ValueError, match="learning_rate='fast'"):
        optimizers.SGD("fast")
    sched = optimizers.SGD(schedules.ExponentialDecay(1.0, 1, 0.5))
    assert sched.learning_rate.numpy() == 1.0 and optimizers.SGD(lambda: 0.25).learning_rate.numpy() == 0.25


def test_adam_state_save_restore_continues_identically():
    def run(opt, w, steps):
        for i in range(steps):
            opt.apply_gradients([(torch.tensor([float(i + 1), -1.0]), w)])

    w = torch.nn.Parameter(torch.tensor([1.0, 1.0]))
    opt = optimizers.Adam(0.1)
    run(opt, w, 2)
    state = opt.state_tensors({id(w): "w"})
    w2 = torch.nn.Parameter(w.detach().clone())
    opt2 = optimizers.Adam(0.1)
    opt2.load_state_tensors(state, {"w": w2})
    run(opt, w, 2)
    run(opt2, w2, 2)
    torch.testing.assert_close(w.detach(), w2.detach())
    assert int(opt2.iterations) == 4


def test_strategy_hooks_aggregate_then_clip_then_apply():
    calls = []

    class Summing(optimizers.SGD):
        def _aggregate_gradients(self, grads_and_vars):
            calls.append("aggregate")
            return [(g * 2, v) for g, v in grads_and_vars]      # as if two replicas had the same gradient

        def _increment_iterations(self):
            calls.append("count")
            super()._increment_iterations()

    w = torch.nn.Parameter(torch.zeros(1))
    opt = Summing(1.0, clipnorm=3.0)
    opt.apply_gradients([(torch.tensor([2.0]), w)])          # aggregated to 4, clipped to 3
    assert float(w.detach()) == pytest.approx(-3.0) and calls == ["aggregate", "count"]
