"""A Python number of the enclosing function written by every replica of ``strategy.run``
(``multidev/distribute/shared_numbers.py``): ``+=`` and a plain assignment are refused, each saying what
goes wrong with it and the port."""

from __future__ import annotations

import pytest
import torch

import multidev as md

DEVICES = ["/cpu:0", "/cpu:1"]


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(DEVICES)


def _refusal(strategy, fn) -> str:
    with pytest.raises(ValueError) as raised:
        strategy.run(fn)
    return str(raised.value)


def test_an_overwrite_is_refused_as_an_overwrite(strategy):
    """cleanrl's SAC ``alpha = log_alpha.exp().item()`` after the entropy update, ``alpha`` its global."""
    with strategy.scope():
        log_alpha = md.Variable(torch.zeros(1, dtype=torch.float64))
    alpha = 1.0

    def step():
        nonlocal alpha
        alpha = log_alpha.exp().item()

    message = _refusal(strategy, step)
    assert "writes the enclosing function's variable 'alpha' (now 1.0)" in message, message
    assert "`alpha = ...` in one replica overwrites the value the others read next" in message
    assert "alpha = log_alpha.exp().item()` in the step" in message and "+=" not in message


def test_an_addition_is_refused_as_a_lost_addition(strategy):
    correct = 0

    def step():
        nonlocal correct
        correct += 1

    message = _refusal(strategy, step)
    assert "`correct += ...` read-modify-writes it unguarded" in message, message
