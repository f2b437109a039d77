"""The logging-only mode that makes placement logging see ops outside every ``md.device`` scope.

Torch function modes are per thread, so :func:`set_log_device_placement` installs it in the
calling thread (at the bottom of that thread's mode stack, under any scopes already open, as
PyTorch's own default-device mode does). Threads that enter scopes while logging is on get
logging scope modes instead, so replica threads of strategies are logged too.
"""

from __future__ import annotations

import contextvars

from torch._C import _len_torch_function_stack
from torch.overrides import _pop_mode, _push_mode

from multidev.placement import log
from multidev.placement.mode import PlacementMode

# The logging mode installed at the bottom of this thread's torch mode stack (a new thread has none).
_installed: contextvars.ContextVar[PlacementMode | None] = contextvars.ContextVar("multidev_log_mode", default=None)


def _rebuild_stack(add: PlacementMode | None, remove: PlacementMode | None) -> None:
    """Pop this thread's modes, drop ``remove``, put ``add`` at the bottom, push the rest back."""
    modes = [_pop_mode() for _ in range(_len_torch_function_stack())]
    if add is not None:
        _push_mode(add)
    for mode in reversed(modes):
        if mode is not remove:
            _push_mode(mode)


def set_log_device_placement(enabled: bool) -> None:
    """Turn placement logging on or off, and (un)install the logging mode in this thread."""
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True or False, got {enabled!r}.")
    log.set_enabled(enabled)
    installed = _installed.get()
    if enabled and installed is None:
        mode = PlacementMode(None)
        _installed.set(mode)
        _rebuild_stack(add=mode, remove=None)
    elif not enabled and installed is not None:
        _installed.set(None)
        _rebuild_stack(add=None, remove=installed)


__all__ = ["set_log_device_placement"]
