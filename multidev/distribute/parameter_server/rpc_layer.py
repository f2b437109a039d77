"""The RPC layer of parameter-server training: torch.distributed.rpc (TensorPipe over TCP).

Every task of the cluster joins one RPC group named by role (``chief:0``, ``worker:1``, ``ps:0``);
the rendezvous is the project's bounded TCP store at the chief's ``TF_CONFIG`` address (a task
that never starts is named). A loopback cluster listens on loopback only: the store and
TensorPipe's connections. RPC payloads are pickled by torch: the cluster must be
reachable by trusted hosts only (see docs/parameter_server.md).

Transport failures (a peer that died, a timeout) become ``md.errors.UnavailableError`` naming the
task; errors raised by the remote function itself come back as their own exception type.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable

from torch.distributed.rendezvous import register_rendezvous_handler
import torch.distributed.rpc as rpc

from multidev._core.errors import DeadlineExceededError, UnavailableError
from multidev.collectives import process_rendezvous
from multidev.collectives.process_world import ProcessWorld, format_host_port

TIMEOUT_ENV = "MULTIDEV_RPC_TIMEOUT"
DEFAULT_TIMEOUT = 60.0
_REMOTE_ERROR_MARK = "On WorkerInfo("
_TORCH_INTERNAL_DEPRECATION = r"You are using a Backend .* as a ProcessGroup"


def task_name(role: str, index: int) -> str:
    """The RPC name of a task: ``worker:1``."""
    return f"{role}:{index}"


def rpc_timeout() -> float:
    """Seconds any single RPC may take (``MULTIDEV_RPC_TIMEOUT``, default 60)."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds; e.g. {TIMEOUT_ENV}=30.") from None
    if value <= 0:
        raise ValueError(f"{TIMEOUT_ENV}={text!r} must be > 0 seconds.")
    return value


def check_available() -> None:
    """RuntimeError with a hint when this torch build has no ``torch.distributed.rpc``."""
    if not rpc.is_available():
        raise RuntimeError(
            "ParameterServerStrategy needs torch.distributed.rpc, which this torch build lacks; "
            "install a torch build with distributed support (the default CPU/CUDA wheels have it)."
        )


_SCHEME = "multidevps"
_pending: dict[str, tuple[ProcessWorld, float]] = {}


def _rendezvous(url: str, **kwargs: Any):
    """torch's rendezvous handler for our scheme: the project's bounded store (loopback-only when local)."""
    world, timeout = _pending[url.split("?", 1)[0]]
    store = process_rendezvous.open_store(world, timeout)
    # Admits only holders of the job secret and names the tasks that never joined. TensorPipe then
    # gets the raw store: its payloads are pickles, so its peers must be trusted anyway (see docs).
    process_rendezvous.join(store, world, "multidev/ps", timeout)
    yield store, world.rank, world.world_size


def _init_method(world: ProcessWorld, timeout: float) -> str:
    if not _pending:
        register_rendezvous_handler(_SCHEME, _rendezvous)
    url = f"{_SCHEME}://{format_host_port(world.store_host, world.store_port)}"
    _pending[url] = (world, timeout)
    return url


def connect(world: ProcessWorld, timeout: float) -> None:
    """Join the cluster's RPC group as ``world.me`` (blocks until every task joined or ``timeout``)."""
    check_available()
    if world.is_loopback:
        os.environ.setdefault("TP_SOCKET_IFNAME", "lo")
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=_init_method(world, timeout),
        rpc_timeout=timeout,
        num_worker_threads=16,
        _transports=["uv"],
        _channels=["cma", "basic"],  # cma: same-host copies without sockets (falls back when not viable)
    )
    me = world.me
    try:
        with warnings.catch_warnings():
            # torch's own TensorPipe start-up passes a ProcessGroupGloo to all_gather_object, and torch
            # then warns every task that this use "is deprecated": torch's concern, not the user's.
            warnings.filterwarnings("ignore", message=_TORCH_INTERNAL_DEPRECATION, category=UserWarning)
            rpc.init_rpc(task_name(me.role, me.index), rank=world.rank, world_size=world.world_size,
                         rpc_backend_options=options)
    except (DeadlineExceededError, UnavailableError):
        raise
    except RuntimeError as err:
        raise UnavailableError(
            f"{me.describe()} could not join the parameter-server cluster at {world.init_method} within "
            f"{timeout:g}s: {err}. Check that every task of TF_CONFIG was started."
        ) from err


def disconnect(graceful: bool = False, timeout: float = 10.0) -> None:
    """Leave the RPC group.

    ``graceful``: every task of the cluster calls this after a clean run; they wait for one another
    (bounded by ``timeout``) and close their connections in order, so TensorPipe reports no "pipe
    closed" errors. Otherwise (a peer may be dead), or when the orderly exit times out, leave at once.
    """
    if graceful:
        try:
            rpc.shutdown(graceful=True, timeout=timeout)
            return
        except Exception:  # noqa: BLE001 - a peer left early or died: fall back to leaving alone
            pass
    try:
        rpc.shutdown(graceful=False)
    except Exception:  # noqa: BLE001 - already down, or never up
        pass


def is_transport_error(err: BaseException) -> bool:
    """True when ``err`` comes from the network (peer dead, timeout), not from the remote function."""
    if isinstance(err, UnavailableError):
        return True
    return isinstance(err, RuntimeError) and _REMOTE_ERROR_MARK not in str(err)


def call_async(to: str, fn: Callable, args: tuple = (), timeout: float | None = None) -> Any:
    """``rpc_async`` whose send failures are reported through the returned future's ``wait``."""
    try:
        return rpc.rpc_async(to, fn, args=args, timeout=rpc_timeout() if timeout is None else timeout)
    except RuntimeError as err:
        return _FailedFuture(err)


def wait(future: Any, to: str) -> Any:
    """The future's value; transport failures become UnavailableError naming task ``to``."""
    try:
        return future.wait()
    except Exception as err:  # noqa: BLE001 - classified below
        if is_transport_error(err):
            raise UnavailableError(f"Task {to} is unavailable: {_first_line(err)}") from err
        raise


def call(to: str, fn: Callable, args: tuple = (), timeout: float | None = None) -> Any:
    """Synchronous RPC of ``fn(*args)`` on task ``to``."""
    return wait(call_async(to, fn, args, timeout), to)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


class _FailedFuture:
    """A future that failed before it was sent."""

    def __init__(self, err: BaseException):
        self._err = err

    def wait(self) -> Any:
        raise self._err

    def done(self) -> bool:
        return True


__all__ = ["task_name", "rpc_timeout", "connect", "disconnect", "call", "call_async", "wait", "is_transport_error"]
