"""Keras 3's remaining mean-of-a-function metrics (errors, hinges, divergences) and RootMeanSquaredError.

Each is the running weighted mean of the loss function of the same name (``keras/losses_extra.py``),
so its state is a sum and merges exactly over replicas.

Example:
    m = md.keras.metrics.RootMeanSquaredError()
    m.update_state(y_true, y_pred); float(m.result())
"""

from __future__ import annotations

import torch

from multidev.keras import losses, losses_extra as lx
from multidev.keras.metrics.base import MeanMetricWrapper


def _metric_class(class_name, fn, default_name, direction, doc, **defaults):
    """A MeanMetricWrapper subclass of ``fn`` taking ``defaults`` as keywords (Keras 3's signature)."""

    def __init__(self, name=default_name, dtype=None, **kwargs):
        unknown = sorted(set(kwargs) - set(defaults))
        if unknown:
            raise TypeError(f"{class_name}() got unexpected keyword argument(s) {unknown}; it takes "
                            f"{sorted(defaults)}, name and dtype.")
        MeanMetricWrapper.__init__(self, fn, name, dtype, **{**defaults, **kwargs})

    return type(class_name, (MeanMetricWrapper,), {"__init__": __init__, "__doc__": doc, "_direction": direction,
                                                   "__module__": __name__})


MeanAbsolutePercentageError = _metric_class("MeanAbsolutePercentageError", lx.mean_absolute_percentage_error,
                                            "mean_absolute_percentage_error", "down", "Running mean of MAPE.")
MeanSquaredLogarithmicError = _metric_class("MeanSquaredLogarithmicError", lx.mean_squared_logarithmic_error,
                                            "mean_squared_logarithmic_error", "down", "Running mean of MSLE.")
CosineSimilarity = _metric_class("CosineSimilarity", lambda t, p, axis=-1: -lx.cosine_similarity(t, p, axis),
                                 "cosine_similarity", "up", "Running mean of the cosine similarity.", axis=-1)
LogCoshError = _metric_class("LogCoshError", lx.log_cosh, "logcosh", "down", "Running mean of log(cosh(error)).")
KLDivergence = _metric_class("KLDivergence", lx.kl_divergence, "kl_divergence", "down",
                             "Running mean of the Kullback-Leibler divergence.")
Poisson = _metric_class("Poisson", lx.poisson, "poisson", "down", "Running mean of the Poisson loss.")
Hinge = _metric_class("Hinge", lx.hinge, "hinge", "down", "Running mean of the hinge loss.")
SquaredHinge = _metric_class("SquaredHinge", lx.squared_hinge, "squared_hinge", "down",
                             "Running mean of the squared hinge loss.")
CategoricalHinge = _metric_class("CategoricalHinge", lx.categorical_hinge, "categorical_hinge", "down",
                                 "Running mean of the categorical hinge loss.")

PearsonCorrelation = _metric_class("PearsonCorrelation", lx.pearson_correlation, "pearson_correlation", "up",
                                   "Running mean of Pearson's correlation along ``axis``.", axis=-1)
ConcordanceCorrelation = _metric_class("ConcordanceCorrelation", lx.concordance_correlation,
                                       "concordance_correlation", "up",
                                       "Running mean of the concordance correlation along ``axis``.", axis=-1)


class RootMeanSquaredError(MeanMetricWrapper):
    """sqrt of the running weighted mean of squared errors (the mean is over every element)."""

    _direction = "down"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, name="root_mean_squared_error", dtype=None):
        super().__init__(_squared_error, name, dtype)

    def result(self):
        return torch.sqrt(super().result())


def _squared_error(y_true, y_pred):
    y_true, y_pred = losses._float(y_true, y_pred)
    return torch.square(y_true - y_pred)


CLASSES = (MeanAbsolutePercentageError, MeanSquaredLogarithmicError, CosineSimilarity, LogCoshError, KLDivergence,
           Poisson, Hinge, SquaredHinge, CategoricalHinge, RootMeanSquaredError, PearsonCorrelation,
           ConcordanceCorrelation)
