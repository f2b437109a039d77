"""The watch of each strategy's run in progress, found from a replica thread by its strategy.

The first-run checks (``shared_buffers``' in-place buffer writes, ``shared_leaves``' shared backward
leaves) record what the replicas of one ``strategy.run`` do: the runner opens a watch around the
replicas' tasks (caller thread), and a hook in a replica thread finds it by ``env.strategy`` (one run
at a time per strategy).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


class RunWatches:
    """id(strategy) -> the watch of its run in progress."""

    def __init__(self) -> None:
        self._by_strategy: dict[int, Any] = {}

    @contextlib.contextmanager
    def watching(self, strategy: Any, watch: Any) -> Iterator[Any]:
        """``watch`` is the run's while the block runs."""
        self._by_strategy[id(strategy)] = watch
        try:
            yield watch
        finally:
            if self._by_strategy.get(id(strategy)) is watch:
                del self._by_strategy[id(strategy)]

    def get(self, strategy: Any) -> Any | None:
        """The watch of ``strategy``'s run in progress (no dict lookup when none runs)."""
        return self._by_strategy.get(id(strategy)) if self._by_strategy else None
