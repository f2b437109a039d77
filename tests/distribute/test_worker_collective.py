"""The injected worker collective: LocalWorkers (identities), ProcessWorkers (hierarchical, over a
ProcessCollective; here a stand-in for a second worker), and the chief's values for new variables."""

from __future__ import annotations

import gc

import pytest
import torch

import multidev as md
from multidev._core.enums import ReduceOp
from multidev.distribute.worker_collective import LocalWorkers, ProcessWorkers, WorkerCollective


class _OtherWorkerAddsOne:
    """A ProcessCollective stand-in for worker 1 of 2 whose peer holds ``mine + 1`` everywhere."""

    world_size, rank, timeout_seconds = 2, 1, 5.0

    def all_reduce(self, tensor, op):
        return tensor.mul_(2).add_(1)

    def all_gather(self, tensor):
        return [tensor + 1, tensor]            # worker 0's first, then ours

    def broadcast(self, tensor, src=0):
        return tensor + 1


def test_process_workers_reduce_locally_then_across_workers():
    workers = ProcessWorkers(_OtherWorkerAddsOne())
    devices = [torch.device("cpu")] * 2
    mine = [torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])]
    total = workers.all_reduce(ReduceOp.SUM, mine, devices, True, None)
    assert [t.tolist() for t in total] == [[9.0, 13.0]] * 2 and total[0] is not total[1]
    mean = workers.all_reduce(ReduceOp.MEAN, mine, devices, True, None)
    assert [t.tolist() for t in mean] == [[2.25, 3.25]] * 2          # over 2 workers x 2 replicas
    gathered = workers.all_gather([torch.ones(2, 1), torch.zeros(2, 1)], 1, devices)
    assert gathered[0].tolist() == [[2.0, 1.0, 1.0, 0.0]] * 2        # along axis 1, worker 0 first
    assert workers.sum(torch.tensor([1.0])).tolist() == [3.0]
    assert (workers.num_workers, workers.worker_index, workers.is_chief, workers.spans_processes) == (2, 1, False, True)


def test_local_workers_are_identities_and_reduce_in_process():
    workers = LocalWorkers(timeout_seconds=3.0)
    t = torch.ones(2)
    assert workers.sum(t) is t and workers.broadcast(t) is t and workers.gather(t, 0) is t
    out = workers.all_reduce(ReduceOp.MEAN, [torch.ones(2), 3 * torch.ones(2)], [torch.device("cpu")] * 2, True,
                             md.distribute.ReductionToOneDevice())
    assert [o.tolist() for o in out] == [[2.0, 2.0]] * 2
    assert (workers.num_workers, workers.worker_index, workers.is_chief, workers.timeout_seconds) == (1, 0, True, 3.0)


class _Recording(WorkerCollective):
    """Records which new variables' values would come from the chief."""

    num_workers, worker_index, spans_processes, timeout_seconds = 1, 0, False, 5.0

    def __init__(self):
        self.broadcasts = []
        self._local = LocalWorkers()

    def sum(self, tensor):
        return tensor

    gather = lambda self, tensor, axis: tensor   # noqa: E731
    broadcast = sum

    def all_reduce(self, *args):
        return self._local.all_reduce(*args)

    def all_gather(self, *args):
        return self._local.all_gather(*args)

    def broadcast_initial_values(self, primaries):
        self.broadcasts.append([float(p.detach()) for p in primaries])


def test_every_new_variable_gets_the_chiefs_value_once_even_after_others_died(monkeypatch):
    strategy = md.distribute.MirroredStrategy(["/cpu:0"])
    recording = _Recording()
    monkeypatch.setattr(strategy.extended, "_workers", recording)
    with strategy.scope():
        a = md.Variable(1.0)
    strategy.run(lambda: None)
    with strategy.scope():
        b, c = md.Variable(2.0), md.Variable(3.0)
    del b
    gc.collect()
    strategy.run(lambda: None)
    with strategy.scope():
        d = md.Variable(4.0)
    strategy.run(lambda: None)
    strategy.run(lambda: None)
    assert recording.broadcasts == [[1.0], [3.0], [4.0]]
    assert float(a) + float(c) + float(d) == 8.0


def test_a_worker_collective_must_implement_every_collective():
    class Partial(WorkerCollective):
        num_workers, worker_index, spans_processes, timeout_seconds = 1, 0, False, 1.0

        def sum(self, tensor):
            return tensor

    with pytest.raises(TypeError, match="abstract"):
        Partial()
