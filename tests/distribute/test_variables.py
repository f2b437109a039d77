"""Distributed variables: TensorFlow's aggregation and synchronization rules."""

import numpy as np
import pytest
import torch

import multidev as md
from multidev import VariableAggregation as Agg
from multidev import VariableSynchronization as Sync

PR = md.distribute.PerReplica


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _seed_batches():
    """The seed notebook's range(16).batch(4) split over two replicas."""
    return [PR((torch.arange(i, i + 2), torch.arange(i + 2, i + 4))) for i in range(0, 16, 4)]


def _running_sum(strategy, aggregation):
    with strategy.scope():
        v = md.Variable(0, dtype=torch.int32, aggregation=aggregation)
    for batch in _seed_batches():
        strategy.run(lambda x: v.assign_add(x.sum()), args=(batch,))
    return v


def test_none_aggregation_lets_replicas_drift(strategy):
    v = _running_sum(strategy, Agg.NONE)
    assert isinstance(v, md.distribute.MirroredVariable)
    assert [int(c) for c in v.values] == [52, 68]
    assert "MirroredVariable:{" in repr(v) and "numpy=array(52" in repr(v)


def test_sum_aggregation_keeps_copies_equal(strategy):
    v = _running_sum(strategy, Agg.SUM)
    assert [int(c) for c in v.values] == [120, 120]


def test_mean_and_only_first_replica(strategy):
    with strategy.scope():
        mean = md.Variable(0.0, aggregation=Agg.MEAN)
        first = md.Variable(0.0, aggregation="ONLY_FIRST_REPLICA")

    def fn():
        rid = md.distribute.get_replica_context().replica_id_in_sync_group
        mean.assign(float(rid + 1))          # replicas write 1 and 2 -> mean 1.5
        first.assign(float(10 * (rid + 1)))  # replica 0 wins -> 10

    strategy.run(fn)
    assert [c.item() for c in mean.values] == [1.5, 1.5]
    assert [c.item() for c in first.values] == [10.0, 10.0]


def test_replica_reads_its_own_copy(strategy):
    with strategy.scope():
        v = md.Variable(1.0)
    v.assign(PR((torch.tensor(5.0), torch.tensor(7.0))))  # cross-replica, per-replica values
    seen = strategy.run(lambda: v.read_value())
    assert [float(t) for t in strategy.experimental_local_results(seen)] == [5.0, 7.0]
    doubled = strategy.run(lambda: v * 2)
    assert [t.item() for t in strategy.experimental_local_results(doubled)] == [10.0, 14.0]


def test_cross_replica_assign_updates_every_copy(strategy):
    with strategy.scope():
        v = md.Variable([1.0, 2.0])
    v.assign([3.0, 4.0])
    v.assign_add([1.0, 1.0])
    v.assign_sub(torch.tensor([0.5, 0.5]))
    assert all(torch.equal(c, torch.tensor([3.5, 4.5])) for c in v.values)
    np.testing.assert_allclose(v.numpy(), [3.5, 4.5])


def test_sync_on_read_sum(strategy):
    with strategy.scope():
        v = md.Variable(0.0, synchronization=Sync.ON_READ, aggregation=Agg.SUM)
    assert isinstance(v, md.distribute.SyncOnReadVariable)
    assert not v.trainable  # ON_READ variables default to non-trainable, as in TF

    def fn():
        rid = md.distribute.get_replica_context().replica_id_in_sync_group
        v.assign_add(float(rid + 1))
        return v.read_value()  # local copy in replica context

    local = strategy.run(fn)
    assert [float(t) for t in strategy.experimental_local_results(local)] == [1.0, 2.0]
    assert float(v.read_value()) == 3.0  # cross-replica read sums
    v.assign(10.0)  # cross-replica assign on SUM divides by the replica count
    assert [c.item() for c in v.values] == [5.0, 5.0]
    assert float(v.read_value()) == 10.0
    with pytest.raises(ValueError, match="cannot be split"):
        v.assign_add(1.0)


def test_sync_on_read_mean(strategy):
    with strategy.scope():
        v = md.Variable(0.0, synchronization="ON_READ", aggregation="MEAN")
    strategy.run(lambda: v.assign(float(md.distribute.get_replica_context().replica_id_in_sync_group) * 4))
    assert float(v.read_value()) == 2.0
    assert float(v + 0) == 2.0  # ops in cross-replica context read the reduced value


def test_variable_outside_scope_is_plain():
    v = md.Variable(2.0, name="w")
    assert type(v) is md.Variable and isinstance(v, torch.nn.Parameter)
    assert v.name == "w:0" and v.trainable
    v.assign_add(1.0)
    assert float(v) == 3.0
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        v.assign(torch.ones(3))


def test_variable_bad_input():
    with pytest.raises(ValueError, match="initial_value"):
        md.Variable()
    with pytest.raises(ValueError, match="Invalid variable aggregation 'BOGUS'"):
        md.Variable(1.0, aggregation="BOGUS")
    with pytest.raises(TypeError, match="ragged"):
        md.Variable([[1, 2], [3]])


def test_variables_created_in_replica_context_are_one_mirrored_variable(strategy):
    """As TensorFlow's mirrored creator: one variable, named once, from replica 0's initial value."""
    def make():
        rid = md.distribute.get_replica_context().replica_id_in_sync_group
        return md.Variable(torch.tensor(float(rid + 1)), name="made_in_run")
    v = strategy.run(make)
    assert isinstance(v, md.distribute.MirroredVariable) and v.name == "made_in_run:0"
    assert [float(c) for c in v.values] == [1.0] * len(v.values)
    strategy.run(lambda: v.assign_add(float(md.distribute.get_replica_context().replica_id_in_sync_group)))
    assert [float(c) for c in v.values] == [1.0 + r for r in range(len(v.values))]   # aggregation NONE: own copy


def test_extended_update_and_reduce_to(strategy):
    with strategy.scope():
        v = md.Variable([1.0, 1.0])
    strategy.extended.update(v, lambda c, d: c.add_(d), args=(torch.tensor([1.0, 2.0]),))
    assert all(torch.equal(c, torch.tensor([2.0, 3.0])) for c in v.values)
    per = PR((torch.tensor(1.0), torch.tensor(2.0)))
    out = strategy.extended.reduce_to("SUM", per, "/cpu:0")
    assert float(out) == 3.0
    outs = strategy.extended.batch_reduce_to("MEAN", [(per, "/cpu:0"), (per, v)])
    assert float(outs[0]) == 1.5
    assert [float(t) for t in outs[1].values] == [1.5, 1.5]


def test_variables_are_not_picklable(strategy):
    import pickle

    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(md.Variable(1.0))


def test_plus_equals_on_a_trainable_variable_says_what_to_do_instead():
    """TF refuses ``v += 1`` on a tf.Variable; md says so and names assign_add (torch's own message
    did not), while the PyTorch in-place update under no_grad and non-trainable counters still work."""
    v = md.Variable(1.0)
    with pytest.raises(RuntimeError, match=r"assign_add\(value\)"):
        v += 1
    with pytest.raises(RuntimeError, match=r"assign_sub\(value\)"):
        v -= 1
    with torch.no_grad():
        v += 2.0
        v -= 0.5
    counter = md.Variable(0.0, trainable=False)
    counter += 1
    assert float(v) == 2.5 and float(counter) == 1.0
