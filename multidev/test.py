"""``md.test``: TensorFlow's ``tf.test`` GPU queries that scripts print before training.

``is_gpu_available`` and ``gpu_device_name`` initialize the devices, as TensorFlow's do (configure
devices before calling them); the ``is_built_with_*`` queries do not.

Example:
    >>> md.test.is_built_with_cuda(), md.test.gpu_device_name()     # a CPU build of torch
    (False, '')
"""

from __future__ import annotations

import torch


def is_built_with_cuda() -> bool:
    """Whether torch was built with CUDA (``torch.version.cuda``)."""
    return torch.version.cuda is not None


def is_built_with_rocm() -> bool:
    """Whether torch was built with ROCm (``torch.version.hip``)."""
    return getattr(torch.version, "hip", None) is not None


def is_built_with_gpu_support() -> bool:
    """Whether torch was built with CUDA or ROCm."""
    return is_built_with_cuda() or is_built_with_rocm()


def is_gpu_available(cuda_only: bool = False, min_cuda_compute_capability=None) -> bool:
    """Whether a GPU is visible (TensorFlow deprecates it for ``md.config.list_physical_devices('GPU')``).

    ``min_cuda_compute_capability`` (``(major, minor)``) requires a GPU of at least that capability."""
    from multidev.config import get_device_details, list_physical_devices

    gpus = list_physical_devices("GPU")
    if cuda_only and not is_built_with_cuda():
        return False
    if min_cuda_compute_capability is None:
        return bool(gpus)
    want = tuple(min_cuda_compute_capability)
    return any(tuple(get_device_details(g).get("compute_capability") or (0, 0)) >= want for g in gpus)


def gpu_device_name() -> str:
    """``'/device:GPU:0'`` when a logical GPU exists, else ``''``."""
    from multidev.devices.registry import list_logical_devices

    return "/device:GPU:0" if list_logical_devices("GPU") else ""


__all__ = ["gpu_device_name", "is_built_with_cuda", "is_built_with_gpu_support", "is_built_with_rocm",
           "is_gpu_available"]
