"""``TorchrunClusterResolver``: the cluster from torchrun's (torch elastic's) environment variables.

torchrun sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and
``MASTER_PORT`` in each worker. Every process is a ``worker``; rank 0 plays the chief. Only rank
0's address (the rendezvous) is known, so the other workers' addresses in ``cluster_spec()`` are
placeholders ``"<torchrun rank N>"``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from multidev.collectives.process_world import ProcessMember, ProcessWorld, format_host_port
from multidev.distribute.cluster_resolver.base import ClusterResolver, format_master_url, local_accelerators
from multidev.distribute.cluster_spec import ClusterSpec

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def torchrun_env_present(environ: Mapping[str, str] | None = None) -> bool:
    """True when torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) are all set."""
    environ = os.environ if environ is None else environ
    return all(name in environ for name in TORCHRUN_VARIABLES)


def _int_var(environ: Mapping[str, str], name: str, default: int | None = None, minimum: int = 0) -> int:
    raw = environ.get(name)
    if raw is None:
        if default is None:
            raise ValueError(
                f"Environment variable {name} is not set; torchrun sets {list(TORCHRUN_VARIABLES)} "
                "in each worker (start the job with torchrun or `multidev launch --nnodes ...`)."
            )
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"Environment variable {name}={raw!r} must be an integer.") from None
    if value < minimum:
        raise ValueError(f"Environment variable {name}={raw!r} must be >= {minimum}.")
    return value


class TorchrunClusterResolver(ClusterResolver):
    """Cluster resolver for processes started by ``torchrun`` / ``torch.distributed.run``.

    Example:
        >>> # in a process started by `torchrun --nproc-per-node 2 train.py`
        >>> resolver = TorchrunClusterResolver()                       # doctest: +SKIP
        >>> resolver.task_type, resolver.task_id, resolver.local_rank  # doctest: +SKIP
        ('worker', 1, 1)
    """

    def __init__(self, environ: Mapping[str, str] | None = None, rpc_layer: str | None = None):
        env = dict(os.environ if environ is None else environ)
        self.world_size = _int_var(env, "WORLD_SIZE", minimum=1)
        self.rank = _int_var(env, "RANK")
        if self.rank >= self.world_size:
            raise ValueError(f"RANK={self.rank} is out of range for WORLD_SIZE={self.world_size} (ranks 0..{self.world_size - 1}).")
        self.local_rank = _int_var(env, "LOCAL_RANK", default=0)
        self.local_world_size = _int_var(env, "LOCAL_WORLD_SIZE", default=1, minimum=1)
        self.master_addr = env.get("MASTER_ADDR", "").strip()
        if not self.master_addr:
            raise ValueError("Environment variable MASTER_ADDR is not set (or empty); torchrun sets it to rank 0's host.")
        self.master_port = _int_var(env, "MASTER_PORT", minimum=1)
        if self.master_port > 65535:
            raise ValueError(f"Environment variable MASTER_PORT={self.master_port!r} is outside 1..65535.")
        self.agent_store = env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        self.restart_count = _int_var(env, "TORCHELASTIC_RESTART_COUNT", default=0)
        self.run_id = env.get("TORCHELASTIC_RUN_ID", "none")
        self.task_type = "worker"
        self.task_id = self.rank
        self.rpc_layer = rpc_layer

    def _address(self, rank: int) -> str:
        return format_host_port(self.master_addr, self.master_port) if rank == 0 else f"<torchrun rank {rank}>"

    def cluster_spec(self) -> ClusterSpec:
        """``{"worker": [rank 0's address, "<torchrun rank 1>", ...]}``."""
        return ClusterSpec({"worker": [self._address(r) for r in range(self.world_size)]})

    def master(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None) -> str:
        """The rendezvous ``MASTER_ADDR:MASTER_PORT`` (``""`` for a single process)."""
        if self.world_size == 1:
            return ""
        return format_master_url(self._address(0), rpc_layer or self.rpc_layer)

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None, config_proto=None) -> dict[str, int]:
        """One GPU per process when torchrun starts several per host (the ``LOCAL_RANK``-th), else all GPUs."""
        found = local_accelerators()
        if found and self.local_world_size > 1:
            return {"GPU": 1}
        return found

    def process_world(self, roles: Sequence[str]) -> ProcessWorld:
        """Ranks straight from torchrun; the store is the agent's when torchrun hosts it."""
        if "worker" not in roles:
            raise ValueError(f"torchrun starts only 'worker' tasks; a group of {list(roles)} cannot be formed from it.")
        members = tuple(
            # With torchrun's agent store, MASTER_ADDR is the agent's host, not necessarily rank 0's:
            # every address then comes from the ranks themselves (process_hosts).
            ProcessMember("worker", r, self._address(r) if r == 0 and not self.agent_store else None)
            for r in range(self.world_size)
        )
        return ProcessWorld(
            rank=self.rank,
            members=members,
            store_host=self.master_addr,
            store_port=self.master_port,
            bind_host=None,
            store_is_external=self.agent_store,
            # The agent's store outlives restarts: keys are kept apart by restart count. A store of
            # our own (rank 0's, fresh each rendezvous round) needs no such prefix, which agents
            # could disagree on (a membership change restarts workers without counting).
            key_prefix=f"multidev/{self.run_id}" + (f"/{self.restart_count}" if self.agent_store else ""),
            local_rank=self.local_rank,
        )


__all__ = ["TorchrunClusterResolver", "torchrun_env_present", "TORCHRUN_VARIABLES"]
