"""``md.distribute.cluster_resolver.TPUClusterResolver``: present so TensorFlow code ports, but
multidev has no TPU backend; constructing one raises ValueError naming what is missing.

Example:
    try:
        resolver = md.distribute.cluster_resolver.TPUClusterResolver(tpu="")
    except ValueError as err:
        print(err)     # ... torch_xla is not installed ...; no TPU runtime was found ...
"""

from __future__ import annotations

import glob
import importlib.util
import os


def _missing() -> list[str]:
    """What a TPU run would need and this machine lacks."""
    missing = []
    if importlib.util.find_spec("torch_xla") is None:
        missing.append("torch_xla is not installed (PyTorch's TPU backend: pip install 'torch_xla[tpu]')")
    if not (glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*") or os.environ.get("TPU_NAME")
            or os.environ.get("COLAB_TPU_ADDR")):
        missing.append("no TPU runtime was found (no /dev/accel* or /dev/vfio devices, TPU_NAME and "
                       "COLAB_TPU_ADDR unset)")
    missing.append("multidev has no TPU backend: its strategies run on CPUs and GPUs")
    return missing


def refuse(what: str, received: str) -> ValueError:
    return ValueError(f"{what}({received}) cannot run here: " + "; ".join(_missing()) + ". Use "
                      "md.distribute.MirroredStrategy() (GPUs or logical CPUs) or MultiWorkerMirroredStrategy instead.")


class TPUClusterResolver:
    """TensorFlow's TPU cluster resolver; raises ValueError at construction (no TPU support).

    Example:
        >>> md.distribute.cluster_resolver.TPUClusterResolver(tpu="")   # ValueError: ... torch_xla ...
    """

    def __init__(self, tpu=None, zone=None, project=None, job_name="worker", coordinator_name=None,
                 coordinator_address=None, credentials="default", service=None, discovery_url=None):
        raise refuse("TPUClusterResolver", f"tpu={tpu!r}")

    @staticmethod
    def connect(tpu=None, zone=None, project=None):
        """TF's resolve-and-initialize shortcut; raises ValueError as the constructor does."""
        raise refuse("TPUClusterResolver.connect", f"tpu={tpu!r}")
