"""``md.keras.ops``: the Keras 3 ops that keras.io programs use, as thin functions over torch.

``ops.X`` takes and returns ``torch.Tensor``s with Keras 3's dtype rules (Python ints -> int32,
floats -> float32, float ops on ints -> float32) and Keras 3's defaults (``gelu`` approximate,
``leaky_relu`` slope 0.2). Each op is tested against ``keras.ops.X`` (torch backend) on the same
inputs (tests/keras/test_keras_ops.py). A name Keras 3 has and md.keras lacks raises an AttributeError
that says so. Called outside every layer (a program's own code: keras.io's DDPG ``policy`` does
``ops.squeeze(actor_model(state)).numpy()``), an op's tensors are ``readable`` (``.numpy()`` reads them while
they carry gradients, as TensorFlow's eager tensors; ``layers/symbolic_ops.py``'s wrapper does it); inside a
layer's call they are plain torch tensors.

Example:
    from multidev.keras import ops
    probs = ops.softmax(ops.matmul(x, w), axis=-1)
    top = ops.argmax(probs, axis=-1)
"""

from __future__ import annotations

from multidev.keras._missing import missing_names
from multidev.keras.ops import (activations_more, arrays, control, conv_ops, core, ctc, elementwise, image, linalg, math_more,
                                misc, nn, nn_more, numpy, signal_ops, stats)
from multidev.keras.ops.fft import __all__ as _fft_all
from multidev.keras.ops.core import *  # noqa: F401,F403 - the flat keras.ops namespace
from multidev.keras.ops.core import __all__ as _core_all
from multidev.keras.ops.ctc import *  # noqa: F401,F403
from multidev.keras.ops.elementwise import *  # noqa: F401,F403
from multidev.keras.ops.fft import *  # noqa: F401,F403
from multidev.keras.ops.nn import *  # noqa: F401,F403
from multidev.keras.ops.numpy import *  # noqa: F401,F403
from multidev.keras.ops.math_more import *  # noqa: F401,F403
from multidev.keras.ops.arrays import *  # noqa: F401,F403
from multidev.keras.ops.activations_more import *  # noqa: F401,F403
from multidev.keras.ops.linalg import *  # noqa: F401,F403
from multidev.keras.ops.stats import *  # noqa: F401,F403
from multidev.keras.ops.misc import *  # noqa: F401,F403
from multidev.keras.ops.nn_more import *  # noqa: F401,F403
from multidev.keras.ops.control import *  # noqa: F401,F403
from multidev.keras.ops.signal_ops import *  # noqa: F401,F403
from multidev.keras.ops.conv_ops import *  # noqa: F401,F403


def _public(module) -> list:
    return [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
            and getattr(v, "__module__", None) == module.__name__]


#: the modules added after the first ones; layers/symbolic_ops.py wraps their ops for KerasTensors as well
MORE_MODULES = (math_more, arrays, activations_more, linalg, stats, misc, nn_more, control, signal_ops, conv_ops)
__all__ = sorted(set(_core_all) | set(ctc.__all__) | set(_fft_all)
                 | {n for m in (elementwise, nn, numpy, *MORE_MODULES) for n in _public(m)}
                 | {"image", "nn", "numpy", "core", "linalg"})
__getattr__ = missing_names(__name__, "ops", globals())
