"""TensorFlow's error types (``tf.errors``), as Python exceptions.

TensorFlow raises ``InvalidArgumentError`` etc. from kernels; multidev raises the same
names so that ``except md.errors.InvalidArgumentError`` ports unchanged. Each subclasses
the closest Python built-in so plain ``except ValueError`` also works.
"""

from __future__ import annotations


class OpError(Exception):
    """Base class of TensorFlow's runtime errors."""


class InvalidArgumentError(OpError, ValueError):
    """An argument had an invalid value (a shape, a dtype, an index)."""


class UnknownDeviceError(InvalidArgumentError, RuntimeError):
    """A device that does not exist, with soft placement off.

    TensorFlow 2.21 raises ``InvalidArgumentError`` here; older TensorFlow, and the GPU guide
    (``except RuntimeError as e:``), a ``RuntimeError``. This is both, so programs written for either
    catch it.
    """


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong kind where TF 2.21 raises ValueError (a map_func that is no callable,
    a value that converts to no tensor, a float key): a TypeError too, as Python code expects."""


class NotFoundError(OpError, LookupError):
    """A file, device or name was not found."""


class AlreadyExistsError(OpError):
    """Something that must be created once was created again."""


class FailedPreconditionError(OpError, RuntimeError):
    """The system is not in a state where the operation can run."""


class OutOfRangeError(OpError, IndexError):
    """Iteration went past the end of the input (end of a dataset)."""


class ResourceExhaustedError(OpError, MemoryError):
    """A device ran out of memory, or a quota was exceeded."""


class UnavailableError(OpError, ConnectionError):
    """A peer (worker, parameter server) cannot be reached."""


class DeadlineExceededError(OpError, TimeoutError):
    """A wait (collective, rendezvous) passed its deadline."""


class AbortedError(OpError, RuntimeError):
    """The operation was aborted, typically because a peer failed."""


class CancelledError(OpError):
    """The operation was cancelled."""


class InternalError(OpError, RuntimeError):
    """An invariant of multidev itself was broken: please report it."""


class UnimplementedError(OpError, NotImplementedError):
    """The operation is not supported in this configuration."""


class DataLossError(OpError, ValueError):
    """Stored data is damaged or inconsistent (a checksum mismatch, a damaged checkpoint file)."""


class PermissionDeniedError(OpError, PermissionError):
    """The caller may not run the operation (a checkpoint written where the process may not write)."""


class UnauthenticatedError(OpError, PermissionError):
    """The request lacks valid credentials (a process without the job's secret tried to join)."""


__all__ = [
    "OpError",
    "InvalidArgumentError",
    "UnknownDeviceError",
    "NotFoundError",
    "AlreadyExistsError",
    "FailedPreconditionError",
    "OutOfRangeError",
    "ResourceExhaustedError",
    "UnavailableError",
    "DeadlineExceededError",
    "AbortedError",
    "CancelledError",
    "InternalError",
    "UnimplementedError",
    "DataLossError",
    "PermissionDeniedError",
    "UnauthenticatedError",
]
