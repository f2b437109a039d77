"""What multidev cannot distribute for Keras 3 is refused with a clear error, never trained wrong."""

from __future__ import annotations

import pytest
import torch

import multidev as md
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()

DEVICES = ["/cpu:0", "/cpu:1"]


def _model():
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])


def test_keras_on_batch_methods_on_a_distributed_model_work():
    """train_on_batch/test_on_batch/predict_on_batch run distributed (equality: test_keras3_on_batch.py)."""
    with md.distribute.MirroredStrategy(DEVICES).scope():
        model = _model()
        model.compile(optimizer="sgd", loss="mse")
    before = model.layers[0].kernel.numpy().copy()
    loss = model.train_on_batch(torch.ones(3, 3), torch.ones(3, 2))
    assert float(loss) > 0 and (model.layers[0].kernel.numpy() != before).any()
    assert int(model.optimizer.iterations.numpy()) == 1
    assert list(model.test_on_batch(torch.ones(4, 3), torch.ones(4, 2), return_dict=True)) == ["loss"]
    assert model.predict_on_batch(torch.ones(3, 3)).shape == (3, 2)


def test_keras_predict_on_one_worker_multi_worker_mirrored_equals_the_plain_model():
    keras.utils.set_random_seed(0)
    plain = _model()
    keras.utils.set_random_seed(0)
    with md.distribute.MultiWorkerMirroredStrategy().scope():
        model = _model()
        model.compile(optimizer="sgd", loss="mse")
    x = torch.arange(15.0).reshape(5, 3)
    torch.testing.assert_close(torch.as_tensor(model.predict(x, batch_size=2, verbose=0)),
                               torch.as_tensor(plain.predict(x, batch_size=2, verbose=0)))


def test_keras_on_batch_methods_on_one_worker_multi_worker_mirrored_equal_the_plain_model():
    x, y = torch.arange(15.0).reshape(5, 3) / 10, torch.ones(5, 2)
    keras.utils.set_random_seed(0)
    plain = _model()
    plain.compile(optimizer="adam", loss="mse", metrics=["mae"])
    keras.utils.set_random_seed(0)
    with md.distribute.MultiWorkerMirroredStrategy().scope():
        model = _model()
        model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    for m in (plain, model):
        m.train_on_batch(x, y)
    assert model.train_on_batch(x[:3], y[:3], return_dict=True) == plain.train_on_batch(x[:3], y[:3], return_dict=True)
    assert model.test_on_batch(x, y) == plain.test_on_batch(x, y)
    torch.testing.assert_close(torch.as_tensor(model.predict_on_batch(x)), torch.as_tensor(plain.predict_on_batch(x)))


def test_keras_own_fit_outside_strategies_still_works():
    model = _model()
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(torch.ones(4, 3), torch.ones(4, 2), epochs=1, verbose=0)
    assert len(history.history["loss"]) == 1


def test_variables_created_inside_run_are_refused():
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with pytest.raises(ValueError, match=r"created inside strategy.run.*create the model and its layers in "
                                         r"strategy.scope"):
        strategy.run(_model)


def test_keras_optimizer_applied_in_run_to_a_model_made_outside_the_scope_is_refused():
    strategy = md.distribute.MirroredStrategy(DEVICES)
    model = _model()  # no scope: one plain copy every replica would update
    optimizer = keras.optimizers.SGD(0.1)
    before = model.layers[0].kernel.numpy().copy()

    def step():
        model.zero_grad()
        model(torch.ones(2, 3)).sum().backward()
        optimizer.apply([v.value.grad for v in model.trainable_variables], model.trainable_variables)

    with pytest.raises(ValueError, match=r"not distributed.*created outside the strategy's scope"):
        strategy.run(step)
    assert (model.layers[0].kernel.numpy() == before).all()


def test_layers_created_outside_the_scope_are_refused_when_the_model_is_built_in_it():
    dense = keras.layers.Dense(2)
    dense.build((None, 3))  # variables created outside any strategy
    with pytest.raises(NotImplementedError, match="created outside"):
        with md.distribute.MirroredStrategy(DEVICES).scope():
            keras.Sequential([keras.Input((3,)), dense])


def test_other_distributing_strategies_are_refused():
    with pytest.raises(NotImplementedError, match="only under md.distribute.MirroredStrategy and MultiWorker"):
        with md.distribute.CentralStorageStrategy(DEVICES).scope():
            _model()


def test_keras3_outside_distributing_strategies_is_untouched():
    model = _model()
    assert model(keras.ops.ones((1, 3))).shape == (1, 2)
    with md.distribute.OneDeviceStrategy("/cpu:0").scope():
        assert type(_model().layers[0].kernel._value) is torch.nn.Parameter


def _enter_scope_with_stand_in_keras(fresh, version: str, backend: str, error: str):
    """A stand-in module plays Keras ``version`` imported on ``backend`` (multidev only reads
    keras.__version__ and keras.backend.backend()); enter a MirroredStrategy scope, catching ``error``."""
    proc = fresh(
        f"""
        import sys, types
        keras = types.ModuleType("keras")
        keras.__version__ = {version!r}
        keras.backend = types.SimpleNamespace(backend=lambda: {backend!r})
        sys.modules["keras"] = keras
        import multidev as md
        try:
            with md.distribute.MirroredStrategy().scope():
                print("ENTERED")
        except {error} as e:
            print("REFUSED", e)
        """, timeout=240)
    assert "REFUSED" in proc.stdout and "ENTERED" not in proc.stdout, proc.stdout + proc.stderr
    return proc


def test_keras3_on_another_backend_is_refused_at_scope_entry(fresh):
    # jax/tensorflow are not installed here (Keras 3's numpy backend needs jax too), so a stand-in plays them.
    proc = _enter_scope_with_stand_in_keras(fresh, "3.15.1", "jax", "ValueError")
    assert "'jax'" in proc.stdout and "KERAS_BACKEND=torch before importing keras" in proc.stdout


def test_unsupported_keras_version_is_refused_at_scope_entry(fresh):
    proc = _enter_scope_with_stand_in_keras(fresh, "3.99.0", "torch", "NotImplementedError")
    assert "'3.99.0'" in proc.stdout and "multidev[keras3]" in proc.stdout


def test_unseeded_keras_random_inside_run_is_allowed():
    strategy = md.distribute.MirroredStrategy(DEVICES)
    out = strategy.run(lambda: keras.random.normal((2,)))  # keras's per-thread global seed generator
    assert all(v.shape == (2,) for v in strategy.experimental_local_results(out))
