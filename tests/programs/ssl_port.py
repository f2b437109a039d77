"""The multidev port of the ``torch.distributed`` lines of ``ssl_programs.py``, ``ssl_simclr.py`` and
``ssl_programs2.py``:
what a user edits when moving MoCo, SimCLR or DINO from DDP to a strategy (the rest of each program
stays as printed). ``install()`` puts them in place of the DDP spellings.

    concat_all_gather(t)        ->  md.distribute.get_replica_context().all_gather(t, axis=0)   (no_grad)
    torch.cat(FullGatherLayer.apply(z))  ->  ctx.all_gather(z, axis=0)   (differentiable, as TF's)
    torch.cat(GatherLayer.apply(z))      ->  ctx.all_gather(z.detach(), axis=0), z spliced into its rows
    dist.broadcast(t, src=0)    ->  ctx.all_gather(t[None], axis=0)[0]
    dist.all_reduce(t)          ->  t = ctx.all_reduce("sum", t)
    dist.get_rank() / get_world_size()  ->  ctx.replica_id_in_sync_group / ctx.num_replicas_in_sync
"""
from __future__ import annotations

import torch

import multidev as md


@torch.no_grad()
def concat_all_gather(tensor):
    return md.distribute.get_replica_context().all_gather(tensor, axis=0)


def gather_with_grad(x):
    return md.distribute.get_replica_context().all_gather(x, axis=0)


def gather_own_gradient(x):
    """Spijkervet's GatherLayer (each rank keeps its own slice of the gradient): the others' rows
    detached, this replica's own in place."""
    ctx = md.distribute.get_replica_context()
    everyone = ctx.all_gather(x.detach(), axis=0)
    start = int(ctx.replica_id_in_sync_group) * x.shape[0]
    return torch.cat([everyone[:start], x, everyone[start + x.shape[0]:]])


def broadcast_from_first(tensor):
    return md.distribute.get_replica_context().all_gather(tensor[None], axis=0)[0]


def all_reduce_sum(tensor):
    return md.distribute.get_replica_context().all_reduce("sum", tensor)


def rank():
    return int(md.distribute.get_replica_context().replica_id_in_sync_group)


def world_size():
    return md.distribute.get_replica_context().num_replicas_in_sync


PORTED = ("concat_all_gather", "gather_with_grad", "gather_own_gradient", "broadcast_from_first", "all_reduce_sum",
          "rank", "world_size")


def install(*modules) -> None:
    """Replace each module's DDP spellings of the collectives with the port's."""
    for module in modules:
        for name in PORTED:
            if hasattr(module, name):
                setattr(module, name, globals()[name])
