"""``md.keras.random``: Keras 3's shapes, dtypes and seed rules (int seed repeats, SeedGenerator advances)."""

from __future__ import annotations

import pytest
import torch

import multidev as md
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()
R = md.keras.random

CALLS = [("normal", ((3, 4),), {}), ("uniform", ((5,),), {"minval": -2.0, "maxval": 3.0}),
         ("randint", ((2, 3), 0, 7), {}), ("truncated_normal", ((4, 4),), {"stddev": 0.5}),
         ("dropout", (torch.ones(4, 6), 0.5), {}), ("shuffle", (torch.arange(8),), {}),
         ("categorical", (torch.zeros(2, 3), 5), {}), ("gamma", ((3,), 2.0), {}), ("beta", ((3,), 2.0, 3.0), {}),
         ("binomial", ((3,), 5.0, 0.3), {}), ("normal", ((2,),), {"dtype": "float64"})]


@pytest.mark.parametrize("name,args,kwargs", CALLS, ids=[c[0] + str(i) for i, c in enumerate(CALLS)])
def test_shapes_dtypes_and_int_seeds_as_keras3(name, args, kwargs):
    ours = getattr(R, name)(*args, seed=3, **kwargs)
    theirs = getattr(keras.random, name)(*args, seed=3, **kwargs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    torch.testing.assert_close(getattr(R, name)(*args, seed=3, **kwargs), ours)   # an int seed repeats


def test_seed_generator_advances_and_is_reproducible():
    a, b = R.SeedGenerator(7), R.SeedGenerator(7)
    first, second = R.normal((4,), seed=a), R.normal((4,), seed=a)
    assert not torch.equal(first, second)
    torch.testing.assert_close(R.normal((4,), seed=b), first)
    md.keras.utils.set_random_seed(1)
    x = R.uniform((3,))
    md.keras.utils.set_random_seed(1)
    torch.testing.assert_close(R.uniform((3,)), x)   # seed=None follows set_random_seed


def test_distributions_statistics():
    g = R.SeedGenerator(0)
    n = R.normal((20000,), mean=1.0, stddev=2.0, seed=g)
    assert abs(float(n.mean()) - 1.0) < 0.1 and abs(float(n.std()) - 2.0) < 0.1
    t = R.truncated_normal((20000,), stddev=2.0, seed=g)
    assert float(t.abs().max()) <= 4.0
    u = R.uniform((20000,), minval=-1.0, maxval=1.0, seed=g)
    assert float(u.min()) >= -1.0 and float(u.max()) < 1.0
    kept = R.dropout(torch.ones(20000), 0.25, seed=g)
    torch.testing.assert_close(kept[kept > 0], torch.full_like(kept[kept > 0], 4.0 / 3.0))
    assert abs(float((kept > 0).float().mean()) - 0.75) < 0.02
    assert sorted(R.shuffle(torch.arange(10), seed=g).tolist()) == list(range(10))
    draws = R.categorical(torch.tensor([[0.0, -1e9, -1e9]]), 50, seed=g)
    assert draws.unique().tolist() == [0]


def test_bad_seeds_and_dtypes_raise_value_error():
    with pytest.raises(ValueError, match="seed"):
        R.normal((2,), seed="7")
    with pytest.raises(ValueError, match="float dtype"):
        R.normal((2,), dtype="int32")
    with pytest.raises(ValueError, match="seed"):
        R.SeedGenerator(1.5)
