"""``strategy.experimental_local_results`` of a mirrored variable gives TensorFlow's component variables
(``.numpy()``, ``float``, ``print``, ``assign`` to one replica's copy), and per-replica results of
``strategy.run`` that require grad read with ``.numpy()``, as TF's eager tensors do (TF 2.21 checked)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler, TensorDataset

import multidev as md


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def test_component_variables_read_and_assign_one_replica(strategy):
    with strategy.scope():
        v = md.Variable(2.0)
    first, second = strategy.experimental_local_results(v)
    assert first.numpy() == 2.0 and float(second) == 2.0 and second.numpy().dtype == np.float32
    assert (first.name, second.name) == ("Variable:0", "Variable/replica_1:0")     # TF's names
    assert "Variable/replica_1:0" in repr(second) and second.trainable and second.device.type == "cpu"
    second.assign(5.0)                                    # TF: that replica's copy only
    assert [c.numpy() for c in strategy.experimental_local_results(v)] == [2.0, 5.0]
    assert "1: <md.Variable 'Variable/replica_1:0' shape=() dtype=float32, numpy=array(5." in repr(v)
    second.assign_add(1.0)
    assert strategy.experimental_local_results(v)[1].numpy() == 6.0


def test_results_of_run_that_require_grad_read_per_replica(strategy):
    with strategy.scope():
        w = md.Variable([1.0, 2.0])

    def step(x):
        scaled = w * x                                    # an op on the replica's copy: requires grad
        return md.reduce_sum(scaled), scaled, torch.relu(scaled)

    loss, scaled, relu = strategy.run(step, args=(md.constant(3.0),))
    assert [r.numpy().tolist() for r in strategy.experimental_local_results(scaled)] == [[3.0, 6.0]] * 2
    assert [r.numpy().tolist() for r in relu.values] == [[3.0, 6.0]] * 2
    assert [float(r) for r in strategy.experimental_local_results(loss)] == [9.0, 9.0]
    assert all(r.requires_grad for r in scaled.values)   # still in each replica's autograd graph
    assert strategy.reduce("SUM", loss, axis=None).numpy() == 18.0
    assert strategy.reduce("MEAN", scaled, axis=0).numpy() == pytest.approx(4.5)
    assert strategy.gather(scaled, axis=0).numpy().tolist() == [3.0, 6.0, 3.0, 6.0]
    assert strategy.reduce("SUM", w, axis=None).numpy().tolist() == [2.0, 4.0]


def test_one_replica_result_reads_too():
    one = md.distribute.OneDeviceStrategy("/cpu:0")
    w = torch.ones(2, requires_grad=True)
    out = one.run(lambda: w * 2.0)
    assert out.numpy().tolist() == [2.0, 2.0] and one.experimental_local_results(out)[0].numpy().tolist() == [2.0, 2.0]


def test_distributed_sampler_without_a_layout_names_multidevs_fix(strategy):
    data = TensorDataset(torch.arange(6.0))
    with pytest.raises(ValueError, match=r"Default process group has not been initialized.*DistributedSampler\(dataset, "
                                         r"num_replicas=strategy\.extended\.num_workers, rank=strategy\.extended\."
                                         r"worker_index\).*drop the sampler"):
        DistributedSampler(data)
    with pytest.raises(ValueError, match=r"torch\.distributed\.get_rank"):
        torch.distributed.get_rank()
    sampler = DistributedSampler(data, num_replicas=strategy.extended.num_workers, rank=strategy.extended.worker_index,
                                 shuffle=False)
    assert list(sampler) == list(range(6))
