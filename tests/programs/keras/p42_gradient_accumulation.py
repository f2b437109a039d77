"""Keras 3's ``gradient_accumulation_steps`` (keras.io's large-batch recipes set it on the optimizer): ``fit``
with ``SGD(momentum=0.9, gradient_accumulation_steps=2)`` and ``Adam(gradient_accumulation_steps=2)`` from the
same initial weights on the same batches as p41, the update applied every second batch with the mean of the two
batches' gradients.

TensorFlow 2.21's Keras 3 refuses it under MirroredStrategy (RuntimeError: its conditional update holds a
``merge_call``, p41_tensorflow.json has the same refusal for ``ema_overwrite_frequency``); Keras 3 on multidev
trains it as on one device. md.keras's optimizers do not take the argument (NotImplementedError, with the way
out in the message). Shrunk: 8 features, 64 examples, batch 16, 2 epochs.
"""

from tests.programs.keras.p41_optimizer_options import fit_with

SOURCE = "https://keras.io/api/optimizers/"
OPTIONS = {
    "sgd_momentum": ("SGD", {"learning_rate": 0.05, "momentum": 0.9, "gradient_accumulation_steps": 2}),
    "adam": ("Adam", {"learning_rate": 0.05, "gradient_accumulation_steps": 2}),
}


def run(keras, strategy, workdir, scale=1):
    out = {}
    for name, (cls, kwargs) in OPTIONS.items():
        model, out[name] = fit_with(keras, strategy, cls, kwargs, epochs=2 * scale)
        out[name]["iterations"] = int(model.optimizer.iterations.numpy())
    return {"_model": model, **out}
