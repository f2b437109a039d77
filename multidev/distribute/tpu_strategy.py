"""``md.distribute.TPUStrategy`` and ``TPUClusterResolver``: present so TensorFlow code ports, but
multidev has no TPU backend; constructing one raises ValueError naming what is missing.

Example:
    try:
        resolver = md.distribute.cluster_resolver.TPUClusterResolver(tpu="")
        strategy = md.distribute.TPUStrategy(resolver)
    except ValueError:
        strategy = md.distribute.MirroredStrategy()      # the usual fallback in TF's tutorials
"""

from __future__ import annotations

from multidev.distribute.cluster_resolver.tpu import refuse
from multidev.distribute.strategy import Strategy


class TPUStrategy(Strategy):
    """TensorFlow's TPU strategy (a ``md.distribute.Strategy``, as in TensorFlow); raises ValueError at
    construction, before any ``extended`` exists (no TPU support).

    Example:
        >>> md.distribute.TPUStrategy()      # ValueError naming what is missing
    """

    def __init__(self, tpu_cluster_resolver=None, experimental_device_assignment=None,
                 experimental_spmd_xla_partitioning=False):
        raise refuse(type(self).__name__, f"tpu_cluster_resolver={tpu_cluster_resolver!r}")
