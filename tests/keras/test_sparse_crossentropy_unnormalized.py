"""``sparse_categorical_crossentropy`` of outputs that are not probabilities (logits fed to a metric built
without ``from_logits``, as the early-stopping migration guide's ``SparseCategoricalCrossentropy()``
metric is): TensorFlow clips, takes logs and normalises them through a softmax; multidev took the
clipped log alone (10.0 where TF reports 10.6 in that guide). Values recorded with TF 2.21."""

import numpy as np

import multidev as md

P = np.array([[2.0, -1.0, 0.5], [0.2, 0.3, 0.1]], "float32")
Y = np.array([0, 2])


def test_loss_and_metric_give_tensorflows_numbers():
    got = md.keras.losses.sparse_categorical_crossentropy(Y, P).detach().numpy()
    np.testing.assert_allclose(got, [0.4054652750492096, 1.7917594909667969], rtol=1e-6)
    metric = md.keras.metrics.SparseCategoricalCrossentropy()
    metric.update_state(Y, P)
    np.testing.assert_allclose(float(metric.result()), 1.0986124277114868, rtol=1e-6)
