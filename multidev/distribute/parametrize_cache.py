"""``with torch.nn.utils.parametrize.cached():`` inside ``strategy.run``: each replica caches the weights it
computed from its own copies, as each DDP rank's process does.

torch keeps the cache in module globals of ``torch.nn.utils.parametrize``: ``_cache``, one dict keyed by
``(id(module), name)``, and ``_cache_enabled``, one counter. The replicas are threads of one process, so a
replica read the weight another replica had computed (an RNN whose ``weight_hh`` is weight-normed, read at
every time step, as torch's docs show the idiom), and its backward reached the other replica's copies:
refused or not depending on which replica got there first. A replica that left its ``cached()`` while
another was still inside kept reading cached weights, stale after its ``optimizer.step()``.

Now ``parametrize.cached`` in a replica marks that replica inside, and ``_cache`` is a dict that answers
and stores each replica's entries under its own key, only while that replica is inside (its entries go
when it leaves). The global counter stays positive while any replica is inside, so torch's properties
consult the cache, which answers only for those. Outside replicas torch's ``cached`` runs as is. A
``cached`` imported by name (``from torch.nn.utils.parametrize import cached``) before the strategy
existed is torch's own: it is not replaced there.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

from torch.nn.utils import parametrize

from multidev.values import context

_lock = threading.Lock()


class _ReplicaCache(dict):
    """torch's ``_cache``, with each replica's entries under ``(replica, key)`` and kept only while that
    replica is inside its ``cached()``; callers outside replicas use plain keys."""

    def __init__(self) -> None:
        super().__init__()
        self.depth: dict[int, int] = {}   # replica id -> nesting of its cached() blocks

    def get(self, key: Any, default: Any = None) -> Any:
        replica = context.current_replica_id()
        if replica is None:
            return dict.get(self, key, default)
        return dict.get(self, (replica, key), default) if self.depth.get(replica) else default

    def __setitem__(self, key: Any, value: Any) -> None:
        replica = context.current_replica_id()
        if replica is None:
            dict.__setitem__(self, key, value)
        elif self.depth.get(replica):
            dict.__setitem__(self, (replica, key), value)

    def leave(self, replica: int) -> None:
        self.depth[replica] -= 1
        if not self.depth[replica]:
            del self.depth[replica]
            for key in [k for k in self if isinstance(k, tuple) and len(k) == 2 and k[0] == replica
                        and isinstance(k[1], tuple)]:
                del self[key]


def _replica_cache() -> _ReplicaCache:
    """torch's ``_cache`` as a ``_ReplicaCache`` (torch's own ``cached`` puts a plain dict back on leaving)."""
    if not isinstance(parametrize._cache, _ReplicaCache):
        cache = _ReplicaCache()
        cache.update(parametrize._cache)   # a cross-replica cached() block still open
        parametrize._cache = cache
    return parametrize._cache


def _per_replica(original: Callable[[], Any]) -> Callable[[], Any]:
    @contextlib.contextmanager
    def cached() -> Iterator[None]:
        replica = context.current_replica_id()
        if replica is None:
            with original():
                yield
            return
        with _lock:
            cache = _replica_cache()
            cache.depth[replica] = cache.depth.get(replica, 0) + 1
            parametrize._cache_enabled += 1
        try:
            yield
        finally:
            with _lock:
                cache.leave(replica)
                parametrize._cache_enabled -= 1

    cached.__wrapped__ = original
    cached.__doc__ = original.__doc__
    return cached


def install() -> Callable[[], None]:
    """Wrap ``torch.nn.utils.parametrize.cached``; returns the function that unwraps it."""
    original = parametrize.cached
    parametrize.cached = _per_replica(original)

    def remove() -> None:
        parametrize.cached = original
        if isinstance(parametrize._cache, _ReplicaCache) and not parametrize._cache_enabled:
            parametrize._cache = {}

    return remove
