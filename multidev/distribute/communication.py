"""``md.distribute.experimental.CommunicationOptions``: how cross-worker collectives communicate.

TensorFlow's options (``bytes_per_pack``, ``timeout_seconds``, ``implementation``), plus the one
place that maps them onto torch.distributed: the backend (Gloo for RING, NCCL for NCCL, AUTO picks
by device) and the bounded timeout (multidev never waits forever: None means the default).
"""

from __future__ import annotations

import dataclasses
import enum

from multidev._core.enums import enum_from_value

from multidev.collectives.process_config import (
    DEFAULT_TIMEOUT_SECONDS,
    TIMEOUT_ENV,
    default_timeout_seconds,
    resolve_timeout,
)


class CommunicationImplementation(enum.Enum):
    """Which cross-worker collective implementation to use (TensorFlow's names)."""

    AUTO = "AUTO"
    RING = "RING"
    NCCL = "NCCL"

    @classmethod
    def from_value(cls, value: "CommunicationImplementation | str | None") -> "CommunicationImplementation":
        """Accept the enum, its name (any case) or None (AUTO)."""
        return enum_from_value(cls, value, "communication implementation", default=cls.AUTO)


@dataclasses.dataclass(frozen=True)
class CommunicationOptions:
    """Options of cross-worker collectives.

    Args:
        bytes_per_pack: gradients are all-reduced in packs of about this many bytes (0: the strategy decides).
        timeout_seconds: a collective (and the initial rendezvous) waiting longer than this fails with
            ``DeadlineExceededError`` naming the missing worker. None: ``MULTIDEV_COLLECTIVE_TIMEOUT`` or 30 s.
        implementation: ``AUTO`` (NCCL on GPUs, else RING; RING too where processes share a GPU),
            ``RING`` (Gloo) or ``NCCL``.

    Example:
        >>> options = CommunicationOptions(bytes_per_pack=50 * 1024 * 1024, timeout_seconds=120.0,
        ...                                implementation=CommunicationImplementation.RING)
        >>> options.backend(cuda=True), options.resolved_timeout()
        ('gloo', 120.0)
    """

    bytes_per_pack: int = 0
    timeout_seconds: float | None = None
    implementation: CommunicationImplementation | str = CommunicationImplementation.AUTO

    def __post_init__(self) -> None:
        if isinstance(self.bytes_per_pack, bool) or not isinstance(self.bytes_per_pack, int) or self.bytes_per_pack < 0:
            raise ValueError(f"bytes_per_pack must be a non-negative int (0 lets the strategy decide); got {self.bytes_per_pack!r}.")
        if self.timeout_seconds is not None:
            resolve_timeout(self.timeout_seconds)  # validates
        object.__setattr__(self, "implementation", CommunicationImplementation.from_value(self.implementation))

    def resolved_timeout(self) -> float:
        """The timeout in seconds that collectives use (never unbounded)."""
        return resolve_timeout(self.timeout_seconds)

    def backend(self, cuda: bool) -> str:
        """The ``ProcessCollective`` backend: ``"gloo"``, ``"nccl"``, or for ``AUTO`` on GPUs ``"auto"`` (NCCL
        unless two processes compute on one GPU, which NCCL refuses: then Gloo); ``cuda`` says whether
        tensors live on GPUs.

        Raises ValueError when NCCL is requested for CPU tensors.
        """
        impl = self.implementation
        if impl is CommunicationImplementation.NCCL:
            if not cuda:
                raise ValueError(
                    "CommunicationImplementation.NCCL needs CUDA GPUs, but this worker's devices are CPUs. "
                    "Use RING or AUTO."
                )
            return "nccl"
        if impl is CommunicationImplementation.RING:
            return "gloo"
        return "auto" if cuda else "gloo"


__all__ = [
    "CommunicationImplementation",
    "CommunicationOptions",
    "DEFAULT_TIMEOUT_SECONDS",
    "TIMEOUT_ENV",
    "default_timeout_seconds",
]
