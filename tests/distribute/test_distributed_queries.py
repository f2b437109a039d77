"""``torch.distributed.is_initialized()`` asked by the program inside ``strategy.run`` on 2 replicas is refused
naming the replica context's ``all_reduce``: FCOS's ``reduce_sum(num_pos)`` and DETR's
``if is_dist_avail_and_initialized(): all_reduce(num_boxes)`` skipped their all-reduce before (each replica
normalised its loss by its own count: DDP's weights silently missed). torch's own callers, multidev's, and every
caller outside the step get torch's answer."""
from __future__ import annotations

PROGRAM = r"""
import torch, torch.distributed as dist, multidev as md

def get_world_size():   # FCOS's fcos_core/utils/comm.py
    if not dist.is_available():
        return 1
    if not dist.is_initialized():
        return 1
    return dist.get_world_size()

def reduce_sum(tensor):
    if get_world_size() < 2:
        return tensor
    tensor = tensor.clone()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor

def is_dist_avail_and_initialized():   # DETR's util/misc.py
    if not dist.is_available():
        return False
    if not dist.is_initialized():
        return False
    return True

strategy = md.distribute.MirroredStrategy()
counts = strategy.experimental_distribute_values_from_function(
    lambda ctx: torch.tensor(float(ctx.replica_id_in_sync_group + 1)))

def fcos(num_pos):
    return reduce_sum(num_pos) / get_world_size()

def detr(num_boxes):
    if is_dist_avail_and_initialized():
        dist.all_reduce(num_boxes)
    return num_boxes

def ported(num_pos):
    ctx = md.distribute.get_replica_context()
    return ctx.all_reduce("sum", num_pos) / ctx.num_replicas_in_sync

torch_code = {"__name__": "torch.nn.modules.fake", "dist": dist}
exec("def asks():\n    return dist.is_initialized()", torch_code)
helper = {"__name__": "transformers.distributed.utils", "dist": dist}   # generate's world size, for synced_gpus
exec("def initialized():\n    return dist.is_initialized()", helper)
generation = {"__name__": "transformers.generation.utils", "initialized": helper["initialized"]}
exec("def world_size():\n    return 1 if not initialized() else 2", generation)

for name, fn in (("fcos", fcos), ("detr", detr)):
    try:
        strategy.run(fn, args=(counts,))
        print(name, "RAN")
    except ValueError as e:
        print(name, "REFUSED", "ctx.all_reduce('sum', num_pos)" in str(e), "reduce_dict" in str(e))
print("ported", [float(v) for v in strategy.experimental_local_results(strategy.run(ported, args=(counts,)))])
print("torch's own", [bool(v) for v in strategy.experimental_local_results(strategy.run(lambda: torch_code["asks"]()))])
print("generate", strategy.experimental_local_results(strategy.run(generation["world_size"])))
print("outside", dist.is_initialized(), get_world_size())
one = md.distribute.OneDeviceStrategy("/cpu:0")
print("one replica", one.run(lambda: dist.is_initialized()))
"""


def test_is_initialized_in_the_step_is_refused_naming_the_replica_all_reduce(fresh):
    out = fresh(PROGRAM, env={"MULTIDEV_LOGICAL_CPUS": "2"}).stdout
    assert "fcos REFUSED True True" in out and "detr REFUSED True True" in out, out
    assert "ported [1.5, 1.5]" in out, "DDP's reduce_sum(num_pos) / world_size: the mean count over the ranks"
    assert "generate (1,)" in out, out
    assert "torch's own [False]" in out and "outside False 1" in out and "one replica False" in out, out
