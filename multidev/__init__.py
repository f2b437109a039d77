"""multidev: TensorFlow's multi-device system on PyTorch.

    import multidev as md
    md.config.list_physical_devices("GPU")
    strategy = md.distribute.MirroredStrategy()
    with strategy.scope():
        model = ...

Public names are re-exported here explicitly.
"""

from multidev import data
from multidev._core import errors
from multidev._core.enums import ReduceOp, VariableAggregation, VariableSynchronization
from multidev import config, debugging
from multidev.devices.spec import DeviceSpec
from multidev.placement import device
from multidev import distribute, nn
from multidev.autodiff import GradientTape, UnconnectedGradients
from multidev.function import executing_eagerly, function
from multidev.values import Variable
from multidev import keras
from multidev import integrations
from multidev import random, summary, train
from multidev.ops import add_n, constant, reduce_mean, reduce_sum
from multidev.py_functions import numpy_function, py_function   # tf.numpy_function in Dataset.map (keras.io 3D CT)
from multidev import array_ops, math
from multidev.array_ops import (abs, add, argmax, argmin, cast, clip_by_norm, clip_by_value, concat, convert_to_tensor,  # noqa: A004
                                divide, equal, exp, expand_dims, fill, gather, greater, greater_equal, identity, less,
                                less_equal, matmul, maximum, minimum, multiply, negative, not_equal, one_hot,
                                ones, ones_like, pow, range, rank, reduce_all, reduce_any, reduce_max, reduce_min,
                                reduce_prod, reshape, round, shape, sigmoid, sign, size, split, sqrt, square, squeeze,
                                stack, subtract, tanh, tile, transpose, unstack, where, zeros, zeros_like)
from multidev import saved_model
from multidev import io  # tf.io.gfile (multi-worker tutorials: mwtutorials)
from multidev import test  # tf.test's GPU queries
from multidev.module import Module
from multidev.data.spec import TensorSpec
from multidev.tensor_shape import TensorShape   # distributed-input guide (tfinput)
from multidev.printing import print  # noqa: A004  (tf.print; the guide prints per-replica values)
from multidev.dtypes import (bfloat16, bool, complex64, complex128, float16, float32, float64, int8, int16, int32,
                             int64, uint8)

__version__ = "0.1.0"

__all__ = [
    "data",
    "errors",
    "keras",
    "train",
    "ReduceOp",
    "VariableAggregation",
    "VariableSynchronization",
    "config",
    "debugging",
    "device",
    "DeviceSpec",
    "distribute",
    "nn",
    "GradientTape",
    "UnconnectedGradients",
    "function",
    "executing_eagerly",
    "test",
    "Variable",
    "__version__",
    "saved_model",
    "Module",
    "TensorSpec",
    "TensorShape",
    "print",
    "bfloat16", "bool", "complex64", "complex128", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8",
    "random",
    "summary",
    "constant",
    "reduce_sum",
    "reduce_mean",
    "add_n",
    "math",
    "numpy_function",
    "py_function",
] + array_ops.TOP_LEVEL


def __getattr__(name: str):
    """``md.X`` that multidev lacks: an AttributeError naming the torch function to call instead."""
    from multidev._core.missing import missing_attribute

    if name == "string":   # load_data/csv's `tf.keras.Input(..., dtype=tf.string)`
        from multidev.keras.layers.input_layer import NO_STRING_INPUTS
        raise AttributeError("module 'multidev' has no attribute 'string': md has no string tensors; "
                             + NO_STRING_INPUTS)
    raise missing_attribute("multidev", name, f"tf.{name}")


# ----- TensorFlow's short names for Keras modules (`tf.metrics` is `tf.keras.metrics`: the save_and_load
# tutorial writes `tf.metrics.SparseCategoricalAccuracy()`) -----
metrics, losses, optimizers = keras.metrics, keras.losses, keras.optimizers
initializers = keras.initializers   # the time_series tutorial's `tf.initializers.zeros()`
__all__ += ["metrics", "losses", "optimizers", "initializers"]

# ----- keras/text_classification's custom_standardization (tests/tutorials/_tf_text.py) -----
from multidev import strings  # noqa: E402

__all__ += ["strings"]

# ----- TensorFlow's core-tutorial names (tests/tutorials/test_tf_core_tutorials.py) -----
from multidev.autodiff import stop_gradient  # noqa: E402

newaxis = None   # TF's `x[..., tf.newaxis]`
__all__ += ["stop_gradient", "newaxis"]

# ----- guide/advanced_autodiff (tests/conformance/cases/autodiff_guide.py) -----
from multidev.custom_gradient import custom_gradient  # noqa: E402

__all__ += ["custom_gradient"]

# ----- guide/function's control flow, eager (tests/conformance/cases/function_guide.py) -----
from multidev.control_flow import TensorArray, cond, while_loop  # noqa: E402

__all__ += ["TensorArray", "cond", "while_loop"]

# ----- guide/intro_to_modules' name scopes (tests/conformance/cases/modules_variables_guide.py) -----
from multidev._core.name_scopes import name_scope  # noqa: E402

__all__ += ["name_scope"]
