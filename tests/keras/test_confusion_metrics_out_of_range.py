"""Threshold metrics (AUC, Precision, Recall, the confusion counts, the at-constraint metrics) given logits
(an ``AUC()`` beside a ``from_logits`` loss) and soft labels: Keras counts a label as positive when it is not
0, and with evenly spaced thresholds (AUC's, ``[0, 0.5, 1]``) it counts predictions clipped to [0, 1]. md
weighed labels by their value and compared raw logits (a PR-AUC of 0.0 where TF gives 0.55). Numbers from
TF 2.21 (tf.keras 2 and Keras 3 alike)."""

import numpy as np
import pytest

import multidev as md

M = md.keras.metrics
Y_TRUE = np.array([0.3, 0, 1, 0.9, 0, 0.2], "float32")
Y_PRED = np.array([-0.5, 0.4, 1.7, 0.8, 1.2, -2.0], "float32")
CASES = [
    (lambda: M.AUC(), 0.3125), (lambda: M.AUC(curve="PR"), 0.5709),
    (lambda: M.AUC(thresholds=[0.25, 0.5, 0.75]), 0.375), (lambda: M.AUC(thresholds=[0.3, 0.6]), 0.25),
    (lambda: M.Precision(thresholds=[0.0, 0.5, 1.0]), [0.5, 0.66667, 0.0]),
    (lambda: M.Recall(thresholds=[0.0, 0.5, 1.0]), [0.5, 0.5, 0.0]),
    (lambda: M.Precision(thresholds=[0.1, 0.7]), [0.5, 0.66667]), (lambda: M.Recall(), 0.5),
    (lambda: M.TruePositives(thresholds=[0.0, 0.5, 1.0]), [2.0, 2.0, 0.0]), (lambda: M.FalsePositives(), 1.0),
    (lambda: M.SensitivityAtSpecificity(0.5, num_thresholds=20), 0.5), (lambda: M.PrecisionAtRecall(0.5), 0.66667),
    (lambda: M.SpecificityAtSensitivity(0.5, num_thresholds=1), 0.5),
]
LOGITS = {  # (labels, logits) -> [AUC(curve="PR", num_thresholds=50), AUC(curve="ROC", num_thresholds=50)]
    "mixed": ([1, 0, 1, 1, 0, 0, 1, 0], [-1.2, 0.3, 2.5, -0.4, -2.0, 1.5, 0.7, -0.1]),
    "all_below_zero": ([1, 0, 1, 0], [-3, -2, -1, -0.5]),
}
TF_2_21_LOGITS = {"mixed": [0.52363, 0.53125], "all_below_zero": [0.5, 0.5]}


@pytest.mark.parametrize("make,want", CASES)
def test_soft_labels_and_logits_count_as_in_keras(make, want):
    metric = make()
    metric.update_state(Y_TRUE, Y_PRED)
    np.testing.assert_allclose(np.asarray(metric.result()), want, rtol=2e-4, atol=1e-6)


def test_an_auc_of_logits_counts_them_clipped_to_probabilities():
    got = {}
    for name, (labels, logits) in LOGITS.items():
        got[name] = []
        for curve in ("PR", "ROC"):
            auc = M.AUC(curve=curve, num_thresholds=50)
            auc.update_state(np.array(labels, "float32"), np.array(logits, "float32"))
            got[name].append(round(float(auc.result()), 5))
    assert got == TF_2_21_LOGITS



@pytest.mark.parametrize("labels", [np.array([0, 2, 1, 1], "float32"), np.array([[0], [2], [1], [1]], "float32")])
def test_class_ids_against_per_class_scores_are_refused_as_tensorflow_refuses_them(labels):
    """TF: 'Shapes (4, 3) and (4,) are incompatible' (md raised torch's size mismatch, or in a model's step
    counted every label against every class score)."""
    scores = np.random.RandomState(0).rand(4, 3).astype("float32")
    for metric in (M.AUC(), M.Precision(), M.Recall(thresholds=[0.3, 0.6]), M.TruePositives()):
        with pytest.raises(ValueError, match=r"Shapes \(4, 3\) and \(4,( 1)?\) are incompatible.*one-hot"):
            metric.update_state(labels, scores)
