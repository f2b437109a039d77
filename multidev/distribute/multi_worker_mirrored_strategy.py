"""``MultiWorkerMirroredStrategy``: MirroredStrategy across processes, over torch.distributed.

Each worker process runs its local replicas (all logical GPUs, else all logical CPUs; with no
cluster, as TensorFlow, the first CPU only) as ``MirroredStrategy`` does; collectives are
hierarchical: the local replicas' values are reduced in process first, then across processes with
one ``ProcessCollective`` call (Gloo on CPUs, NCCL on GPUs unless processes share one), then handed
back to the local replicas.
Worker 0 (the chief) broadcasts every variable's initial value, so workers start identical however
they were seeded.

    TF_CONFIG='{"cluster": {"worker": ["127.0.0.1:20001", "127.0.0.1:20002"]},
                "task": {"type": "worker", "index": 0}}'  python train.py   # one per worker
    # or: multidev launch --workers 2 train.py
"""

from __future__ import annotations

import atexit
import logging
import os
import weakref
from typing import Any, Sequence, final

import torch

from multidev.collectives.process import ProcessCollective
from multidev.collectives.process_gpus import gpu_identity
from multidev.devices import registry
from multidev.distribute.cluster_resolver import ClusterResolver, collective_world, default_cluster_resolver
from multidev.distribute.communication import CommunicationImplementation, CommunicationOptions
from multidev.distribute.cross_device_ops import ReductionToOneDevice
from multidev.distribute.distribute_lib import DEFAULT_BUCKET_BYTES, ReplicatedExtended
from multidev.distribute.gradient_overlap import GradientOverlap
from multidev.distribute.strategy import Strategy
from multidev.distribute.worker_collective import ProcessWorkers

_log = logging.getLogger("multidev.distribute")


def _local_devices(resolver: ClusterResolver) -> list[registry.Device]:
    """Every logical GPU, else the CPU: in a cluster (or with ``multidev launch --devices-per-worker``)
    every logical CPU, without one the first, as TensorFlow (``MultiWorkerMirroredStrategy()`` with no
    TF_CONFIG on a CPU split in two has 1 replica). A process that torchrun starts among several on
    its host takes one GPU, the ``LOCAL_RANK``-th (modulo the GPUs), as a DDP program does."""
    gpus = registry.logical_devices("GPU")
    if gpus:
        return _gpus_of_local_rank(gpus, resolver)
    cpus = registry.logical_devices("CPU")
    has_cluster = bool(resolver.cluster_spec())
    return cpus if has_cluster or os.environ.get(registry.DEVICES_PER_WORKER_ENV) else cpus[:1]


def _gpus_of_local_rank(gpus: list[registry.Device], resolver: ClusterResolver) -> list[registry.Device]:
    """The logical GPUs of this process's physical GPU when torchrun runs several processes per host."""
    local_rank, local_world = getattr(resolver, "local_rank", None), getattr(resolver, "local_world_size", 1)
    if local_rank is None or local_world <= 1:
        return gpus
    physical = sorted({g.physical_index for g in gpus})
    mine = [g for g in gpus if g.physical_index == physical[local_rank % len(physical)]]
    if mine[0].torch_device.type == "cuda":   # as a DDP program's torch.cuda.set_device(LOCAL_RANK): .cuda(), NCCL
        torch.cuda.set_device(mine[0].torch_device)
    return mine


def _gpu_identities(devices: Sequence[registry.Device]) -> list[str]:
    """What the workers compare to find processes sharing a GPU (NCCL refuses them, see process_gpus)."""
    return [gpu_identity(i) for i in sorted({d.torch_device.index or 0 for d in devices if d.device_type == "GPU"})]


def _shutdown(process: ProcessCollective) -> None:
    try:
        process.shutdown()
    except Exception:  # interpreter teardown: nothing left to report to
        pass


@final
class _MultiWorkerExtended(ReplicatedExtended):
    """``MultiWorkerMirroredStrategy.extended``: mirrored variables; hierarchical collectives (in process
    over the local replicas, then across workers) through the injected ``ProcessWorkers``."""

    def __init__(self, strategy: Strategy, devices: Sequence[registry.Device], process: ProcessCollective,
                 task_type: str | None, task_id: int | None, options: CommunicationOptions):
        super().__init__(strategy, devices, ReductionToOneDevice(), workers=ProcessWorkers(process),
                         bucket_bytes=options.bytes_per_pack or DEFAULT_BUCKET_BYTES)
        self._process = process
        self._task_type = task_type or "worker"
        self._task_id = 0 if task_id is None else task_id
        self._options = options
        self._options_overlap = os.environ.get("MULTIDEV_OVERLAP_GRADIENTS", "1") != "0"

    @property
    def worker_devices(self) -> tuple[str, ...]:
        return tuple(d.spec.replace(job=self._task_type, task=self._task_id).to_string() for d in self._devices)

    def _gradient_overlap(self, refs: Sequence[torch.Tensor]) -> Any:
        # With one local replica the cross-process all-reduce can start during backward.
        if len(self._devices) != 1 or self.num_workers == 1 or not self._options_overlap:
            return None
        return GradientOverlap(self._process, refs, self.replica_group.bucket_bytes)


class MultiWorkerMirroredStrategy(Strategy):
    """Synchronous training on the local devices of several worker processes.

    Args:
        cluster_resolver: where the cluster is described; default ``TF_CONFIG``, or torchrun's
            variables (RANK, WORLD_SIZE, MASTER_ADDR, ...). No cluster: one worker.
        communication_options: ``md.distribute.experimental.CommunicationOptions`` (timeout,
            bytes per gradient pack, RING/NCCL).

    Example:
        >>> strategy = md.distribute.MultiWorkerMirroredStrategy()   # reads TF_CONFIG
        >>> with strategy.scope():
        ...     model = torch.nn.Linear(8, 1)
    """

    def __init__(self, cluster_resolver: ClusterResolver | None = None,
                 communication_options: CommunicationOptions | None = None):
        if cluster_resolver is not None and not isinstance(cluster_resolver, ClusterResolver):
            raise TypeError(
                f"cluster_resolver must be a md.distribute.cluster_resolver.ClusterResolver (e.g. "
                f"TFConfigClusterResolver()), got {cluster_resolver!r}."
            )
        if communication_options is not None and not isinstance(communication_options, CommunicationOptions):
            raise TypeError(
                f"communication_options must be a md.distribute.experimental.CommunicationOptions, "
                f"got {communication_options!r}."
            )
        resolver = cluster_resolver or default_cluster_resolver()
        options = communication_options or CommunicationOptions()
        world = collective_world(resolver)  # validates the cluster before any network activity
        if resolver.task_type is not None and resolver.task_id is not None:
            registry.set_local_task(resolver.task_type, resolver.task_id)
        devices = _local_devices(resolver)
        backend = options.backend(cuda=devices[0].device_type == "GPU")
        gpus = _gpu_identities(devices) if backend != "gloo" and world.world_size > 1 else ()
        process = ProcessCollective(world, backend=backend, timeout_seconds=options.timeout_seconds, gpus=gpus)
        extended = _MultiWorkerExtended(self, devices, process, resolver.task_type, resolver.task_id, options)
        super().__init__(extended)
        self._resolver = resolver
        self._finalizer = weakref.finalize(self, _shutdown, process)
        atexit.register(self._finalizer)
        _log.info("Using MultiWorkerMirroredStrategy with local devices %s; worker %d of %d",
                  extended.worker_devices, process.rank, process.world_size)

    @property
    def cluster_resolver(self) -> ClusterResolver:
        return self._resolver


class ExperimentalMultiWorkerMirroredStrategy(MultiWorkerMirroredStrategy):
    """``md.distribute.experimental.MultiWorkerMirroredStrategy``: TensorFlow's older spelling (TF 2.0-2.3
    tutorials), which takes the collective implementation as ``communication`` rather than in
    ``communication_options``.

    Example:
        >>> strategy = md.distribute.experimental.MultiWorkerMirroredStrategy(
        ...     md.distribute.experimental.CollectiveCommunication.RING)
    """

    def __init__(self, communication: CommunicationImplementation | str = CommunicationImplementation.AUTO,
                 cluster_resolver: ClusterResolver | None = None):
        super().__init__(cluster_resolver=cluster_resolver,
                         communication_options=CommunicationOptions(implementation=communication))
