"""Warnings that point at the user's line, not at multidev's internals.

``warnings.warn(..., stacklevel=N)`` needs N fixed at the call, but a warning raised deep in a
rendezvous is reached through a varying number of multidev frames; a fixed N shows a newcomer
a multidev source line (``session = gate.admit()``) as if multidev were at fault. ``warn_user``
counts the frames inside the multidev package and reports the first frame outside it.
"""

from __future__ import annotations

import os
import sys
import warnings

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` that, passed to ``warnings.warn`` by this function's caller, names the
    innermost frame outside multidev (the calling program's line)."""
    frame, level = sys._getframe(1), 1
    while os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        if frame.f_back is None:   # a multidev thread: no program line to name, keep the outermost
            return level
        frame, level = frame.f_back, level + 1
    return level


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first line of the calling program outside multidev."""
    warnings.warn(message, category, stacklevel=user_stacklevel())


__all__ = ["user_stacklevel", "warn_user"]
