"""Keras 3 models that multidev cannot distribute are refused when they enter a strategy, never trained wrong."""

from __future__ import annotations

import pytest

import multidev as md
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()


def _model():
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])


def test_keras3_model_built_in_scope_is_refused():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with pytest.raises(NotImplementedError, match=r"Keras 3 .*would train one copy"):
        with strategy.scope():
            _model()


def test_keras3_model_built_inside_run_is_refused():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with pytest.raises(NotImplementedError, match="inside strategy.run"):
        strategy.run(_model)


def test_keras3_outside_strategies_is_untouched():
    model = _model()
    assert model(keras.ops.ones((1, 3))).shape == (1, 2)
    with md.distribute.OneDeviceStrategy("/cpu:0").scope():
        _model()  # not distributing: nothing to refuse


def test_keras3_on_another_backend_is_refused_at_scope_entry(fresh):
    # jax/tensorflow are not installed here (Keras 3's numpy backend needs jax too), so a stand-in
    # module plays Keras 3 imported on the jax backend: multidev only reads keras.__version__ and
    # keras.backend.backend().
    proc = fresh(
        """
        import sys, types
        keras = types.ModuleType("keras")
        keras.__version__ = "3.15.1"
        keras.backend = types.SimpleNamespace(backend=lambda: "jax")
        sys.modules["keras"] = keras
        import multidev as md
        try:
            with md.distribute.MirroredStrategy().scope():
                print("ENTERED")
        except ValueError as e:
            print("REFUSED", e)
        """, timeout=240)
    assert "REFUSED" in proc.stdout and "ENTERED" not in proc.stdout, proc.stdout + proc.stderr
    assert "'jax'" in proc.stdout and "KERAS_BACKEND=torch before importing keras" in proc.stdout
