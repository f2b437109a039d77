"""Which backend carries GPU tensors between processes: NCCL needs every process on GPUs of its own.

NCCL refuses two ranks on one GPU ("Duplicate GPU detected"), and only at the first collective, deep
in a training step. Several processes share a GPU whenever a machine runs more workers than it has
GPUs: ``multidev launch --workers 4`` on a one-GPU machine, a process-per-replica scaling probe, a
hand-written ``TF_CONFIG`` of two tasks on one host. So before the backend is made, each rank posts
the identities (UUIDs) of the GPUs it computes on; once all have joined, every rank reads all of
them, so all decide alike:

- ``"auto"`` (``CommunicationImplementation.AUTO``): NCCL when no GPU is shared, else Gloo, which
  carries CUDA tensors through host memory (slower, correct), with a warning naming the shared GPU;
- ``"nccl"`` (asked for explicitly): a shared GPU fails at once, on every rank, naming the ranks.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Sequence

import torch
import torch.distributed as dist

from multidev._core.errors import FailedPreconditionError
from multidev.collectives.process_world import ProcessWorld

_log = logging.getLogger("multidev.distribute")


def gpu_identity(index: int) -> str:
    """A name of CUDA device ``index`` that is the same in every process that sees it (whatever its
    ``CUDA_VISIBLE_DEVICES``) and differs between GPUs: its UUID, else host and PCI bus."""
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    if uuid:
        return f"GPU-{uuid}"
    bus = (getattr(props, "pci_domain_id", 0), getattr(props, "pci_bus_id", index), getattr(props, "pci_device_id", 0))
    return f"{socket.gethostname()}/pci:{bus[0]:04x}:{bus[1]:02x}:{bus[2]:02x}"


def post_gpus(store: dist.Store, world: ProcessWorld, prefix: str, gpus: Sequence[str]) -> None:
    """Post the GPUs this rank computes on (before joining, so every joined rank's are readable)."""
    store.set(f"{prefix}/gpus/{world.rank}", ",".join(gpus))


def shared_gpus(store: dist.Store, world: ProcessWorld, prefix: str) -> dict[str, list[int]]:
    """``{gpu: ranks}`` of the GPUs that more than one rank computes on (read after every rank joined)."""
    users: dict[str, list[int]] = {}
    for rank in range(world.world_size):
        text = store.get(f"{prefix}/gpus/{rank}").decode("ascii", "replace")
        for gpu in filter(None, text.split(",")):
            users.setdefault(gpu, []).append(rank)
    store.set(f"{prefix}/gpus_read/{world.rank}", "1")
    return {gpu: ranks for gpu, ranks in users.items() if len(ranks) > 1}


def wait_until_all_read(store: dist.Store, world: ProcessWorld, prefix: str, timeout_s: float) -> None:
    """Before a refusal ends this process: let every rank read the posts (the store may be ours), bounded."""
    keys = [f"{prefix}/gpus_read/{rank}" for rank in range(world.world_size)]
    deadline = time.monotonic() + min(timeout_s, 10.0)
    while time.monotonic() < deadline:
        try:
            if store.check(keys):
                return
        except Exception:   # a peer's store went away: nothing left to wait for
            return
        time.sleep(0.01)


def choose_backend(requested: str, shared: dict[str, list[int]], world: ProcessWorld) -> str:
    """The backend for ``requested`` (``"auto"`` or ``"nccl"``) given the GPUs ranks share."""
    if not shared:
        return "nccl"
    gpu, ranks = next(iter(shared.items()))
    who = " and ".join(world.describe(r) for r in ranks)
    if requested == "nccl":
        raise FailedPreconditionError(
            f"CommunicationImplementation.NCCL needs one GPU per process, but {who} compute on the same GPU "
            f"({gpu}); NCCL refuses that. Give each worker a GPU of its own (as many workers as GPUs, or "
            f"CUDA_VISIBLE_DEVICES per worker), or use CommunicationImplementation.AUTO or RING, which "
            f"carry the tensors with Gloo.")
    _log.warning("%s compute on the same GPU (%s): NCCL cannot serve two processes on one GPU, so the "
                 "workers' collectives use Gloo (through host memory). One worker per GPU is faster.", who, gpu)
    return "gloo"


__all__ = ["gpu_identity", "post_gpus", "shared_gpus", "wait_until_all_read", "choose_backend"]
