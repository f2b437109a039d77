"""Losses and metrics swept over a generated table, written once for ``tf`` = TensorFlow or multidev.

``python tests/keras/_loss_metric_sweep.py tf`` (TensorFlow 2.21's python) prints one JSON dict
``{case id: observation}``; ``tests/keras/test_loss_metric_sweep.py`` compares multidev's with the
recording ``tf_2.21_loss_metric_sweep.json``. An observation is a nested list of floats, or the
exception's type name. Case ids read ``kind|class|kwargs|reduction|sample_weight``.
"""

import json
import sys

import numpy as np

if __name__ == "__main__" and sys.argv[1:] == ["tf"]:
    import tensorflow as tf
else:
    import multidev as tf

K = tf.keras
B, T, C = 4, 5, 3


def _data():
    """Every kind of (y_true, y_pred), from one seeded generator (the same arrays on both sides)."""
    rng = np.random.RandomState(7)
    f = lambda *s: rng.randn(*s).astype("float32")
    u = lambda *s: rng.uniform(0.05, 0.95, s).astype("float32")
    onehot = lambda ids: np.eye(C, dtype="float32")[ids]
    probs = lambda *s: (lambda p: p / p.sum(-1, keepdims=True))(u(*s))
    ids, ids3 = rng.randint(0, C, B), rng.randint(0, C, (B, T))
    bits, bits3 = rng.randint(0, 2, (B, C)).astype("float32"), rng.randint(0, 2, (B, T, C)).astype("float32")
    return {
        "reg": (f(B, C), f(B, C)), "reg3": (f(B, T, C), f(B, T, C)), "reg1": (f(B), f(B, 1)),
        "pos": (u(B, C) * 3, u(B, C) * 3), "prob": (probs(B, C), probs(B, C)),
        "bin": (bits, u(B, C)), "bin_logits": (bits, 2 * f(B, C)), "bin3": (bits3, u(B, T, C)),
        "bin1": (bits[:, 0], u(B, 1)),
        "pm1": (2 * bits - 1, f(B, C)),
        "cat": (onehot(ids), probs(B, C)), "cat_logits": (onehot(ids), 2 * f(B, C)),
        "cat3": (onehot(ids3), probs(B, T, C)),
        "sparse": (ids.astype("int64"), probs(B, C)), "sparse_i32": (ids.astype("int32"), probs(B, C)),
        "sparse_f": (ids.astype("float32"), probs(B, C)), "sparse_col": (ids.reshape(B, 1), probs(B, C)),
        "sparse_logits": (ids, 2 * f(B, C)), "sparse3": (ids3, probs(B, T, C)),
        "sparse3_logits": (ids3, 2 * f(B, T, C)),
        "eq": (bits, rng.randint(0, 2, (B, C)).astype("float32")), "ids": (ids, rng.randint(0, C, B)),
        "vals": (None, f(B, C)),
        "ctc": (np.array([[1, 2], [2, 0], [1, 1], [2, 1]]), 2 * f(B, T, C)),   # labels, 0 the blank and padding
    }


DATA = _data()
WEIGHTS = {"-": None, "b": np.linspace(0.5, 2.0, B).astype("float32"),
           "b1": np.linspace(0.5, 2.0, B).astype("float32").reshape(B, 1),
           "bt": np.linspace(0.0, 2.0, B * T).astype("float32").reshape(B, T)}
REDUCTIONS = ["sum_over_batch_size", "sum", "none", None, "mean", "mean_with_sample_weight", "auto"]
REG, POS, BIN = ["reg", "reg3", "reg1"], ["pos", "reg"], ["bin", "bin3", "bin1"]
#: (class, constructor kwargs, kinds of data)
LOSSES = [
    ("MeanSquaredError", {}, REG), ("MeanAbsoluteError", {}, REG), ("Huber", {}, REG),
    ("Huber", {"delta": 0.3}, ["reg"]), ("LogCosh", {}, REG), ("MeanAbsolutePercentageError", {}, ["reg"]),
    ("MeanSquaredLogarithmicError", {}, POS), ("CosineSimilarity", {}, ["reg", "reg3"]),
    ("CosineSimilarity", {"axis": 0}, ["reg"]), ("KLDivergence", {}, ["prob", "pos"]), ("Poisson", {}, ["pos"]),
    ("Hinge", {}, ["pm1", "bin"]), ("SquaredHinge", {}, ["pm1", "bin"]), ("CategoricalHinge", {}, ["cat"]),
    ("BinaryCrossentropy", {}, BIN), ("BinaryCrossentropy", {"from_logits": True}, ["bin_logits"]),
    ("BinaryCrossentropy", {"label_smoothing": 0.2}, ["bin"]),
    ("BinaryCrossentropy", {"from_logits": True, "label_smoothing": 0.1}, ["bin_logits"]),
    ("BinaryCrossentropy", {"axis": 0}, ["bin"]),
    ("CategoricalCrossentropy", {}, ["cat", "cat3"]),
    ("CategoricalCrossentropy", {"from_logits": True}, ["cat_logits"]),
    ("CategoricalCrossentropy", {"label_smoothing": 0.2}, ["cat"]),
    ("CategoricalCrossentropy", {"from_logits": True, "label_smoothing": 0.1}, ["cat_logits"]),
    ("CategoricalCrossentropy", {"axis": 0}, ["cat"]),
    ("SparseCategoricalCrossentropy", {}, ["sparse", "sparse_i32", "sparse_f", "sparse_col", "sparse3"]),
    ("SparseCategoricalCrossentropy", {"from_logits": True}, ["sparse_logits", "sparse3_logits"]),
    ("SparseCategoricalCrossentropy", {"ignore_class": 1}, ["sparse", "sparse3"]),
    ("SparseCategoricalCrossentropy", {"from_logits": True, "ignore_class": 0}, ["sparse_logits"]),
    ("BinaryFocalCrossentropy", {}, ["bin"]),
    ("BinaryFocalCrossentropy", {"apply_class_balancing": True, "gamma": 1.5, "from_logits": True},
     ["bin_logits"]),
    ("CategoricalFocalCrossentropy", {}, ["cat"]),
    ("CTC", {}, ["ctc"]), ("Dice", {}, ["bin"]), ("Dice", {"axis": -1}, ["bin", "bin3"]), ("Tversky", {"alpha": 0.3, "beta": 0.7}, ["bin"]),
    ("Tversky", {"axis": -1}, ["bin"]), ("CategoricalGeneralizedCrossEntropy", {}, ["sparse"]),
    ("CategoricalGeneralizedCrossEntropy", {"q": 0.2}, ["sparse_i32"]),
    ("CategoricalFocalCrossentropy", {"alpha": 0.5, "from_logits": True, "label_smoothing": 0.1},
     ["cat_logits"]),
]


AUC_CURVES = [{"num_thresholds": 7}, {"curve": "PR"}, {"summation_method": "minoring"},
              {"summation_method": "majoring", "curve": "PR"}, {"multi_label": True},
              {"multi_label": True, "curve": "PR", "num_thresholds": 11}]
THRESHOLDS = [{}, {"thresholds": [0.3, 0.5, 0.7]}, {"top_k": 2}, {"class_id": 1}, {"thresholds": 0.6, "class_id": 2}]
#: (class, constructor kwargs, kinds of data); "vals": update_state(values, sample_weight)
METRICS = [
    ("Accuracy", {}, ["eq"]), ("BinaryAccuracy", {}, BIN), ("BinaryAccuracy", {"threshold": 0.7}, ["bin"]),
    ("CategoricalAccuracy", {}, ["cat", "cat3"]),
    ("SparseCategoricalAccuracy", {}, ["sparse", "sparse_col", "sparse_f", "sparse3"]),
    ("TopKCategoricalAccuracy", {"k": 2}, ["cat"]), ("TopKCategoricalAccuracy", {}, ["cat"]),
    ("SparseTopKCategoricalAccuracy", {"k": 2}, ["sparse", "sparse_col"]),
    ("SparseTopKCategoricalAccuracy", {"k": 1}, ["sparse"]),
    ("MeanSquaredError", {}, REG), ("MeanAbsoluteError", {}, REG), ("MeanAbsolutePercentageError", {}, ["reg"]),
    ("MeanSquaredLogarithmicError", {}, ["pos"]), ("RootMeanSquaredError", {}, ["reg", "reg3"]),
    ("CosineSimilarity", {}, ["reg"]), ("CosineSimilarity", {"axis": 0}, ["reg"]), ("LogCoshError", {}, ["reg"]),
    ("KLDivergence", {}, ["prob"]), ("Poisson", {}, ["pos"]), ("Hinge", {}, ["pm1", "bin"]),
    ("SquaredHinge", {}, ["pm1"]), ("CategoricalHinge", {}, ["cat"]),
    ("BinaryCrossentropy", {}, ["bin"]), ("BinaryCrossentropy", {"from_logits": True}, ["bin_logits"]),
    ("BinaryCrossentropy", {"label_smoothing": 0.1}, ["bin"]), ("CategoricalCrossentropy", {}, ["cat"]),
    ("CategoricalCrossentropy", {"from_logits": True, "label_smoothing": 0.1}, ["cat_logits"]),
    ("SparseCategoricalCrossentropy", {}, ["sparse", "sparse3"]),
    ("SparseCategoricalCrossentropy", {"from_logits": True}, ["sparse_logits"]),
    *[(c, kw, ["bin"]) for c in ("Precision", "Recall") for kw in THRESHOLDS],
    ("AUC", {}, ["bin", "bin1"]), *[("AUC", kw, ["bin"]) for kw in AUC_CURVES],
    ("AUC", {"from_logits": True}, ["bin_logits"]),
    *[(c, kw, ["bin"]) for c in ("TruePositives", "FalsePositives", "TrueNegatives", "FalseNegatives")
      for kw in ({}, {"thresholds": [0.2, 0.8]})],
    ("PrecisionAtRecall", {"recall": 0.5}, ["bin"]), ("RecallAtPrecision", {"precision": 0.5}, ["bin"]),
    ("SensitivityAtSpecificity", {"specificity": 0.5}, ["bin"]),
    ("SpecificityAtSensitivity", {"sensitivity": 0.5}, ["bin"]),
    ("MeanIoU", {"num_classes": 3}, ["ids"]), ("IoU", {"num_classes": 3, "target_class_ids": [0, 2]}, ["ids"]),
    ("BinaryIoU", {}, ["bin"]), ("OneHotIoU", {"num_classes": 3, "target_class_ids": [1]}, ["cat"]),
    ("OneHotMeanIoU", {"num_classes": 3}, ["cat"]),
    ("F1Score", {}, ["bin"]), ("F1Score", {"average": "macro", "threshold": 0.5}, ["cat"]),
    ("FBetaScore", {"beta": 2.0, "average": "micro", "threshold": 0.4}, ["bin"]), ("R2Score", {}, ["reg"]),
    ("PearsonCorrelation", {}, ["reg"]), ("ConcordanceCorrelation", {}, ["reg", "reg3"]),
    ("PearsonCorrelation", {"axis": 0}, ["reg"]), ("F1Score", {"average": "weighted"}, ["bin"]),
    ("IoU", {"num_classes": 3, "target_class_ids": [1], "ignore_class": 0}, ["ids"]),
    ("AUC", {"multi_label": True, "label_weights": [0.2, 0.5, 0.3]}, ["bin"]),
    ("AUC", {"label_weights": [1, 2, 0]}, ["bin"]),
    ("R2Score", {"class_aggregation": "variance_weighted_average", "num_regressors": 1}, ["reg"]),
    ("Mean", {}, ["vals"]), ("Sum", {}, ["vals"]), ("MeanTensor", {}, ["vals"]),
]


def observe(fn):
    """The value as nested floats, or the exception's type name."""
    try:
        value = np.asarray(fn(), "float64")
        return np.vectorize(lambda v: float(f"{v:.8g}"))(value).tolist() if value.size else value.tolist()
    except Exception as e:      # noqa: BLE001 - the type is the observation
        return type(e).__name__


def loss_cases():
    out = {}
    for cls, kwargs, kinds in LOSSES:
        for kind in kinds:
            y_true, y_pred = DATA[kind]
            for reduction in REDUCTIONS:
                for w in ("-", "b", "b1", "bt") if y_pred.ndim == 3 else ("-", "b", "b1"):
                    key = f"{kind}|{cls}|{json.dumps(kwargs, sort_keys=True)}|{reduction}|{w}"
                    out[key] = observe(lambda: getattr(K.losses, cls)(reduction=reduction, **kwargs)(
                        y_true, y_pred, sample_weight=WEIGHTS[w]))
    return out


def _halves(x):
    return (None, None) if x is None else (x[:B // 2], x[B // 2:])


def _metric_run(cls, kwargs, y_true, y_pred, w):
    """Two half-batch updates, result; reset, result; one full update, result."""
    metric = getattr(K.metrics, cls)(**kwargs)
    update = (lambda t, p, sw: metric.update_state(p, sample_weight=sw)) if y_true is None else \
        (lambda t, p, sw: metric.update_state(t, p, sample_weight=sw))
    for t, p, sw in zip(_halves(y_true), _halves(y_pred), _halves(w)):
        update(t, p, sw)
    out = [np.asarray(metric.result(), "float64").tolist()]
    metric.reset_state()
    out.append(np.asarray(metric.result(), "float64").tolist())
    update(y_true, y_pred, w)
    return out + [np.asarray(metric.result(), "float64").tolist()]


def metric_cases():
    out = {}
    for cls, kwargs, kinds in METRICS:
        for kind in kinds:
            y_true, y_pred = DATA[kind]
            for w in ("-", "b", "bt") if y_pred.ndim == 3 else ("-", "b"):
                key = f"{kind}|{cls}|{json.dumps(kwargs, sort_keys=True)}|metric|{w}"
                out[key] = observe(lambda: _metric_run(cls, kwargs, y_true, y_pred, WEIGHTS[w]))
    return out


if __name__ == "__main__":
    print(json.dumps({**loss_cases(), **metric_cases()}))
