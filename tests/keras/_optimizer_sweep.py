"""Optimizers and learning-rate schedules swept over a table, written once for ``tf`` = TensorFlow or multidev.

``python tests/keras/_optimizer_sweep.py tf`` (TensorFlow 2.21's python) prints one JSON dict
``{case id: observation}``; ``tests/keras/test_optimizer_sweep.py`` compares multidev's with the
recording ``tf_2.21_optimizer_sweep.json``. An optimizer observation is the float32 weights after
each of 6 ``apply_gradients`` steps (two variables, fixed gradients, the rate assigned to 0.02
before step 4 unless a schedule drives it), ``iterations`` and the final rate; or the exception's
type name. A schedule observation is its value at steps 0..12.
"""

import json
import sys

import numpy as np

if __name__ == "__main__" and sys.argv[1:] == ["tf"]:
    import tensorflow as tf
else:
    import multidev as tf

K = tf.keras
S = K.optimizers.schedules
STEPS = 6
SCHEDULES = {
    "exp": lambda: S.ExponentialDecay(0.1, decay_steps=3, decay_rate=0.5),
    "exp_staircase": lambda: S.ExponentialDecay(0.1, decay_steps=3, decay_rate=0.5, staircase=True),
    "piecewise": lambda: S.PiecewiseConstantDecay([2, 5], [0.1, 0.05, 0.01]),
    "cosine": lambda: S.CosineDecay(0.1, decay_steps=8, alpha=0.1),
    "cosine_warmup": lambda: S.CosineDecay(0.0, decay_steps=8, warmup_target=0.1, warmup_steps=3),
    "cosine_restarts": lambda: S.CosineDecayRestarts(0.1, first_decay_steps=3, t_mul=2.0, m_mul=0.5, alpha=0.1),
    "inverse_time": lambda: S.InverseTimeDecay(0.1, decay_steps=2, decay_rate=0.5),
    "inverse_time_staircase": lambda: S.InverseTimeDecay(0.1, decay_steps=2, decay_rate=0.5, staircase=True),
    "polynomial": lambda: S.PolynomialDecay(0.1, decay_steps=5, end_learning_rate=0.01, power=2.0),
    "polynomial_cycle": lambda: S.PolynomialDecay(0.1, decay_steps=4, end_learning_rate=0.01, power=0.5,
                                                  cycle=True),
}
OPTIMIZERS = [
    ("SGD", {}), ("SGD", {"momentum": 0.9}), ("SGD", {"momentum": 0.8, "nesterov": True}),
    ("Adam", {}), ("Adam", {"amsgrad": True}), ("AdamW", {}), ("AdamW", {"weight_decay": 0.1, "amsgrad": True}),
    ("Nadam", {}), ("Adamax", {}), ("RMSprop", {}), ("RMSprop", {"centered": True, "momentum": 0.5}),
    ("Adagrad", {}), ("Adadelta", {"learning_rate": 1.0}), ("Ftrl", {}), ("Lion", {}),
    *[(name, {"weight_decay": 0.05}) for name in ("SGD", "Adam", "Nadam", "RMSprop", "Adamax", "Lion")],
    *[(name, clip) for name in ("SGD", "Adam") for clip in
      ({"clipnorm": 0.5}, {"clipvalue": 0.3}, {"global_clipnorm": 0.6})],
    *[("SGD", {"momentum": 0.5, "learning_rate": schedule}) for schedule in SCHEDULES],
    ("Adam", {"learning_rate": "cosine_warmup"}),
    ("SGD", {"use_ema": True}), ("Adam", {"use_ema": True, "ema_momentum": 0.5, "ema_overwrite_frequency": 3}),
    ("AdamW", {"weight_decay": 0.1, "exclude_from_weight_decay": ["bias"]}),
    ("AdamW", {"weight_decay": 0.1, "exclude": ["bias"]}), ("SGD", {"weight_decay": 0.1, "exclude": ["ker"]}),
    ("SGD", {"clipnorm": 0.5, "clipvalue": 0.1}), ("SGD", {"gradient_accumulation_steps": 2}),
]


def _run(name, kwargs):
    kwargs = dict(kwargs)
    schedule = kwargs.get("learning_rate") in SCHEDULES
    if schedule:
        kwargs["learning_rate"] = SCHEDULES[kwargs["learning_rate"]]()
    kwargs.setdefault("learning_rate", 0.05)
    rng = np.random.RandomState(3)
    kernel = tf.Variable(rng.randn(3, 4).astype("float32"), name="kernel")
    bias = tf.Variable(rng.randn(4).astype("float32"), name="bias")
    exclude = kwargs.pop("exclude", None)
    opt = getattr(K.optimizers, name)(**kwargs)
    if exclude:
        opt.exclude_from_weight_decay(var_names=exclude)
    out = []
    for step in range(STEPS):
        if step == 3 and not schedule:
            opt.learning_rate = 0.02           # a rate assigned mid-training, as a callback does
        grads = [rng.randn(3, 4).astype("float32"), rng.randn(4).astype("float32")]
        opt.apply_gradients(zip([tf.constant(g) for g in grads], [kernel, bias]))
        out.append([np.asarray(kernel).tolist(), np.asarray(bias).tolist()])
    if getattr(opt, "use_ema", False):
        opt.finalize_variable_values([kernel, bias])
        out.append([np.asarray(kernel).tolist(), np.asarray(bias).tolist()])
    return {"w": out, "iterations": int(opt.iterations), "lr": float(np.asarray(opt.learning_rate))}


def observe(fn):
    try:
        return fn()
    except Exception as e:      # noqa: BLE001 - the type is the observation
        return type(e).__name__


def cases():
    out = {f"opt|{name}|{json.dumps(kw, sort_keys=True)}": observe(lambda: _run(name, kw)) for name, kw in OPTIMIZERS}
    for key, make in SCHEDULES.items():
        out[f"schedule|{key}"] = observe(lambda: [float(np.asarray(make()(step))) for step in range(13)])
    return out


if __name__ == "__main__":
    print(json.dumps(cases()))
