"""torch.distributed features beyond the DDP wrapper (``ddp_features.py``): ZeroRedundancyOptimizer, uneven
inputs (``Join`` / ``model.join()``, a partial last batch, ``DistributedSampler(drop_last=False)``), the
``DistributedDataParallel`` wrapper kept with ``no_sync``, ``model.module`` and rank-0 logging and saving,
and ``torch.distributed.nn.functional``'s differentiable collectives in a loss. Each works as under DDP on
2 Gloo processes or is refused saying why and naming multidev's way, on MirroredStrategy (2 replicas in one
process) and on MultiWorkerMirroredStrategy (2 workers of one replica, with and without the program's own
process group). One DDP job, one worker job and one MirroredStrategy interpreter, started together.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest

from multidev.collectives.process_world import free_loopback_ports
from tests.conftest import ROOT
from tests.programs.test_programs import _finish, _load

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 200


def _start(mode: str, out_dir: str, **env: str) -> subprocess.Popen:
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1", **env)
    for name in ("TF_CONFIG", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if name not in env:
            full.pop(name, None)
    return subprocess.Popen([sys.executable, os.path.join(HERE, "ddp_features.py"), mode, out_dir], env=full, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ddp_features"))
    ddp_port, mwms_port, *workers = free_loopback_ports(4)
    procs = [_start("threads", out, MULTIDEV_LOGICAL_CPUS="2")]
    procs += [_start("ddp", out, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(ddp_port)) for r in range(2)]
    cluster = json.dumps({"worker": [f"127.0.0.1:{p}" for p in workers]})
    secret = secrets.token_hex(32)
    procs += [_start("mwms", out, MULTIDEV_LOGICAL_CPUS="1", MULTIDEV_JOB_SECRET=secret, RANK=str(i), LOCAL_RANK=str(i),
                     WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(mwms_port),
                     TF_CONFIG=f'{{"cluster": {cluster}, "task": {{"type": "worker", "index": {i}}}}}')
              for i in range(2)]
    logs = _finish(procs, TIMEOUT_S)
    failed = [(p.args[2], p.returncode, log) for p, log in zip(procs, logs) if p.returncode != 0]
    assert not failed, "\n\n".join(f"{m} rc={rc}\n{log[-3000:]}" for m, rc, log in failed)
    return (_load(out, "features_threads.json"), [_load(out, f"features_ddp_{r}.json") for r in range(2)],
            [_load(out, f"features_mwms_{r}.json") for r in range(2)])


def _difference(a: list, b: list) -> float:
    assert [len(p) for p in a] == [len(p) for p in b]
    return max(abs(x - y) for p, q in zip(a, b) for x, y in zip(p, q))


def _refused(message: str, *needles: str) -> None:
    assert message.startswith("ValueError: "), message
    for needle in needles:
        assert needle in message, (needle, message)


TOL = 1e-12   # float64; every difference below measured 0.0 (5.6e-17 with no_sync's other summation order)


def test_zero_redundancy_optimizer(results):
    """ZeRO over a strategy's variables: DDP + ZeRO's weights with the program's process group and one
    replica per worker (with parameters_as_bucket_view too); refused naming the plain optimizer class
    on replicas of one process and without a process group."""
    threads, ddp, workers = results
    assert _difference(ddp[0]["zero"], ddp[1]["zero"]) == 0.0
    for worker in workers:
        assert _difference(worker["zero"], ddp[0]["zero"]) <= TOL
        assert _difference(worker["zero_bucket_view"], ddp[0]["zero"]) <= TOL
        _refused(worker["zero_overlap"], "overlap_with_ddp=True steps inside DDP's gradient hook")
        _refused(worker["refusals"]["zero"], "ZeroRedundancyOptimizer under MultiWorkerMirroredStrategy: multidev starts "
                 "no torch.distributed process group", "torch.optim.AdamW(model.parameters(), lr=...)")
    _refused(threads["refusals"]["zero"], "ZeroRedundancyOptimizer under MirroredStrategy: MirroredStrategy runs 2 "
             "replicas in this process", "Build the optimizer_class itself in strategy.scope()")


def test_ddp_wrapper_kept(results):
    """DistributedDataParallel(model) left in place: with the program's process group and one replica per
    worker, no_sync accumulation, model.module, the all-reduced logged loss and rank 0's save are DDP's;
    on replicas of one process or without a process group the wrapper is refused naming the port."""
    threads, ddp, workers = results
    want = ddp[0]["ddp_kept"]
    for rank, worker in enumerate(workers):
        got = worker["ddp_kept"]
        assert _difference(got["params"], want["params"]) <= TOL
        assert got["logged"] == pytest.approx(want["logged"], rel=TOL, abs=0)
        if rank == 0:   # torch.save(model.module.state_dict()), torch.load(weights_only=True): plain tensors
            assert got["saved"]["keys"] == want["saved"]["keys"] and got["saved"]["types"] == ["Tensor"]
            assert got["saved"]["params"] == got["params"]
        else:
            assert got["saved"] is None
        _refused(worker["refusals"]["ddp"], "DistributedDataParallel(model) under MultiWorkerMirroredStrategy: "
                 "multidev starts no torch.distributed process group", "drop the wrapper")
    assert want["saved"]["keys"] == ["0.bias", "0.weight", "2.bias", "2.weight"]
    _refused(threads["refusals"]["ddp"], "DistributedDataParallel(model) under MirroredStrategy: MirroredStrategy runs "
             "2 replicas in this process", "model.module -> model", "model.no_sync() -> nothing to skip",
             "model.join() -> not needed")


def test_uneven_input_without_join(results):
    """A partial last batch (9 examples, global batch 4) through experimental_distribute_dataset: TF's
    split, [1, 0] on the last step, the empty replica's gradient counting as zero: DDP's weights with
    join(divide_by_initial_world_size=True) on ranks that hold those rows, on replicas and on workers
    (no worker waits at the epoch's end; the empty replica's mean loss is nan, torch's mean of nothing)."""
    threads, ddp, workers = results
    assert threads["uneven"]["sizes"] == [[2, 2], [2, 2], [1, 0]]
    assert _difference(threads["uneven"]["params"], ddp[0]["join"]) <= TOL
    for rank, worker in enumerate(workers):
        assert worker["uneven"]["sizes"] == [[2], [2], [[1], [0]][rank]]
        assert _difference(worker["uneven"]["params"], ddp[0]["join"]) <= TOL
    assert workers[1]["uneven"]["losses"][-1] != workers[1]["uneven"]["losses"][-1]   # nan


def test_uneven_worker_shares_stay_in_step(results):
    """Each worker its own unpadded share (a DistributedSampler subclass: 5 and 4 examples, 3 and 2
    batches): the workers stay in step (worker 1 gets an empty batch at the third step) and end with the
    weights of DDP's `with model.join():` on the same sampler. (Before, such a subclass was taken for a
    padding DistributedSampler: worker 0 waited in the third step's all-reduce until the timeout.)"""
    _, ddp, workers = results
    for rank, worker in enumerate(workers):
        assert worker["join_sampler"]["sizes"] == [[2], [2], [[1], [0]][rank]]
        assert _difference(worker["join_sampler"]["params"], ddp[0]["join_sampler"]) <= TOL


def test_distributed_sampler_pads_as_under_ddp(results):
    """DistributedSampler(drop_last=False) of the job's workers pads as under DDP (5 examples each, the
    first repeated): DDP's weights. On one worker (MirroredStrategy) the sampler has one rank and pads
    nothing: the loader's partial batch is split as TF splits it (the experimental_distribute_dataset case)."""
    threads, ddp, workers = results
    assert ddp[0]["sampler"]["sizes"] == ddp[1]["sampler"]["sizes"] == [2, 2, 1]
    for worker in workers:
        assert worker["sampler"]["sizes"] == [[2], [2], [1]]
        assert _difference(worker["sampler"]["params"], ddp[0]["sampler"]["params"]) <= TOL
    assert threads["sampler"]["sizes"] == [[2, 2], [2, 2], [1, 0]]
    assert _difference(threads["sampler"]["params"], threads["uneven"]["params"]) == 0.0


def test_join_is_refused_naming_the_input_that_keeps_replicas_in_step(results):
    """Join over a strategy's model, in the step or around the loop, and the kept wrapper's model.join() with
    the program's process group; model.join(enable=False), which does nothing, is torch's."""
    threads, _, workers = results
    for worker in workers:
        assert worker["join_disabled"] == "", worker["join_disabled"]
        _refused(worker["join_kept"], "Join (model.join()) over a model or optimizer of MultiWorkerMirroredStrategy")
    for result in [threads] + workers:
        for case in ("join", "join_in_run"):
            _refused(result["refusals"][case], "Join (model.join()) over a model or optimizer of ",
                     "strategy.experimental_distribute_dataset(loader)", "join(divide_by_initial_world_size=True)")


def test_differentiable_collectives_in_a_loss(results):
    """CLIP's gathered contrastive loss with torch.distributed.nn.functional's all_gather and all_reduce:
    DDP's weights on workers with the program's process group; refused on replicas naming the replica
    context's differentiable all_gather and all_reduce, with which the port gives DDP's weights."""
    threads, ddp, workers = results
    for worker in workers:
        assert _difference(worker["clip"], ddp[0]["clip"]) <= TOL
        _refused(worker["refusals"]["nn_all_gather"], "torch.distributed.nn.functional.all_gather inside strategy.run")
    _refused(threads["refusals"]["nn_all_gather"], "torch.distributed.nn.functional.all_gather inside strategy.run: "
             "MirroredStrategy's 2 replica(s)", "md.distribute.get_replica_context().all_gather(z, axis=0)",
             "get_replica_context().all_reduce('sum', t)")
    assert _difference(threads["clip_port"], ddp[0]["clip"]) <= TOL


def test_torch_distributed_in_the_loop_without_a_process_group(results):
    """dist.get_rank() / get_world_size() / barrier() / all_reduce(metric) written in the loop, outside
    strategy.run, with no process group: torch's ValueError, naming multidev's way for each."""
    threads, _, workers = results
    for result in [threads] + workers:
        refusals = result["refusals"]
        _refused(refusals["get_rank"], "Default process group has not been initialized (torch.distributed.get_rank)",
                 "`if strategy.extended.worker_index == 0:`")
        _refused(refusals["get_world_size"], "(torch.distributed.get_world_size)", "strategy.extended.num_workers")
        _refused(refusals["barrier"], "(torch.distributed.barrier)", "nothing to wait for", "keep your init_process_group")
        _refused(refusals["all_reduce"], "(torch.distributed.all_reduce)", "strategy.reduce('sum', value, axis=None)")


def test_torch_functions_are_torchs_once_the_strategies_are_freed(results):
    assert results[0]["torchs_again"] is True


def test_constructors_refuse_their_keyword_forms_alike(results):
    """DDP(module=model), Join(joinables=[model]), ZeroRedundancyOptimizer(params=...) outside the scope."""
    for result in [results[0]] + results[2]:
        ddp, join, zero = result["refusals"]["keywords"]
        _refused(ddp, "DistributedDataParallel(model) under ")
        _refused(join, "Join (model.join()) over a model or optimizer of ")
        _refused(zero, "ZeroRedundancyOptimizer under ")
