"""``md.distribute.cluster_resolver``: how a strategy learns its cluster (TF_CONFIG, torchrun, explicit).

``default_cluster_resolver()`` picks what a strategy created without a resolver uses: torchrun's
variables when present, else ``TF_CONFIG`` (an empty cluster when neither is set).
"""

from __future__ import annotations

from multidev.distribute.cluster_resolver.base import ClusterResolver
from multidev.distribute.cluster_resolver.simple import SimpleClusterResolver
from multidev.distribute.cluster_resolver.tfconfig import TFConfigClusterResolver
from multidev.distribute.cluster_resolver.tpu import TPUClusterResolver
from multidev.distribute.cluster_resolver.torchrun import TorchrunClusterResolver, torchrun_env_present
from multidev.distribute.cluster_resolver.world import collective_world, parameter_server_world


def default_cluster_resolver() -> ClusterResolver:
    """``TorchrunClusterResolver`` under torchrun (and no TF_CONFIG), else ``TFConfigClusterResolver``."""
    import os

    if torchrun_env_present() and not os.environ.get("TF_CONFIG", "").strip():
        return TorchrunClusterResolver()
    return TFConfigClusterResolver()


__all__ = [
    "ClusterResolver",
    "SimpleClusterResolver",
    "TFConfigClusterResolver",
    "TorchrunClusterResolver",
    "TPUClusterResolver",
    "collective_world",
    "parameter_server_world",
    "default_cluster_resolver",
]
