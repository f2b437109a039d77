"""A plain function in ``compile(metrics=[...])`` (keras.io EDSR's ``def PSNR(super_resolution, high_resolution)``)
logs under Keras 3's name: the function's name in snake case (``psnr``, ``val_psnr``), as TensorFlow 2.21's Keras 3
does (``tf_2.21_function_metric_names.json``; tf_keras 2 kept ``PSNR``). A Keras 3 program's
``history.history["psnr"]`` or ``ModelCheckpoint(monitor="val_psnr")`` would otherwise find nothing."""

import json
import os

import numpy as np

import multidev as md

HERE = os.path.dirname(os.path.abspath(__file__))


def PSNR(a, b):   # noqa: N802 - the example's name
    return md.keras.ops.mean(a - b)


def myMetric_X(a, b):   # noqa: N802 - a mixed-case name
    return md.keras.ops.mean(a - b)


def _history_keys(metrics):
    keras = md.keras
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mae", metrics=metrics)
    x, y = np.ones((4, 2), "float32"), np.ones((4, 1), "float32")
    return sorted(model.fit(x, y, epochs=1, verbose=0, validation_data=(x, y)).history)


def test_function_metrics_log_under_keras3s_snake_case_names():
    with open(os.path.join(HERE, "tf_2.21_function_metric_names.json")) as f:
        tf = json.load(f)
    assert _history_keys([PSNR, myMetric_X]) == tf["keras3"]


def test_evaluate_and_named_metrics_keep_their_names():
    keras = md.keras
    assert _history_keys([keras.metrics.MeanMetricWrapper(PSNR, name="PSNR")]) == ["PSNR", "loss", "val_PSNR",
                                                                                    "val_loss"]
    assert _history_keys(["mae", keras.metrics.MeanAbsoluteError(name="MAE")]) == [
        "MAE", "loss", "mae", "val_MAE", "val_loss", "val_mae"]
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mae", metrics=[PSNR])
    got = model.evaluate(np.ones((4, 2), "float32"), np.ones((4, 1), "float32"), verbose=0, return_dict=True)
    assert sorted(got) == ["loss", "psnr"]
