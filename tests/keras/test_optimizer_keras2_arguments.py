"""Keras 2's optimizer arguments that Keras 3 dropped are refused saying what replaces them: ``lr`` (tf.keras 2
logged a warning and trained at the default rate, ignoring the value: SGD(lr=0.1) stepped at 0.01) and the
legacy optimizers' ``decay`` (tf.keras 2 refused it pointing at tf.keras.optimizers.legacy)."""

import numpy as np
import pytest

import multidev as md


def test_lr_is_refused_naming_learning_rate():
    with pytest.raises(ValueError, match=r"\{'lr': 0\.1\}.*`lr` is the old name of `learning_rate`"):
        md.keras.optimizers.SGD(lr=0.1)


def test_decay_is_refused_naming_the_schedule_that_gives_it():
    with pytest.raises(ValueError, match=r"`decay` .*InverseTimeDecay\(lr, decay_steps=1, decay_rate=decay\)"):
        md.keras.optimizers.Adam(0.01, decay=0.1)


def test_the_named_schedule_is_the_legacy_decay():
    """The legacy rule: lr / (1 + decay * iterations)."""
    schedule = md.keras.optimizers.schedules.InverseTimeDecay(0.5, decay_steps=1, decay_rate=0.1)
    np.testing.assert_allclose([float(schedule(step)) for step in range(4)], [0.5 / (1 + 0.1 * s) for s in range(4)],
                               rtol=1e-6)
