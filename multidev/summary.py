"""``md.summary``: TensorFlow's summary API writing TensorBoard event files (``torch.utils.tensorboard``).

Example:
    writer = md.summary.create_file_writer("/tmp/logs/train")
    with writer.as_default(step=0):
        md.summary.scalar("loss", 0.25)              # at the default step 0
        md.summary.scalar("accuracy", 0.9, step=1)
    writer.flush()

Writes go to the default writer (``as_default`` / ``set_as_default``; process-wide, so replica
threads see it too); without one, ``scalar`` returns False and writes nothing, as in TensorFlow.
The step is the ``step`` argument, else ``experimental.set_step``'s or ``as_default(step=...)``'s
(a variable is read at write time).
"""

from __future__ import annotations

import contextlib
import os
import threading
import types
from typing import Any

import torch

from multidev.values import context

_lock = threading.Lock()
_writers: list = []            # default writer stack, innermost last
_steps: list = [None]          # default step stack (experimental.set_step sets the bottom)


class SummaryWriter:
    """Writes summaries to one log directory (what ``create_file_writer`` returns).

    Example:
        >>> writer = md.summary.create_file_writer("/tmp/logs")
        >>> with writer.as_default(step=1):
        ...     md.summary.scalar("loss", 0.5)
    """

    def __init__(self, logdir: str, max_queue: int, flush_secs: float, filename_suffix: str):
        self.logdir = logdir
        self._args = dict(log_dir=logdir, max_queue=max_queue, flush_secs=flush_secs, filename_suffix=filename_suffix)
        self._writer = None
        self._closed = False

    def init(self) -> None:
        """Create the event file now (it is otherwise created at the first write)."""
        self._torch_writer()

    def _torch_writer(self):
        if self._closed:
            raise RuntimeError(f"SummaryWriter for {self.logdir!r} is closed; create a new one with "
                               "md.summary.create_file_writer.")
        if self._writer is None:
            try:
                from torch.utils.tensorboard import SummaryWriter as TorchWriter
            except ImportError as err:  # tensorboard is an optional dependency of torch
                raise ImportError("md.summary needs the `tensorboard` package: pip install tensorboard") from err
            self._writer = TorchWriter(**self._args)
        return self._writer

    @contextlib.contextmanager
    def as_default(self, step=None):
        """Make this the default writer (and ``step`` the default step) inside the block; flushes on exit."""
        with _lock:
            _writers.append(self)
            if step is not None:
                _steps.append(step)
        try:
            yield self
        finally:
            with _lock:
                _writers.remove(self)
                if step is not None:
                    _steps.pop()
            self.flush()

    def set_as_default(self, step=None) -> None:
        """Make this the default writer until another is set (``step``: the default step)."""
        with _lock:
            _writers[:] = [self]
            if step is not None:
                _steps[0] = step

    def flush(self) -> None:
        """Write buffered events to disk."""
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file; later writes raise."""
        if self._writer is not None:
            self._writer.close()
        self._closed = True


class _NoopWriter(SummaryWriter):
    def __init__(self):
        super().__init__("", 10, 120.0, "")

    def _torch_writer(self):
        return None


def create_file_writer(logdir, max_queue=None, flush_millis=None, filename_suffix=None, name=None,
                       experimental_trackable=False, experimental_mesh=None) -> SummaryWriter:
    """A writer of TensorBoard event files in ``logdir`` (created if needed).

    Args:
        logdir: directory for the event files.
        max_queue: events buffered before a write (default 10).
        flush_millis: longest time between flushes (default 120000).
        filename_suffix: appended to the event file's name.

    Example:
        >>> writer = md.summary.create_file_writer("/tmp/md_summary_doc")
    """
    if not isinstance(logdir, (str, os.PathLike)) or not os.fspath(logdir):
        raise ValueError(f"create_file_writer needs a log directory path, got logdir={logdir!r}.")
    return SummaryWriter(os.fspath(logdir), 10 if max_queue is None else int(max_queue),
                         120.0 if flush_millis is None else flush_millis / 1000.0, filename_suffix or "")


def create_noop_writer() -> SummaryWriter:
    """A writer that records nothing (to switch summaries off without changing the code).

    Example:
        >>> writer = md.summary.create_noop_writer() if not is_chief else md.summary.create_file_writer(logdir)
    """
    return _NoopWriter()


def _resolve_step(step) -> int:
    if step is None:
        with _lock:
            step = _steps[-1]
    if step is None:
        raise ValueError("No step set. Please specify one of: the `step` argument, "
                         "md.summary.experimental.set_step(step), or writer.as_default(step=step).")
    return int(step)


def _scalar_value(name: str, data: Any) -> float:
    tensor = data.detach() if isinstance(data, torch.Tensor) else torch.as_tensor(data)
    if tensor.dim() != 0:
        raise ValueError(f"md.summary.scalar({name!r}) needs a scalar, got a tensor of shape {tuple(tensor.shape)}.")
    return float(tensor.reshape(()))


def _top_writer():
    with _lock:
        return _writers[-1] if _writers else None


def _default_writer():
    """The writer a summary goes to now, or None: none set, ``record_if`` off, or a replica other than
    the first (TensorFlow records a summary written inside ``strategy.run`` once, from replica 0)."""
    writer = _top_writer()
    with _lock:
        conditions = list(_conditions)
    if writer is None or not all(c() if callable(c) else bool(c) for c in conditions):
        return None
    replica = context.current_replica_context()
    if replica is not None and replica.replica_id_in_sync_group != 0:
        return None
    return writer


_conditions: list = []         # record_if conditions, innermost last (a callable is evaluated per write)


@contextlib.contextmanager
def record_if(condition):
    """Record summaries only while ``condition`` (a bool, a scalar tensor, or a callable giving one) holds.

    Example:
        >>> with md.summary.record_if(lambda: int(step) % 100 == 0):
        ...     md.summary.scalar("loss", loss, step=step)
    """
    with _lock:
        _conditions.append(condition)
    try:
        yield
    finally:
        with _lock:
            _conditions.pop()


def should_record_summaries() -> bool:
    """Whether a summary written here now would be recorded (a default writer, ``record_if``, replica 0)."""
    return _default_writer() is not None


def scalar(name, data, step=None, description=None) -> bool:
    """Write a scalar summary to the default writer; returns False when nothing is recorded (no writer,
    ``record_if`` off, or a replica other than the first inside ``strategy.run``).

    Example:
        >>> with writer.as_default():
        ...     md.summary.scalar("loss", 0.5, step=3)
        True
    """
    writer = _default_writer()
    if writer is None:
        return False
    value, step = _scalar_value(name, data), _resolve_step(step)
    torch_writer = writer._torch_writer()
    if torch_writer is not None:
        torch_writer.add_scalar(name, value, global_step=step)
    return True


def histogram(name, data, step=None, buckets=None, description=None) -> bool:
    """Write a histogram of ``data``'s values to the default writer; False when there is none.

    Example:
        >>> md.summary.histogram("weights", model.weights[0], step=1)
    """
    writer = _default_writer()
    if writer is None:
        return False
    step = _resolve_step(step)
    torch_writer = writer._torch_writer()
    if torch_writer is not None:
        values = data.detach().cpu() if isinstance(data, torch.Tensor) else torch.as_tensor(data)
        torch_writer.add_histogram(name, values, global_step=step, bins=buckets or "tensorflow")
    return True


def text(name, data, step=None, description=None) -> bool:
    """Write a text summary to the default writer; False when there is none.

    Example:
        >>> md.summary.text("notes", "first run", step=0)
    """
    writer = _default_writer()
    if writer is None:
        return False
    step = _resolve_step(step)
    torch_writer = writer._torch_writer()
    if torch_writer is not None:
        torch_writer.add_text(name, str(data), global_step=step)
    return True


def flush(writer=None, name=None) -> None:
    """Flush ``writer`` (default: the default writer).

    Example:
        >>> md.summary.flush()
    """
    writer = writer or _top_writer()
    if writer is not None:
        writer.flush()


def _set_step(step) -> None:
    """Set the default step for summaries written without ``step`` (``experimental.set_step``)."""
    with _lock:
        _steps[0] = step


def _get_step():
    """The default step (None when unset)."""
    with _lock:
        return _steps[-1]


experimental = types.SimpleNamespace(set_step=_set_step, get_step=_get_step)

__all__ = ["SummaryWriter", "create_file_writer", "create_noop_writer", "scalar", "histogram", "text", "flush",
           "experimental", "record_if", "should_record_summaries"]


def __getattr__(name: str):
    """``multidev.summary.X`` that multidev lacks: an AttributeError saying what to use instead."""
    from multidev._core.missing import missing_attribute

    raise missing_attribute("multidev.summary", name, f"tf.summary.{name}")
