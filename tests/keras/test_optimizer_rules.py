"""Every Keras optimizer follows Keras 3's update rule (not torch.optim's): TensorFlow's observed figures,
and a float64 reference of each documented formula over several steps, small and large gradients,
weight decay and a learning rate changed between steps."""

import numpy as np
import pytest
import torch

import multidev as md
from multidev.distribute import replica_update
from multidev.keras import optimizers
from tests.keras._keras_rules import run as reference

CASES = [
    ("SGD", {}),
    ("SGD", {"momentum": 0.9}),
    ("SGD", {"momentum": 0.8, "nesterov": True}),
    ("Adam", {}),
    ("Adam", {"amsgrad": True, "beta_1": 0.8}),
    ("AdamW", {"weight_decay": 0.05}),
    ("Nadam", {}),
    ("RMSprop", {}),
    ("RMSprop", {"centered": True, "momentum": 0.5}),
    ("RMSprop", {"momentum": 0.9, "rho": 0.8}),
    ("Adagrad", {"initial_accumulator_value": 0.5}),
    ("Adadelta", {}),
    ("Adamax", {}),
    ("Ftrl", {}),
    ("Ftrl", {"l1_regularization_strength": 0.01, "l2_regularization_strength": 0.1,
              "l2_shrinkage_regularization_strength": 0.05, "beta": 0.2, "learning_rate_power": -0.3}),
    ("Lion", {"beta_1": 0.7}),
    ("SGD", {"momentum": 0.9, "weight_decay": 0.1}),
    ("Nadam", {"weight_decay": 0.01}),
    ("Lion", {"weight_decay": 0.2}),
    ("Lamb", {}),
    ("Lamb", {"weight_decay": 0.05, "beta_1": 0.8}),
]


def _train(name, hyper, grads, lrs, w0):
    """Apply ``grads`` step by step through the public API; the learning rate is assigned before each."""
    opt = getattr(optimizers, name)(learning_rate=lrs[0], **hyper)
    weights = [torch.nn.Parameter(torch.tensor(w, dtype=torch.float32)) for w in w0]
    out = []
    for step_grads, lr in zip(grads, lrs):
        opt.learning_rate.assign(lr)
        opt.apply_gradients([(torch.tensor(g, dtype=torch.float32), w) for g, w in zip(step_grads, weights)])
        out.append([w.detach().numpy().copy() for w in weights])
    return opt, out


@pytest.mark.parametrize("scale", [1e-5, 1.0, 1e3])
@pytest.mark.parametrize("name, hyper", CASES, ids=[f"{n}-{'-'.join(h) or 'default'}" for n, h in CASES])
def test_matches_keras_formula(name, hyper, scale):
    rng = np.random.RandomState(7)
    w0 = [rng.randn(3, 4), rng.randn(5)]
    grads = [[scale * rng.randn(*w.shape) for w in w0] for _ in range(5)]
    lrs = [0.05, 0.05, 0.02, 0.1, 0.1]                     # changed between steps, as a callback would
    grads = [[g.astype(np.float32).astype(np.float64) for g in step] for step in grads]
    w0 = [w.astype(np.float32).astype(np.float64) for w in w0]
    lrs32 = [float(np.float32(lr)) for lr in lrs]          # the rate variable is float32, as in Keras
    opt, got = _train(name, hyper, grads, lrs, w0)
    want = reference(name, w0, grads, lrs32, **hyper)
    for step, (g_step, w_step) in enumerate(zip(got, want)):
        for g, w in zip(g_step, w_step):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=f"{name} {hyper} step {step + 1}")
    assert int(opt.iterations) == 5


@pytest.mark.parametrize("name, tf_values", [
    ("RMSprop", [0.265, 0.906, 0.999]),    # torch's rule (epsilon outside the root) gives [0.262, 0.264, 0.412]
    ("Adam", [0.700, 0.707, 0.910]),       # torch's rule gives [0.700, 0.700, 0.727]
    ("Nadam", [0.745, 0.745, 0.768]),      # torch's rule gives [0.743, 0.743, 0.766]
    ("Adagrad", [0.991, 1.000, 1.000]),
    ("SGD", [0.997, 1.000, 1.000]),
])
def test_tensorflow_figures(name, tf_values):
    """TF 2.21: optimizer(0.1), a variable at 1.0, three steps of a constant gradient of 1e-2, 1e-4 or 1e-6."""
    got = []
    for g in (1e-2, 1e-4, 1e-6):
        w = md.Variable([1.0])
        opt = getattr(optimizers, name)(0.1)
        for _ in range(3):
            opt.apply_gradients([(torch.tensor([g]), w)])
        got.append(round(float(w.numpy()[0]), 3))
    assert got == tf_values


def test_every_rule_may_split_its_update_across_replicas():
    """Replicas on one CPU split element-wise updates (replica_update): every rule is registered."""
    for name in ("SGD", "Adam", "AdamW", "Nadam", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Ftrl", "Lion"):
        assert getattr(optimizers, name)._torch_class in replica_update.ELEMENTWISE, name


@pytest.mark.parametrize("name, hyper", [("Nadam", {}), ("Adam", {"amsgrad": True}), ("Ftrl", {"beta": 0.1}),
                                         ("RMSprop", {"centered": True, "momentum": 0.9})])
def test_state_round_trip_continues_identically(name, hyper):
    rng = np.random.RandomState(1)
    grads = [torch.tensor(rng.randn(4), dtype=torch.float32) for _ in range(6)]
    w = torch.nn.Parameter(torch.ones(4))
    opt = getattr(optimizers, name)(0.05, **hyper)
    for g in grads[:3]:
        opt.apply_gradients([(g, w)])
    state = opt.state_tensors({id(w): "w"})
    w2 = torch.nn.Parameter(w.detach().clone())
    opt2 = getattr(optimizers, name)(0.05, **hyper)
    opt2.load_state_tensors(state, {"w": w2})
    for g in grads[3:]:
        opt.apply_gradients([(g, w)])
        opt2.apply_gradients([(g, w2)])
    torch.testing.assert_close(w2.detach(), w.detach(), rtol=0, atol=0)


def test_constructor_validation():
    with pytest.raises(ValueError, match=r"beta_1.*Received: beta_1=0"):
        optimizers.Lion(beta_1=0)
    with pytest.raises(ValueError, match=r"l1_regularization_strength=-1"):
        optimizers.Ftrl(l1_regularization_strength=-1)
    with pytest.raises(ValueError, match=r"learning_rate_power=0.5"):
        optimizers.Ftrl(learning_rate_power=0.5)
    with pytest.raises(ValueError, match=r"momentum=2"):
        optimizers.SGD(momentum=2)
    for name in ("adadelta", "adamax", "ftrl", "lion"):
        opt = optimizers.get(name)
        assert type(opt).from_config(opt.get_config()).get_config() == opt.get_config()


def _fit_small(strategy, name, hyper):
    rng = np.random.RandomState(0)
    x = rng.randn(64, 6).astype("float32")
    y = (x[:, 0] - x[:, 2] > 0).astype("int64")
    scope = strategy.scope() if strategy is not None else md.distribute.get_strategy().scope()
    with scope:
        torch.manual_seed(5)
        model = md.keras.Sequential([md.keras.layers.Dense(8, activation="relu", input_shape=(6,)),
                                     md.keras.layers.Dense(2, activation="softmax")])
        model.compile(getattr(optimizers, name)(0.05, **hyper), "sparse_categorical_crossentropy")
    history = model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    return model, history


@pytest.mark.parametrize("name, hyper", [("Nadam", {}), ("RMSprop", {"centered": True, "momentum": 0.5}),
                                         ("Ftrl", {"l1_regularization_strength": 0.001}), ("Lion", {}),
                                         ("AdamW", {}), ("Adadelta", {}), ("Adamax", {}), ("Lamb", {})])
def test_fit_on_two_logical_cpus_equals_one_device_on_the_split_path(name, hyper):
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    model, history = _fit_small(strategy, name, hyper)
    ref, ref_history = _fit_small(None, name, hyper)
    # each replica updates half
    assert type(model.optimizer._update_plan(model.trainable_variables)).__name__ == "SplitPlan"
    for got, want in zip(model.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(history.history["loss"], ref_history.history["loss"], rtol=1e-5)
    assert int(model.optimizer.iterations) == 8
