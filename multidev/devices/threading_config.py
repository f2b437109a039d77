"""``md.config.threading``: torch's intra-op and inter-op thread pools, with TensorFlow's rules.

``set_intra_op_parallelism_threads(n)`` sets ``torch.set_num_threads(n)``;
``set_inter_op_parallelism_threads(n)`` sets ``torch.set_num_interop_threads(n)``; 0 means "let
the system choose" (torch's own default). As in TensorFlow, a change after the devices are
initialized (first ``list_logical_devices``, placed op or strategy) raises RuntimeError; setting
the current value again is a no-op. The getters return what was set (0 when never set).

Example:
    md.config.threading.set_intra_op_parallelism_threads(2)
    md.config.threading.get_intra_op_parallelism_threads()     # 2
"""

from __future__ import annotations

import torch

from multidev.devices.configuration import LOCK, STATE

_settings = {"intra": 0, "inter": 0}


def _check(name: str, num_threads) -> int:
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 0:
        raise ValueError(f"{name} expects a non-negative integer number of threads (0: let the system choose), "
                         f"got {num_threads!r}.")
    return num_threads


def _set(kind: str, label: str, num_threads: int, apply) -> None:
    with LOCK:
        if _settings[kind] == num_threads:
            return
        if STATE.initialized:
            raise RuntimeError(f"{label} parallelism cannot be modified after initialization (the devices were "
                               "initialized by the first list_logical_devices, placed op or strategy). Set it "
                               "at the start of the program.")
        if num_threads > 0:
            apply(num_threads)
        _settings[kind] = num_threads


def set_intra_op_parallelism_threads(num_threads: int) -> None:
    """Threads one op may use (``torch.set_num_threads``); before device initialization only.

    Example:
        >>> md.config.threading.set_intra_op_parallelism_threads(4)
    """
    _set("intra", "Intra op", _check("set_intra_op_parallelism_threads", num_threads), torch.set_num_threads)


def get_intra_op_parallelism_threads() -> int:
    """The intra-op thread count set (0: never set, the system chooses).

    Example:
        >>> md.config.threading.get_intra_op_parallelism_threads()
        0
    """
    return _settings["intra"]


def _set_interop(num_threads: int) -> None:
    try:
        torch.set_num_interop_threads(num_threads)
    except RuntimeError as err:
        raise RuntimeError(f"Inter op parallelism cannot be modified now: torch refuses ({err}); torch fixes its "
                           "inter-op pool at the first parallel work. Set it at the start of the program.") from err


def set_inter_op_parallelism_threads(num_threads: int) -> None:
    """Threads for running independent ops (``torch.set_num_interop_threads``); before device
    initialization only (torch also fixes it at its first inter-op work).

    Example:
        >>> md.config.threading.set_inter_op_parallelism_threads(2)
    """
    _set("inter", "Inter op", _check("set_inter_op_parallelism_threads", num_threads), _set_interop)


def get_inter_op_parallelism_threads() -> int:
    """The inter-op thread count set (0: never set, the system chooses).

    Example:
        >>> md.config.threading.get_inter_op_parallelism_threads()
        0
    """
    return _settings["inter"]
