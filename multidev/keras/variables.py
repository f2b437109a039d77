"""``md.keras.Variable``: Keras 3's free-standing ``keras.Variable`` on md.keras.

keras.io's customizing-saving guide keeps one in a layer (``self.my_variable = keras.Variable(np.random.random((units,)),
name="my_variable", dtype="float32")``). It is an ``md.Variable``: a layer that keeps it as an attribute tracks it as a
weight, and in a strategy's scope it is distributed, as a ``tf.Variable`` made there is.

Example:
    >>> v = md.keras.Variable(np.zeros(3), name="v")         # float32, as Keras 3's floatx
    >>> w = md.keras.Variable("ones", shape=(2, 2), trainable=False)
"""

from __future__ import annotations

import numpy as np
import torch

from multidev.keras import initializers
from multidev.keras.layers import layer_state
from multidev.values.base_variable import Variable as _MdVariable


def Variable(initializer, shape=None, dtype=None, trainable=True, autocast=True, aggregation="none",  # noqa: N802
             synchronization="auto", name=None):
    """Keras 3's ``keras.Variable(initializer, shape, dtype, trainable, ...)``: a value, or an initializer (name
    or callable) with a ``shape``; a float value without ``dtype`` becomes float32 (Keras's floatx).

    Raises:
        ValueError: an initializer without ``shape``.
    """
    torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if isinstance(initializer, str) or (callable(initializer) and not isinstance(initializer, torch.Tensor)):
        if shape is None:
            raise ValueError(f"When creating a Variable from an initializer, the `shape` argument should be specified. "
                             f"Received: initializer={initializer!r} and shape={shape!r}")
        value = initializers.get(initializer)(tuple(shape), dtype=torch_dtype or torch.float32)
    else:
        value = initializer.detach() if isinstance(initializer, torch.Tensor) else torch.as_tensor(np.asarray(initializer))
        if torch_dtype is None and value.is_floating_point():
            torch_dtype = torch.float32
        value = value.to(torch_dtype) if torch_dtype is not None else value
    variable = _MdVariable(value, trainable=trainable, name=name, synchronization=synchronization,
                           aggregation=aggregation)
    return layer_state.hand_variable_whole(variable)   # NNCLR's queue.assign in train_step, on replicas
