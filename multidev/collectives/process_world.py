"""``ProcessWorld``: who takes part in a cross-process collective, in rank order, and where they meet.

A plain value built by the cluster resolvers (``multidev.distribute.cluster_resolver.world``) and
consumed by ``ProcessCollective``; it lives here so that collectives need not import distribute.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket


def _is_localhost_name(name: str) -> bool:
    """``localhost``, ``localhost.`` and ``*.localhost``: loopback by definition (RFC 6761), resolvable or not."""
    name = name.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


def loopback_address(host: str) -> str | None:
    """The loopback IP address that ``host`` resolves to (the one to bind to), or None.

    Decided by resolving, not by spelling: ``127.1``, ``localhost.``, the machine's own hostname
    where ``/etc/hosts`` maps it to 127.0.1.1, or ``ip6-localhost`` are loopback; a name is
    loopback only when every address it resolves to is (IPv4 preferred); unresolvable -> None.

    Example:
        >>> loopback_address("127.1"), loopback_address("[::1]"), loopback_address("10.0.0.1")
        ('127.0.0.1', '::1', None)
    """
    name = host.strip().strip("[]")
    try:
        literal = ipaddress.ip_address(name)
        return str(literal) if literal.is_loopback else None
    except ValueError:
        pass
    if not name:
        return None
    if _is_localhost_name(name):
        return "127.0.0.1"
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    except (OSError, UnicodeError, ValueError):
        return None
    if not addresses or not all(a.is_loopback for a in addresses):
        return None
    return str(next((a for a in addresses if a.version == 4), addresses[0]))


def is_loopback_host(host: str) -> bool:
    """True when ``host`` resolves to loopback addresses only (see ``loopback_address``)."""
    return loopback_address(host) is not None


def _address_host(address: str) -> str:
    """The host part of ``host:port`` / ``[v6]:port``."""
    host = address.rpartition(":")[0] if not address.startswith("[") else address[1:].partition("]")[0]
    return host or address


def free_loopback_ports(count: int) -> list[int]:
    """``count`` distinct free ports on 127.0.0.1 (held open together so they differ).

    Another process may take a port before it is used; callers that start servers retry.
    """
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def format_host_port(host: str, port: int) -> str:
    """``host:port``, bracketing IPv6 literals (``[::1]:2222``)."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"


@dataclasses.dataclass(frozen=True)
class ProcessMember:
    """One process of the world: its role, its index within the role and its address if known."""

    role: str
    index: int
    address: str | None = None

    def describe(self) -> str:
        """``worker 1 (127.0.0.1:12345)``: how errors name this process."""
        where = f" ({self.address})" if self.address else ""
        return f"{self.role} {self.index}{where}"


@dataclasses.dataclass(frozen=True)
class ProcessWorld:
    """The processes of one collective group, in rank order, and this process's place in it.

    Attributes:
        rank: this process's rank (its position in ``members``).
        members: every process, rank order (TensorFlow's: chief, then workers, then ps).
        store_host, store_port: where the rendezvous store listens (rank 0's address).
        bind_host: the host this process's own connections should bind to (its ``TF_CONFIG``
            address), or None to let the backend choose (``GLOO_SOCKET_IFNAME`` still applies).
        store_is_external: the store is hosted by someone else (torchrun's agent); every rank is a client.
        key_prefix: namespace of this world's keys in the store (distinguishes restarts).
        local_rank: index of this process among the processes of its host (picks its GPU).
    """

    rank: int
    members: tuple[ProcessMember, ...]
    store_host: str
    store_port: int
    bind_host: str | None = None
    store_is_external: bool = False
    key_prefix: str = "multidev"
    local_rank: int = 0

    def __post_init__(self) -> None:
        if not self.members:
            raise ValueError("A ProcessWorld needs at least one member.")
        if not 0 <= self.rank < len(self.members):
            raise ValueError(f"rank {self.rank!r} is outside the world of {len(self.members)} processes.")

    @property
    def world_size(self) -> int:
        """Number of processes."""
        return len(self.members)

    @property
    def me(self) -> ProcessMember:
        """This process's member entry."""
        return self.members[self.rank]

    @property
    def init_method(self) -> str:
        """``tcp://host:port`` of the rendezvous, as ``torch.distributed.init_process_group`` takes it."""
        return "tcp://" + format_host_port(self.store_host, self.store_port)

    @property
    def is_loopback(self) -> bool:
        """True for a job on this machine only: the rendezvous host and every member's known
        address resolve to loopback (so the store and connections may listen on loopback only)."""
        if not is_loopback_host(self.store_host):
            return False
        return all(is_loopback_host(_address_host(m.address)) for m in self.members if m.address)

    @property
    def loopback_bind_address(self) -> str | None:
        """The loopback IP the rendezvous store listens on for a local job (None: all interfaces)."""
        return loopback_address(self.store_host) if self.is_loopback else None

    def describe(self, rank: int) -> str:
        """How errors name the process of rank ``rank``."""
        return self.members[rank].describe()

    def describe_ranks(self, ranks: list[int]) -> str:
        """``worker 1 (a:1) and worker 2 (b:2)``."""
        names = [self.describe(r) for r in ranks]
        if len(names) <= 1:
            return "".join(names)
        return ", ".join(names[:-1]) + " and " + names[-1]


__all__ = ["ProcessMember", "ProcessWorld", "is_loopback_host", "loopback_address", "format_host_port"]
