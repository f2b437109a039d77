"""Import Keras 3 on its torch backend for in-process tests, or skip (keras is the optional extra)."""

from __future__ import annotations

import os
import sys

import pytest


def import_keras3():
    """``keras`` imported with ``KERAS_BACKEND=torch`` (the environment is restored afterwards); skips without it."""
    if "keras" not in sys.modules:
        # Importing Keras's torch backend writes to os.environ (TF_FORCE_GPU_ALLOW_GROWTH=true, KMP_* ...),
        # which every later fresh interpreter of the suite would inherit: put the environment back as it was.
        saved = dict(os.environ)
        os.environ["KERAS_BACKEND"] = "torch"
        try:
            keras = pytest.importorskip("keras", reason="Keras 3 is not installed (pip install 'multidev[keras3]')")
        finally:
            os.environ.clear()
            os.environ.update(saved)
    keras = sys.modules["keras"]
    if not str(keras.__version__).startswith("3.") or keras.backend.backend() != "torch":
        pytest.skip(f"needs Keras 3 on the torch backend, found keras {keras.__version__} "
                    f"on {keras.backend.backend()!r}")
    return keras
