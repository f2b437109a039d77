"""Warnings that point at the user's line, not at multidev's internals.

``warnings.warn(..., stacklevel=N)`` needs N fixed at the call, but a warning raised deep in a
rendezvous is reached through a varying number of multidev frames; a fixed N shows a newcomer
a multidev source line (``session = gate.admit()``) as if multidev were at fault. ``warn_user``
counts the frames inside the multidev package and reports the first frame outside it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import warnings

import torch

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: Frames passed over on the way out: multidev, the standard library (threading, contextlib) and torch.
_INTERNAL = (_PACKAGE_DIR, os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep,
             os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)


def user_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` in ``warn_user``: the innermost frame outside multidev,
    the standard library and torch (the calling program's line).

    A warning raised on a thread that multidev started has no program frame: it keeps multidev's
    line (stacklevel 2: the function that called ``warn_user``), as a plain ``warnings.warn`` would.
    """
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_INTERNAL):
        frame, level = frame.f_back, level + 1
    return 2 if frame is None else level


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first line of the calling program outside multidev."""
    warnings.warn(message, category, stacklevel=user_stacklevel())


__all__ = ["user_stacklevel", "warn_user"]
