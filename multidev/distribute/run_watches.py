"""The watch of each strategy's run in progress, found from a replica thread by its strategy.

The first-run checks (``shared_buffers``' in-place buffer writes, ``shared_leaves``' shared backward
leaves) record what the replicas of one ``strategy.run`` do: the runner opens a watch around the
replicas' tasks (caller thread), and a hook in a replica thread finds it by ``env.strategy`` (one run
at a time per strategy). A dict, so that hot paths look a watch up without a Python call
(``watches.get(id(strategy)) if watches else None``: every ``backward`` of a replica does).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


class RunWatches(dict):
    """id(strategy) -> the watch of its run in progress."""

    @contextlib.contextmanager
    def watching(self, strategy: Any, watch: Any) -> Iterator[Any]:
        """``watch`` is the run's while the block runs."""
        self[id(strategy)] = watch
        try:
            yield watch
        finally:
            if self.get(id(strategy)) is watch:
                del self[id(strategy)]
