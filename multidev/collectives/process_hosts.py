"""Where each process runs: ranks post their host to the rendezvous so errors can name lost hosts.

torchrun tells a worker only the rendezvous address, not where the other ranks run; a lost peer
would be named ``worker 2`` with no host. Before joining, every rank posts the address it reaches
the rendezvous from (its own ``TF_CONFIG`` host when it has one); once all have joined, members
without an address take the posted one (``worker 2 (10.0.0.2)``). Values are plain ASCII text.
"""

from __future__ import annotations

import dataclasses
import socket

import torch.distributed as dist

from multidev.collectives.process_world import ProcessWorld


def own_host(world: ProcessWorld) -> str:
    """This process's address as its peers see it: the bind host, else the source of the route to the store."""
    if world.bind_host:
        return world.bind_host
    host = world.store_host.strip("[]")
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((host, world.store_port or 9))  # UDP: nothing is sent, only the route is chosen
            return sock.getsockname()[0]
    except OSError:
        return socket.gethostname()


def post_host(store: dist.Store, world: ProcessWorld, prefix: str) -> None:
    """Post this rank's host (call before joining, so every joined rank's host is readable)."""
    store.set(f"{prefix}/host/{world.rank}", own_host(world))


def with_hosts(store: dist.Store, world: ProcessWorld, prefix: str) -> ProcessWorld:
    """``world`` whose members without an address carry their posted host (unchanged if unreadable)."""
    members = []
    for rank, member in enumerate(world.members):
        if member.address is None:
            key = f"{prefix}/host/{rank}"
            try:
                if store.check([key]):      # never wait: a rank that posted nothing stays unnamed
                    member = dataclasses.replace(member, address=store.get(key).decode("ascii", "replace"))
            except Exception:
                pass
        members.append(member)
    return dataclasses.replace(world, members=tuple(members))


__all__ = ["own_host", "post_host", "with_hosts"]
