"""The Keras 3 variants of the training benchmark (issue 13): the workload's model built with Keras 3
layers (torch backend) and trained by Keras 3's own ``model.fit``.

    keras3_own    Keras 3's fit on one device, no multidev strategy (the reference for keras3_fit1)
    keras3_fit1   compiled in a one-device ``MirroredStrategy``'s scope: Keras's fit through multidev
    keras3_fit2   the same on 2 logical devices (compared with the plain torch loop, same global batch)

keras is imported only when one of these variants is built (``import_keras``), with
``KERAS_BACKEND=torch``; a missing Keras names the extra to install.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Sequence

import torch

from multidev.bench.measure import fit_epoch_runner
from multidev.bench.workloads import CLASSES, SEQ_LEN, VOCAB, Workload

KERAS3_VARIANTS = ("keras3_own", "keras3_fit1", "keras3_fit2")
INSTALL_HINT = "pip install 'multidev[keras3]'"


class KerasUnavailable(RuntimeError):
    """Keras 3 on the torch backend cannot be imported (not installed, or another backend already loaded)."""


def keras_missing() -> str | None:
    """Why the Keras 3 variants cannot run in a fresh interpreter (None: keras is installed); imports nothing."""
    import importlib.util

    if importlib.util.find_spec("keras") is None:
        return f"the Keras 3 variants need Keras 3, which is not installed: {INSTALL_HINT}"
    backend = os.environ.get("KERAS_BACKEND")
    if backend not in (None, "", "torch"):
        return (f"the Keras 3 variants run Keras on its torch backend, but KERAS_BACKEND={backend!r}: "
                "unset it or set KERAS_BACKEND=torch")
    return None


def import_keras() -> Any:
    """``keras`` (Keras 3, torch backend), importing it with ``KERAS_BACKEND=torch`` on first use."""
    if "keras" not in sys.modules:
        reason = keras_missing()
        if reason:
            raise KerasUnavailable(reason)
        os.environ["KERAS_BACKEND"] = "torch"
        import keras  # noqa: F401  (the optional extra)
    keras = sys.modules["keras"]
    if not str(keras.__version__).startswith("3.") or keras.backend.backend() != "torch":
        raise KerasUnavailable(f"the Keras 3 variants need Keras 3 on the torch backend; found keras "
                               f"{keras.__version__} on {keras.backend.backend()!r}: {INSTALL_HINT}, KERAS_BACKEND=torch")
    return keras


def _mlp(keras: Any) -> Any:
    """``workloads.GradientHeavyMLP`` in Keras 3 layers."""
    layers = [keras.Input((1024,))] + [keras.layers.Dense(1024, activation="relu") for _ in range(4)]
    return keras.Sequential(layers + [keras.layers.Dense(10)])


def _text_conv(keras: Any) -> Any:
    """``workloads.TextConvNet`` in Keras 3 layers (channels last; the same 332,856 parameters)."""
    L = keras.layers
    return keras.Sequential([keras.Input((SEQ_LEN,), dtype="int64"), L.Embedding(VOCAB, 7),
                             L.Conv1D(64, 5, activation="relu"), L.MaxPooling1D(2),
                             L.Conv1D(32, 3, activation="relu"), L.MaxPooling1D(2), L.Flatten(), L.Dense(CLASSES)])


#: workload name -> (Keras 3 model, Keras 3 optimizer with the torch optimizer's update rule)
MODELS: dict[str, tuple[Callable, Callable]] = {
    "mlp": (_mlp, lambda keras: keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)),
    "text_conv": (_text_conv, lambda keras: keras.optimizers.Nadam(learning_rate=1e-3, epsilon=1e-8)),
}


def supports(workload: str) -> bool:
    """Whether ``workload`` has a Keras 3 model (the transformer has none: Keras's MultiHeadAttention differs)."""
    return workload in MODELS


def keras3_model(workload: Workload, strategy: Any = None) -> Any:
    """The workload's Keras 3 model, compiled (in ``strategy``'s scope if given), seeded like the others."""
    import contextlib

    keras = import_keras()
    if not supports(workload.name):
        raise ValueError(f"Workload {workload.name!r} has no Keras 3 model; Keras 3 variants run on: {sorted(MODELS)}.")
    make_model, make_optimizer = MODELS[workload.name]
    keras.utils.set_random_seed(0)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = make_model(keras)
        model.compile(optimizer=make_optimizer(keras),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def strategy_for(variant: str, names: Sequence[str]) -> Any:
    """None for Keras's own fit; a ``MirroredStrategy`` on the first 1 or 2 logical devices otherwise."""
    import multidev as md

    if variant == "keras3_own":
        return None
    return md.distribute.MirroredStrategy(list(names[:devices_needed(variant)]))


def devices_needed(variant: str) -> int:
    return 2 if variant == "keras3_fit2" else 1


def fit_runner(workload: Workload, strategy: Any, device: torch.device) -> Callable[[Sequence], tuple[float, float]]:
    """``run(batches)``: one epoch of Keras 3's ``fit`` over the batches (concatenated once, not shuffled)."""
    return fit_epoch_runner(keras3_model(workload, strategy), workload.batch_size, device)
