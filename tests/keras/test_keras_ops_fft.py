"""``md.keras.ops``' Fourier transforms, complex parts and ``broadcast_to`` against Keras 3's own (torch backend)
on the same inputs, and the errors of a bad ``(real, imag)`` pair (keras.io's FNet calls ``ops.fft2``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from multidev.keras import ops
from tests.integrations._keras3_env import import_keras3
from tests.keras.test_keras_ops import _same

keras = import_keras3()

_g = torch.Generator().manual_seed(1)
RE, IM = torch.randn(2, 3, 4, generator=_g), torch.randn(2, 3, 4, generator=_g)
Z = torch.complex(RE, IM)
CASES = [
    ("fft", ((RE, IM),), {}), ("fft2", ((RE, IM),), {}), ("fft2", ((RE, torch.zeros_like(RE)),), {}),
    ("ifft2", ((RE, IM),), {}), ("rfft", (RE,), {}), ("rfft", (RE,), {"fft_length": 6}),
    ("irfft", ((RE, IM),), {}), ("irfft", ((RE, IM),), {"fft_length": 5}), ("real", (Z,), {}),
    ("imag", (Z,), {}), ("real", (np.array([1 + 2j, 3 - 1j]),), {}), ("broadcast_to", (RE[0, 0], (3, 4)), {}),
    ("broadcast_to", (torch.tensor([1, 2]), [2, 2]), {}),
]


@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_equals_keras3(name, args, kwargs):
    _same(getattr(ops, name)(*args, **kwargs), getattr(keras.ops, name)(*args, **kwargs), f"ops.{name}")


def test_conj_and_the_inverse_round_trip():
    torch.testing.assert_close(ops.conj(Z), torch.complex(RE, -IM))
    back = ops.ifft2(ops.fft2((RE, IM)))
    torch.testing.assert_close(back[0], RE, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ops.irfft(ops.rfft(RE), fft_length=4), RE, rtol=1e-5, atol=1e-5)


def test_gradients_flow_through_fft2_as_in_fnet():
    x = RE.clone().requires_grad_()
    ops.sum(ops.fft2((x, ops.zeros_like(x)))[0] ** 2).backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_a_bad_pair_is_refused_as_keras_refuses_it():
    with pytest.raises(ValueError, match=r"tuple of two tensors.*\(x, ops.zeros_like\(x\)\)"):
        ops.fft2(RE)
    with pytest.raises(ValueError, match=r"same shape.*\(2, 3, 4\).*\(3, 4\)"):
        ops.fft2((RE, IM[0]))
    with pytest.raises(ValueError, match="not of type float.*ops.cast"):
        ops.fft((torch.ones(2, dtype=torch.int32), torch.zeros(2, dtype=torch.int32)))
