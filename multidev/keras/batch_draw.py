"""md.keras's random draws inside a ``fit`` step on a strategy: one device's numbers, each replica its rows.

On one device ``Dropout``'s mask, ``RandomFlip``'s coins, ``RandomRotation``'s angles or ``md.keras.random.normal((batch, d),
seed=...)`` are drawn once for the batch. On replicas (threads) each would draw its slice: from one shared
seeded generator in whatever order the threads reach it, or the *same* rows on every replica (torch's global
generator, whose per-replica streams start alike as DDP ranks' do: ``replica_random``; an int seed). Here a replica's draw in a Keras step goes through one
``merge_call``: when the replicas' leading sizes add up to the step's global batch, the global batch's draw
is made once (one device's numbers) and each replica keeps its rows; otherwise every replica's draw is made
in replica order (deterministic, never the same numbers twice for a generator). Drawn in cross-replica context,
torch's default generator is the device's own (``replica_random``), as on one device. Outside a step on several
replicas of one worker (one device, a custom loop, several workers) the draw is made as it is.

Example (a layer's call):
    coins = batch_draw.rows(lambda n: torch.rand(n, generator=self._rng), x.shape[0])
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

from multidev._core import draw_layout
from multidev.keras import step_inputs
from multidev.values import context
from multidev.values.distributed import PerReplica


def in_step() -> bool:
    """Whether a draw here goes through ``rows``'s global draw (a Keras step on several replicas of one worker)."""
    ctx = context.current_replica_context()
    return (step_inputs.current() is not None and ctx is not None and ctx.num_replicas_in_sync > 1
            and ctx.strategy.extended.num_workers == 1)


def rows(draw: Callable[[int], torch.Tensor], size: int) -> torch.Tensor:
    """``draw(size)``, or inside a step on several replicas this replica's rows of one draw for the global batch
    (``draw(n)`` must return a tensor whose leading dimension is ``n``; every replica passes an equivalent one)."""
    if not in_step():
        return draw(size)
    return context.current_replica_context().merge_call(
        _draw_for_replicas, args=(draw, torch.tensor(int(size), device="cpu"), step_inputs.current().global_batch_size))


def once(draw: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``draw()``, or inside a step on several replicas one draw that every replica takes: a draw made once per
    batch (``RandomCrop``'s offset, one for the whole batch), as one device makes it once."""
    if not in_step():
        return draw()
    return context.current_replica_context().merge_call(_draw_once, args=(draw,))


def _draw_once(strategy: Any, draw: Any) -> torch.Tensor:
    return strategy.experimental_local_results(draw)[0]()


def _draw_for_replicas(strategy: Any, draw: Any, size: Any, global_size: Any) -> PerReplica:
    local = strategy.experimental_local_results
    sizes = [int(s) for s in local(size)]
    draw = local(draw)[0]
    if sum(sizes) == local(global_size)[0]:
        full = draw(sum(sizes))
        offsets = [sum(sizes[:r]) for r in range(len(sizes))]
        return PerReplica([full[o:o + n] for o, n in zip(offsets, sizes)])
    return PerReplica([draw(n) for n in sizes])


def dropout(inputs: torch.Tensor, rate: float, training: bool) -> torch.Tensor:
    """``F.dropout(inputs, rate, training)``, its mask (one per example) drawn through ``rows`` in a step on
    several replicas: ``Dropout``'s and the attention layers' dropout on their weights alike."""
    if training and 0 < rate < 1 and inputs.dim() > 0 and in_step():
        # ones in the inputs' memory layout: torch draws the mask in memory order (a Conv1D output's is not logical)
        noise = rows(lambda n: F.dropout(draw_layout.ones_like_rows(inputs, n), rate, training=True), inputs.shape[0])
        return inputs * noise.to(inputs.device)
    return F.dropout(inputs, rate, training=bool(training))
