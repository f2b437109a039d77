"""Record TensorFlow 2.21's numbers for p41 (its options on one device and on MirroredStrategy over 2 logical
CPUs, with tf.keras = Keras 3 on TensorFlow and with tf_keras, the legacy Keras 2) into p41_tensorflow.json.

Run with TensorFlow's interpreter (CI has no TensorFlow; the JSON is committed):
    /work/tfvenv/bin/python tests/programs/keras/_p41_tensorflow.py
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _p41():
    spec = importlib.util.spec_from_file_location("p41", os.path.join(HERE, "p41_optimizer_options.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digits(value):
    return float(np.format_float_positional(np.float32(value), precision=7, unique=False, fractional=False))


def _fit(tf, cls, kwargs, strategy):
    try:
        _, out = _p41().fit_with(tf.keras, strategy, cls, kwargs)
    except RuntimeError as e:   # Keras 3 on TensorFlow: merge_call inside its graph's cond
        return {"raises": type(e).__name__, "message": next(l for l in str(e).splitlines() if "merge_call" in l)
                .replace("\x1b[1m", "")[:120]}
    return {k: [_digits(v) for v in w] if k == "loss" else np.vectorize(_digits)(w).tolist() for k, w in out.items()}


def record():
    """One flavour's ``{option: {"one_device": ..., "two_replicas": ...}}`` (the flavour: the environment's)."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    return {name: {"one_device": _fit(tf, cls, kwargs, tf.distribute.get_strategy()),
                   "two_replicas": _fit(tf, cls, kwargs, tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))}
            for name, (cls, kwargs) in _p41().OPTIONS.items()}


def _flavour(legacy):
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1" if legacy else "0", TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, __file__, "record"], env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    if sys.argv[1:] == ["record"]:
        print(json.dumps(record()))
        sys.exit(0)
    keras3, tf_keras = _flavour(legacy=False), _flavour(legacy=True)
    two = {n: v["two_replicas"].get("loss", v["two_replicas"]) for n, v in keras3.items()}
    out = {"recorded_with": "tensorflow-cpu 2.21.0: tf.keras (Keras 3.15.1 on TensorFlow) and tf_keras 2.21.0 "
                            "(TF_USE_LEGACY_KERAS=1); MirroredStrategy over 2 logical CPUs",
           "keras3_one_device": {n: v["one_device"] for n, v in keras3.items()},
           "keras3_two_replicas_loss": two,
           "tf_keras_one_device_loss": {n: v["one_device"]["loss"] for n, v in tf_keras.items()},
           "tf_keras_two_replicas_loss": {n: v["two_replicas"]["loss"] for n, v in tf_keras.items()}}
    with open(os.path.join(HERE, "p41_tensorflow.json"), "w") as f:
        f.write(json.dumps(out, indent=1) + "\n")
