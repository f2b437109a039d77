"""``apply_gradients(..., skip_gradients_aggregation=True)`` in replica context applies each replica's
own gradient to its own copy, as TensorFlow does (issue 24 item 3): the copies then differ, and stay
so (nothing copies replica 0's value over them at the next run)."""

import pytest
import torch

import multidev as md


def _own_gradient_step(opt, v):
    def step():
        r = md.distribute.get_replica_context().replica_id_in_sync_group
        opt.apply_gradients([(torch.full((2,), float(r + 1)), v)], skip_gradients_aggregation=True)
    return step


@pytest.mark.parametrize("make_opt", [lambda: md.keras.optimizers.SGD(learning_rate=0.1),
                                      lambda: md.keras.mixed_precision.LossScaleOptimizer(
                                          md.keras.optimizers.SGD(learning_rate=0.1))],
                         ids=["sgd", "loss_scale"])
def test_each_replica_applies_its_own_gradient(make_opt):
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        v = md.Variable([0.0, 0.0])
        opt = make_opt()
    strategy.run(_own_gradient_step(opt, v))
    assert [c.tolist() for c in v.values] == [pytest.approx([-0.1, -0.1]), pytest.approx([-0.2, -0.2])]
    strategy.run(lambda: None)
    assert [c.tolist() for c in v.values] == [pytest.approx([-0.1, -0.1]), pytest.approx([-0.2, -0.2])]
    assert int(opt.iterations) == 1


def test_aggregated_gradients_still_sum():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        v = md.Variable([0.0, 0.0])
        opt = md.keras.optimizers.SGD(learning_rate=0.1)

    def step():
        r = md.distribute.get_replica_context().replica_id_in_sync_group
        opt.apply_gradients([(torch.full((2,), float(r + 1)), v)])

    strategy.run(step)
    assert [c.tolist() for c in v.values] == [pytest.approx([-0.3, -0.3])] * 2
