"""``md.keras.ops`` Fourier transforms and complex parts, as Keras 3's ``keras.ops.fft``/``fft2``/... take them:
a complex value travels as a ``(real, imag)`` tuple of float tensors of one shape (keras.io's FNet:
``ops.fft2((x, ops.zeros_like(x)))[0]``), the result is such a tuple again; ``real``/``imag``/``conj`` take a
complex tensor (or numpy array), as Keras's numpy ops do.

Example:
    real_part, imag_part = ops.fft2((x, ops.zeros_like(x)))   # over the last two axes
"""

from __future__ import annotations

import numpy as np
import torch

from multidev.keras.ops.core import convert_to_tensor

__all__ = ["fft", "fft2", "ifft2", "rfft", "irfft", "real", "imag", "conj", "stft", "istft"]


def _complex(x, op: str) -> torch.Tensor:
    """The complex tensor of a ``(real, imag)`` pair, refused as Keras 3 refuses a bad pair."""
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        got = f"a {type(x).__name__} of shape {tuple(x.shape)}" if hasattr(x, "shape") else repr(x)
        raise ValueError(f"ops.{op}: input `x` should be a tuple of two tensors - real and imaginary. "
                         f"Received: x={got}. For a real tensor pass (x, ops.zeros_like(x)).")
    real_part, imag_part = convert_to_tensor(x[0]), convert_to_tensor(x[1])
    if real_part.shape != imag_part.shape:
        raise ValueError(f"ops.{op}: input `x` should be a tuple of two tensors - real and imaginary. Both the real "
                         "and imaginary parts should have the same shape. Received: x[0].shape = "
                         f"{tuple(real_part.shape)}, x[1].shape = {tuple(imag_part.shape)}")
    if not (real_part.is_floating_point() and imag_part.is_floating_point()):
        raise ValueError(f"ops.{op}: at least one tensor in input `x` is not of type float. Received dtypes "
                         f"{real_part.dtype} and {imag_part.dtype}: cast them with ops.cast(x, 'float32').")
    return torch.complex(real_part, imag_part)


def _pair(z: torch.Tensor) -> tuple:
    return z.real, z.imag


def fft(x):
    """The FFT over the last axis of ``(real, imag)``; returns ``(real, imag)``."""
    return _pair(torch.fft.fft(_complex(x, "fft"), dim=-1))


def fft2(x):
    """The 2-D FFT over the last two axes of ``(real, imag)``; returns ``(real, imag)``."""
    return _pair(torch.fft.fft2(_complex(x, "fft2"), dim=(-2, -1)))


def ifft2(x):
    """The inverse 2-D FFT over the last two axes of ``(real, imag)``; returns ``(real, imag)``."""
    return _pair(torch.fft.ifft2(_complex(x, "ifft2"), dim=(-2, -1)))


def rfft(x, fft_length=None):
    """The FFT of a real ``x`` over its last axis (``fft_length // 2 + 1`` terms); returns ``(real, imag)``."""
    return _pair(torch.fft.rfft(convert_to_tensor(x), n=fft_length, dim=-1, norm="backward"))


def irfft(x, fft_length=None):
    """The real inverse of ``rfft`` over the last axis of ``(real, imag)``."""
    return torch.fft.irfft(_complex(x, "irfft"), n=fft_length, dim=-1, norm="backward")


def _tensor(x) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))


def real(x):
    """The real part of a (complex) tensor."""
    return torch.real(_tensor(x))


def imag(x):
    """The imaginary part of a complex tensor."""
    return torch.imag(_tensor(x))


def conj(x):
    """The complex conjugate (a real tensor unchanged)."""
    return torch.conj(_tensor(x)).resolve_conj()


def _window(window, length, dtype):
    """Keras's ``window``: 'hann' or 'hamming' (periodic), a 1-D tensor of ``length``, or None (ones)."""
    if window is None:
        return torch.ones(length, dtype=dtype)
    if isinstance(window, str):
        if window not in ("hann", "hamming"):
            raise ValueError(f"stft: a string `window` must be 'hann' or 'hamming'; received {window!r}.")
        make = torch.hann_window if window == "hann" else torch.hamming_window
        return make(length, periodic=True, dtype=dtype)
    win = convert_to_tensor(window).to(dtype)
    if win.shape != (length,):
        raise ValueError(f"stft: `window` must have shape ({length},); received {tuple(win.shape)}.")
    return win


def stft(x, sequence_length, sequence_stride, fft_length, window="hann", center=True):
    """Short-time Fourier transform over the last axis: (real, imag), each (..., frames, fft_length // 2 + 1)."""
    x = convert_to_tensor(x)
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"stft: expected a float32 or float64 input; received {x.dtype}.")
    if fft_length < sequence_length:
        raise ValueError(f"stft: `fft_length` ({fft_length}) must be >= `sequence_length` ({sequence_length}).")
    *batch, samples = x.shape
    z = torch.stft(x.reshape(-1, samples), n_fft=fft_length, hop_length=sequence_stride, win_length=sequence_length,
                   window=_window(window, sequence_length, x.dtype), center=center, return_complex=True)
    return _pair(z.reshape(*batch, *z.shape[-2:]).transpose(-2, -1))


def istft(x, sequence_length, sequence_stride, fft_length, length=None, window="hann", center=True):
    """The inverse of ``stft`` (overlap-add); md.keras takes the case torch.istft covers: sequence_length ==
    fft_length, center=True and a window."""
    if sequence_length != fft_length or not center or window is None:
        raise NotImplementedError("istft: md.keras supports sequence_length == fft_length, center=True and a "
                                  f"window; received sequence_length={sequence_length}, fft_length={fft_length}, "
                                  f"center={center}, window={window!r}. Run with Keras 3 on multidev for the rest.")
    z = _complex(x, "istft")
    *batch, frames, bins = z.shape
    out = torch.istft(z.reshape(-1, frames, bins).transpose(-2, -1), n_fft=fft_length, hop_length=sequence_stride,
                      win_length=sequence_length, window=_window(window, sequence_length, z.real.dtype),
                      center=center, length=length)
    return out.reshape(*batch, out.shape[-1])
