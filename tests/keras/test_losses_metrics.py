"""Losses (values, reductions, from_logits, label checks) and metrics (values, exact merge_state)."""

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from multidev.keras import losses, metrics


def test_loss_reductions_and_sample_weight():
    y_true = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    y_pred = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    assert float(losses.MeanSquaredError()(y_true, y_pred)) == pytest.approx(0.5)
    assert float(losses.MeanSquaredError(reduction="sum")(y_true, y_pred)) == pytest.approx(1.0)
    per = losses.MeanSquaredError(reduction="none")(y_true, y_pred)
    torch.testing.assert_close(per, torch.tensor([0.5, 0.5]))
    assert float(losses.MeanSquaredError()(y_true, y_pred, sample_weight=[0.7, 0.3])) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="Invalid Reduction Key: 'auto'"):   # TF 2.21 (Keras 3) accepts 'mean'
        losses.MeanSquaredError(reduction="auto")


def test_function_forms_and_shape_alignment():
    y_true = np.array([1.0, 2.0, 3.0])                 # (3,) vs predictions (3, 1): aligned, not broadcast
    y_pred = torch.tensor([[1.0], [2.0], [5.0]])
    torch.testing.assert_close(losses.mean_squared_error(y_true, y_pred), torch.tensor([0.0, 0.0, 4.0]))
    torch.testing.assert_close(losses.mean_absolute_error(y_true, y_pred), torch.tensor([0.0, 0.0, 2.0]))
    torch.testing.assert_close(losses.Huber()(torch.tensor([[0.0, 0.0]]), torch.tensor([[0.5, 3.0]])),
                               torch.tensor((0.125 + 2.5) / 2))


def test_crossentropies_against_torch():
    logits = torch.randn(5, 4)
    labels = torch.tensor([0, 3, 1, 2, 3])
    ref = torch.nn.functional.cross_entropy(logits, labels)
    sparse = losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits)
    torch.testing.assert_close(sparse, ref)
    probs = torch.softmax(logits, -1)
    torch.testing.assert_close(losses.sparse_categorical_crossentropy(labels, probs).mean(), ref, atol=1e-5, rtol=0)
    onehot = torch.nn.functional.one_hot(labels, 4).float()
    torch.testing.assert_close(losses.CategoricalCrossentropy()(onehot, probs), ref, atol=1e-5, rtol=0)
    z = torch.randn(6, 1)
    t = torch.tensor([[0.0], [1.0], [1.0], [0.0], [1.0], [0.0]])
    ref_bce = torch.nn.functional.binary_cross_entropy_with_logits(z, t)
    torch.testing.assert_close(losses.BinaryCrossentropy(from_logits=True)(t, z), ref_bce)
    torch.testing.assert_close(losses.BinaryCrossentropy()(t, torch.sigmoid(z)), ref_bce, atol=1e-5, rtol=0)


def test_out_of_range_labels_and_shape_mismatch():
    with pytest.raises(ValueError, match=r"label value of 4 which is outside the valid range of \[0, 4\)"):
        losses.sparse_categorical_crossentropy(torch.tensor([0, 4]), torch.rand(2, 4))
    with pytest.raises(ValueError, match=r"label value of -1"):
        losses.sparse_categorical_crossentropy(torch.tensor([-1, 0]), torch.rand(2, 4))
    with pytest.raises(ValueError, match="must have the same shape.*sparse_categorical_crossentropy"):
        losses.categorical_crossentropy(torch.tensor([0, 1]), torch.rand(2, 4))


def test_accuracy_metric_family():
    probs = torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3], [0.2, 0.3, 0.5]])
    labels = torch.tensor([1, 2, 0])
    m = metrics.SparseCategoricalAccuracy()
    m.update_state(labels, probs)
    assert float(m.result()) == pytest.approx(1 / 3)
    top2 = metrics.SparseTopKCategoricalAccuracy(k=2)
    top2.update_state(labels, probs)
    assert float(top2.result()) == pytest.approx(2 / 3)
    cat = metrics.CategoricalAccuracy()
    cat.update_state(torch.nn.functional.one_hot(labels, 3), probs)
    assert float(cat.result()) == pytest.approx(1 / 3)
    b = metrics.BinaryAccuracy()
    b.update_state([[1], [0], [1]], [[0.7], [0.2], [0.4]])
    assert float(b.result()) == pytest.approx(2 / 3)
    torch.testing.assert_close(metrics.sparse_categorical_accuracy(labels, probs), torch.tensor([1.0, 0.0, 0.0]))
    mae = metrics.MeanAbsoluteError()
    mae.update_state([[1.0], [2.0]], [[2.0], [2.0]], sample_weight=[3.0, 1.0])
    assert float(mae.result()) == pytest.approx(0.75)
    m.reset_state()
    assert float(m.result()) == 0.0


def test_mean_and_sum_and_merge_is_exact_on_uneven_shards():
    values = np.random.RandomState(0).rand(11).astype("float32")
    whole = metrics.Mean()
    whole.update_state(values)
    shards = [metrics.Mean() for _ in range(3)]
    shards[0].update_state(values[:8])
    shards[1].update_state(values[8:])            # uneven: 8 / 3 / 0 examples
    shards[0].merge_state(shards[1:])
    assert float(shards[0].result()) == pytest.approx(float(whole.result()), rel=1e-6)
    assert float(shards[0].result()) != pytest.approx((values[:8].mean() + values[8:].mean()) / 2, rel=1e-6)
    s = metrics.Sum()
    s.update_state([1.0, 2.0], sample_weight=[2.0, 0.5])
    assert float(s.result()) == 3.0
    with pytest.raises(ValueError, match="cannot merge state"):
        whole.merge_state([s])


def test_precision_recall_and_merge():
    y_true = np.array([1, 0, 1, 1, 0, 0])
    y_pred = np.array([0.9, 0.8, 0.3, 0.6, 0.1, 0.4])
    p, r = metrics.Precision(), metrics.Recall()
    p.update_state(y_true, y_pred)
    r.update_state(y_true, y_pred)
    assert float(p.result()) == pytest.approx(2 / 3)
    assert float(r.result()) == pytest.approx(2 / 3)
    a, b = metrics.Precision(), metrics.Precision()
    a.update_state(y_true[:4], y_pred[:4])
    b.update_state(y_true[4:], y_pred[4:])
    a.merge_state([b])
    assert float(a.result()) == pytest.approx(2 / 3)
    multi = metrics.Recall(thresholds=[0.2, 0.7])
    multi.update_state(y_true, y_pred)
    torch.testing.assert_close(multi.result(), torch.tensor([1.0, 1 / 3]))


def test_auc_roc_close_to_sklearn_and_pr_in_range():
    rng = np.random.RandomState(0)
    y_true = rng.randint(0, 2, 500)
    y_pred = np.clip(y_true * 0.3 + rng.rand(500) * 0.7, 0, 1)
    auc = metrics.AUC(num_thresholds=1000)
    auc.update_state(y_true, y_pred)
    assert float(auc.result()) == pytest.approx(roc_auc_score(y_true, y_pred), abs=2e-3)
    default = metrics.AUC()
    assert default.num_thresholds == 200
    half = [metrics.AUC(), metrics.AUC()]
    half[0].update_state(y_true[:300], y_pred[:300])
    half[1].update_state(y_true[300:], y_pred[300:])
    default.update_state(y_true, y_pred)
    half[0].merge_state([half[1]])
    assert float(half[0].result()) == pytest.approx(float(default.result()), rel=1e-6)
    pr = metrics.AUC(curve="PR")
    pr.update_state(y_true, y_pred)
    assert 0.5 < float(pr.result()) <= 1.0
    with pytest.raises(ValueError, match="Invalid AUC curve value"):
        metrics.AUC(curve="XY")


def test_step_metric_states_keep_replicas_apart_and_merge_exactly():
    import multidev as md
    from multidev.keras.step_inputs import StepInputs

    y = np.array([0, 1, 2, 1, 0, 2, 1])
    p = np.eye(3)[[0, 1, 1, 1, 2, 2, 0]].astype("float32")
    acc, mean = metrics.SparseCategoricalAccuracy(), metrics.Mean()
    stores = ({}, {})
    shards = [slice(0, 5), slice(5, 7)]                 # uneven per-replica batches
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def replica(shard):
        acc.update_state(y[shard], p[shard])
        mean.update_state(y[shard].astype("float32"))

    with strategy.scope():
        strategy.extended._call_for_each_replica(replica, (md.distribute.PerReplica(shards),), {},
                                                 step=StepInputs("test", None, stores))
    assert float(acc.result()) == 0.0 and float(mean.count) == 0.0      # own state untouched so far
    assert all(acc in s and mean in s for s in stores)
    acc.merge_state([s[acc] for s in stores])
    mean.merge_state([s[mean] for s in stores])
    whole = metrics.SparseCategoricalAccuracy()
    whole.update_state(y, p)
    assert float(acc.result()) == pytest.approx(float(whole.result()))
    assert float(mean.result()) == pytest.approx(y.mean())
