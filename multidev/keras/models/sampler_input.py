"""``fit``/``evaluate``/``predict`` on a torch DataLoader whose ``DistributedSampler`` shards the data
by worker (a DDP program's input): each of its batches is this worker's share of the global batch,
as under DDP, so it is read as ``experimental_distribute_dataset`` reads it (split across this
worker's replicas only, never sharded again), or refused there when the sampler's layout is not
the job's (``distribute/torch_sampler.py``). Any other input is left to the usual global-batch split.
"""

from __future__ import annotations

from typing import Any

from multidev.distribute.torch_sampler import samplers_of


def per_worker_input(model: Any, x: Any) -> Any:
    """``x``, or, for a DistributedSampler's loader on several replicas, its distributed dataset."""
    if not samplers_of(x):
        return x
    strategy = model.distribute_strategy
    if strategy.num_replicas_in_sync == 1:
        return x
    return strategy.experimental_distribute_dataset(x)
