"""A metric updated with a Python list of tensors, as TensorFlow converts it: keras.io's Forward-Forward logs
``self.loss_metric.update_state([mean_loss])``, ``mean_loss`` an ``ops.cast`` result of the program's own code
(TypeError "len() of a 0-d tensor" before)."""

import numpy as np
import pytest

import multidev as md

K = md.keras


@pytest.mark.parametrize("values,want", [(lambda: [K.ops.cast(K.ops.mean(np.array([1.0, 3.0])), "float32")], 2.0),
                                         (lambda: [md.constant(1.0), md.constant(2.0)], 1.5),
                                         (lambda: (md.constant([1.0, 2.0]), md.constant([3.0, 6.0])), 3.0)],
                         ids=["forward_forward", "two_scalars", "tuple_of_rows"])
def test_mean_of_a_list_of_tensors(values, want):
    metric = K.metrics.Mean()
    metric.update_state(values())
    assert float(metric.result()) == pytest.approx(want)


def test_sum_of_a_list_of_tensors_requiring_grad():
    w = md.Variable(2.0)
    metric = K.metrics.Sum()
    metric.update_state([w * 3.0, w])
    assert float(metric.result()) == pytest.approx(8.0)
