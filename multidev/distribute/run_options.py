"""``md.distribute.RunOptions``: options of ``strategy.run`` (TensorFlow's ``tf.distribute.RunOptions``).

Every option concerns TPU or XLA compilation in TensorFlow; multidev accepts them so TensorFlow
programs run unchanged, and ``strategy.run`` does not change its behaviour for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunOptions:
    """``strategy.run(fn, options=md.distribute.RunOptions())``.

    Example:
        >>> strategy.run(step, args=(batch,), options=md.distribute.RunOptions())
    """

    experimental_enable_dynamic_batch_size: bool = True
    experimental_bucketizing_dynamic_shape: bool = False
    experimental_xla_options: Any = None
