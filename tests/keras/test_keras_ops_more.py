"""The ``md.keras.ops`` names added after the first 163 (math_more, arrays, activations_more, linalg) against
Keras 3's own ``keras.ops.X`` (torch backend) on the same inputs: values and dtypes, for float, int, bool
inputs and Python scalars."""

from __future__ import annotations

import pytest
import torch

from multidev.keras import ops
from tests.integrations._keras3_env import import_keras3
from tests.keras.test_keras_ops import _same

keras = import_keras3()

_g = torch.Generator().manual_seed(1)
X = torch.randn(3, 4, generator=_g)
Y = torch.randn(3, 4, generator=_g)
U = torch.rand(3, 4, generator=_g) * 1.8 - 0.9           # in (-0.9, 0.9): arctanh, erfinv
P = torch.rand(3, 4, generator=_g) + 1.1                 # > 1: arccosh
I = torch.randint(-6, 9, (3, 4), generator=_g, dtype=torch.int32)
J = torch.randint(1, 9, (3, 4), generator=_g, dtype=torch.int32)
L = torch.randint(-6, 9, (6,), generator=_g)            # int64
B = X > 0
C = Y > 0
V = torch.randn(5, generator=_g)
CUBE = torch.randn(2, 3, 4, generator=_g)
SPECIAL = torch.tensor([float("-inf"), -1.0, -0.0, 0.0, 2.0, float("inf"), float("nan")])
A = torch.randn(4, 4, generator=_g, dtype=torch.float64)
SPD = A @ A.T + 4 * torch.eye(4, dtype=torch.float64)
RHS = torch.randn(4, 2, generator=_g, dtype=torch.float64)

UNARY_FLOAT = "arccosh arcsinh arctanh cosh sinh cbrt deg2rad rad2deg exp2 fabs trunc sinc erfc erfinv signbit".split()
MATH = [(name, (U if name in ("arctanh", "erfinv") else P if name == "arccosh" else X,), {}) for name in UNARY_FLOAT]
MATH += [(name, (I,), {}) for name in "arcsinh cosh sinh cbrt deg2rad rad2deg exp2 fabs trunc sinc erfc signbit".split()]
MATH += [(name, (L,), {}) for name in "cbrt deg2rad rad2deg fabs trunc".split()]
MATH += [(name, (B,), {}) for name in "trunc fabs exp2".split()]
MATH += [
    ("cosh", (2.0,), {}), ("sinh", (1,), {}), ("trunc", (X * 3,), {}),
    ("fmod", (X * 3, Y), {}), ("fmod", (I, 4), {}), ("fmod", (I, J), {}), ("fmod", (X, 0.7), {}),
    ("hypot", (X, Y), {}), ("hypot", (I, J), {}), ("hypot", (X, 2.0), {}),
    ("logaddexp", (X, Y), {}), ("logaddexp", (I, J), {}), ("logaddexp", (X, 0.5), {}),
    ("logaddexp2", (X, Y), {}), ("logaddexp2", (I, 1), {}),
    ("logical_xor", (B, C), {}), ("logical_xor", (I, J), {}), ("logical_xor", (B, True), {}),
    ("heaviside", (X.round(), 0.5), {}), ("heaviside", (I, J), {}), ("heaviside", (SPECIAL, 0.5), {}),
    ("gcd", (I, J), {}), ("gcd", (L, 4), {}), ("lcm", (I, J), {}), ("lcm", (L, 3), {}),
    ("isneginf", (SPECIAL,), {}), ("isposinf", (SPECIAL,), {}), ("isneginf", (I,), {}),
    ("signbit", (SPECIAL,), {}),
    ("isclose", (X, X + 1e-7), {}), ("isclose", (X, Y), {"atol": 1.0}), ("isclose", (I, J), {}),
    ("isclose", (SPECIAL, SPECIAL), {"equal_nan": True}), ("isclose", (X, 0.1), {}),
    ("allclose", (X, X + 1e-7), {}), ("allclose", (X, Y), {}), ("allclose", (I, I), {}),
    ("divide_no_nan", (X, Y * B), {}), ("divide_no_nan", (I, J * C), {}), ("divide_no_nan", (X, 0.0), {}),
    ("bitwise_and", (I, J), {}), ("bitwise_or", (I, 6), {}), ("bitwise_xor", (L, L.flip(0)), {}),
    ("bitwise_and", (B, C), {}), ("bitwise_not", (I,), {}), ("bitwise_invert", (B,), {}),
    ("bitwise_left_shift", (J, 2), {}), ("bitwise_right_shift", (I, J % 3), {}),
    ("left_shift", (L, 3), {}), ("right_shift", (J, 1), {}),
]

ARRAYS = [
    ("ravel", (CUBE,), {}), ("fliplr", (X,), {}), ("flipud", (X,), {}), ("rot90", (X,), {}),
    ("rot90", (CUBE, 3, (1, 2)), {}), ("rot90", (X, -1), {}), ("hstack", ([X, Y],), {}), ("hstack", ([V, V],), {}),
    ("vstack", ([X, Y],), {}), ("vstack", ([V, V],), {}), ("dstack", ([X, Y],), {}), ("dstack", ([CUBE, CUBE],), {}),
    ("hsplit", (X, 2), {}), ("hsplit", (X, [1, 3]), {}), ("vsplit", (CUBE, [1]), {}), ("dsplit", (CUBE, 2), {}),
    ("array_split", (L, 4), {}), ("array_split", (X, 2), {"axis": 1}),
    ("diff", (X,), {}), ("diff", (L,), {"n": 2}), ("diff", (X,), {"axis": 0}), ("diff", (B,), {}),
    ("cumprod", (X,), {}), ("cumprod", (I, 1), {}), ("cumprod", (B, 0), {}),
    ("nonzero", (I,), {}), ("nonzero", (B,), {}), ("nonzero", (L,), {}),
    ("searchsorted", (torch.sort(V).values, X), {}), ("searchsorted", (torch.arange(6), L), {"side": "right"}),
    ("digitize", (X, torch.tensor([-1.0, 0.0, 1.0])), {}), ("digitize", (I, torch.tensor([0, 3])), {}),
    ("tri", (3,), {}), ("tri", (2, 4, 1), {}), ("tri", (3,), {"dtype": "int32", "k": -1}),
    ("trapezoid", (X,), {}), ("trapezoid", (X, torch.tensor([0.0, 1.0, 3.0, 4.0])), {}), ("trapezoid", (I,), {"dx": 0.5}),
    ("trapezoid", (X,), {"axis": 0}),
    ("vdot", (V, V), {}), ("vdot", (I[0], J[0]), {}), ("inner", (X, Y), {}), ("inner", (V, V), {}),
    ("inner", (I, J), {}), ("kron", (X[:2, :2], Y), {}), ("kron", (I[:2], J), {}),
    ("select", ([X < -0.5, X > 0.5], [X, -X]), {}), ("select", ([B, C], [I, J]), {"default": -1}),
    ("unique", (L,), {}), ("unique", (I,), {"return_counts": True}), ("unique", (L,), {"return_inverse": True}),
    ("empty", ((2, 3),), {}), ("empty", ((4,),), {"dtype": "int32"}), ("empty_like", (I,), {}),
]

XN = torch.where(torch.rand(3, 4, generator=_g) < 0.3, float("nan"), X)
XN[2] = float("nan")                                     # one all-NaN row
STATS = [
    ("median", (X,), {}), ("median", (X, 1), {}), ("median", (I, 0), {"keepdims": True}), ("median", (L,), {}),
    ("median", (CUBE, (0, 2)), {}), ("median", (CUBE, -1), {"keepdims": True}),
    ("quantile", (X, 0.3), {}), ("quantile", (CUBE, [0.1, 0.9], (0, 2)), {"keepdims": True}),
    ("quantile", (I, 0.5, 1), {"method": "lower"}), ("quantile", (X, torch.tensor([0.25, 0.75])), {"axis": 0}),
    ("quantile", (X, 0.5), {"method": "nearest"}), ("quantile", (X, 0.4, 1), {"method": "midpoint"}),
    ("percentile", (X, 90.0), {}), ("percentile", (I, [10, 50], 1), {}), ("ptp", (X,), {}), ("ptp", (I, 1), {}),
    ("ptp", (CUBE, (0, 2)), {"keepdims": True}), ("prod", (I,), {}), ("prod", (I, 1), {}), ("prod", (B, 0), {}),
    ("nansum", (XN,), {}), ("nansum", (XN, 1), {}), ("nansum", (B,), {}), ("nansum", (I, 0), {"keepdims": True}),
    ("nanprod", (XN, 1), {}), ("nanprod", (I, 0), {}), ("nanmean", (XN[:2],), {}), ("nanmean", (XN, 1), {}),
    ("nanmean", (I,), {}), ("nanvar", (XN[:2], 0), {}), ("nanstd", (XN[:2], 1), {"keepdims": True}),
    ("nanvar", (I, 1), {}), ("nanmax", (XN, 1), {}), ("nanmin", (XN, 1), {"keepdims": True}), ("nanmax", (I,), {}),
    ("nanargmax", (XN, 1), {}), ("nanargmin", (XN[:2],), {}), ("nanargmax", (I, 0), {}),
    ("nancumsum", (XN, 1), {}), ("nancumsum", (XN,), {}), ("nancumprod", (XN, 0), {}), ("nancumprod", (I, 1), {}),
    ("nanmedian", (XN[:2], 1), {}), ("nanquantile", (XN, 0.3, 1), {}), ("nanpercentile", (XN[:2], 75.0), {}),
]

C64 = torch.complex(X, Y)
MISC = [
    ("array", ([1, 2],), {}), ("array", ([1.5, 2],), {}), ("array", (X,), {"dtype": "float64"}),
    ("get_item", (X, 1), {}), ("get_item", (CUBE, (slice(None), 1)), {}),
    ("saturate_cast", (X * 300, "uint8"), {}), ("saturate_cast", (X * 1e5, "int16"), {}),
    ("saturate_cast", (L * 10**9, "int32"), {}),
    ("fmax", (XN, X), {}), ("fmin", (XN, 0.0), {}), ("fmax", (I, J), {}), ("fmin", (I, 2), {}),
    ("isin", (I, torch.tensor([1, 2, 3])), {}), ("isin", (I, J), {"invert": True}), ("isin", (L, [0, 4]), {}),
    ("ldexp", (X, J), {}), ("ldexp", (I, J), {}), ("nextafter", (X, Y), {}), ("nextafter", (X, 0.0), {}),
    ("i0", (X,), {}), ("i0", (I,), {}), ("i0", (L,), {}), ("isreal", (X,), {}), ("isreal", (C64,), {}),
    ("conjugate", (C64,), {}), ("conjugate", (X,), {}), ("angle", (C64,), {}), ("angle", (X,), {}),
    ("identity", (3,), {}), ("identity", (2,), {"dtype": "int32"}), ("diagflat", (V,), {}),
    ("diagflat", (X[:2, :2], 1), {}), ("append", (X, Y), {}), ("append", (X, Y), {"axis": 0}),
    ("append", (I, L), {}), ("vander", (V,), {}), ("vander", (I[0], 3), {"increasing": True}),
    ("unravel_index", (torch.tensor([0, 5, 11], dtype=torch.int32), (3, 4)), {}), ("corrcoef", (X,), {}), ("corrcoef", (I,), {}),
    ("cdist", (X, Y), {}), ("cdist", (CUBE, CUBE[:, :2]), {}),
    ("bincount", (L.abs(),), {}), ("bincount", (L.abs(),), {"minlength": 12}),
    ("bincount", (L.abs(),), {"weights": V.new_ones(6) * 0.5}), ("bincount", (J[:2],), {"minlength": 10}),
    ("bartlett", (5,), {}), ("blackman", (6,), {}), ("hamming", (7,), {}), ("hanning", (8,), {}),
    ("kaiser", (6, 5.0), {}), ("logspace", (0, 2, 5), {}), ("logspace", (1.0, 3.0, 4), {"endpoint": False, "base": 2}),
    ("geomspace", (1, 1000, 4), {}), ("geomspace", (-2.0, -32.0, 5), {"endpoint": False}),
]

Q = torch.randn(2, 5, 4, 8, generator=_g)
KV = torch.randn(2, 6, 4, 8, generator=_g)
KV2 = torch.randn(2, 6, 2, 8, generator=_g)
MASK = torch.rand(2, 1, 5, 6, generator=_g) > 0.3
NHWC = torch.randn(2, 4, 6, 8, generator=_g)
IMG = torch.rand(2, 5, 6, 3, generator=_g)
IDS = torch.tensor([0, 0, 2])
NN_MORE = [
    ("batch_normalization", (IMG, IMG.mean((0, 1, 2)), IMG.var((0, 1, 2)), -1), {}),
    ("batch_normalization", (X, X.mean(1), X.var(1), 0), {"offset": V[:3], "scale": P[:, 0], "epsilon": 0.1}),
    ("layer_normalization", (X,), {}), ("layer_normalization", (X, P[0], Y[0]), {}),
    ("layer_normalization", (CUBE, None, None, (1, 2)), {}), ("layer_normalization", (CUBE, P[0], None, -1), {"epsilon": 0.1}),
    ("layer_normalization", (X, P[0]), {"rms_scaling": True}),
    ("rms_normalization", (X,), {}), ("rms_normalization", (CUBE, P[0]), {}), ("rms_normalization", (CUBE, None, (1, 2)), {}),
    ("dot_product_attention", (Q, KV, KV), {}), ("dot_product_attention", (Q, KV, KV), {"mask": MASK}),
    ("dot_product_attention", (Q, KV[:, :5], KV[:, :5]), {"is_causal": True}),
    ("dot_product_attention", (Q, KV2, KV2), {"scale": 0.5}),
    ("dot_product_attention", (Q, KV, KV), {"bias": torch.randn(2, 4, 5, 6, generator=_g)}),
    ("segment_min", (X, IDS), {}), ("segment_min", (I, torch.tensor([1, 0, 1])), {}), ("segment_max", (I, IDS, 4), {}), ("segment_prod", (X, IDS), {}),
    ("segment_prod", (I, torch.tensor([1, 0, 1])), {}),
    ("psnr", (P, P + 0.1 * X, 2.0), {}), ("psnr", (IMG, IMG * 0.9, 1.0), {}),
    ("depth_to_space", (NHWC, 2), {}), ("depth_to_space", (NHWC, 2), {"data_format": "channels_first"}),
    ("space_to_depth", (NHWC, 2), {}), ("space_to_depth", (NHWC.permute(0, 3, 1, 2), 2), {"data_format": "channels_first"}),
]

SIGNAL = [
    ("extract_sequences", (V, 2, 1), {}), ("extract_sequences", (X, 2, 2), {}),
    ("correlate", (V, V[:3]), {}), ("correlate", (V, V[:2]), {"mode": "same"}), ("correlate", (V[:3], V), {"mode": "full"}),
    ("correlate", (I[0], J[0]), {"mode": "same"}),
    ("correlate", (V, V[:4]), {"mode": "same"}), ("histogram", (V,), {}), ("histogram", (V,), {"bins": 3, "range": (-1, 1)}),
    ("unfold", (NHWC, 2), {}), ("unfold", (NHWC, (2, 3)), {"stride": 2, "padding": 1}),
    ("fold", (torch.randn(2, 12, 6, generator=_g), (3, 4), 2), {}), ("polar", (P, X), {}),
    ("view_as_complex", (CUBE[..., :2],), {}), ("view_as_real", (C64,), {}), ("view", (X, "int32"), {}),
    ("view", (I, "float32"), {}), ("scatter_update", (X, torch.tensor([[0, 1], [2, 3]]), torch.tensor([5.0, 6.0])), {}),
    ("scatter_update", (CUBE, torch.tensor([[1, 0]]), torch.ones(1, 4)), {}),
    ("scatter_update", (X, torch.tensor([[0, 1], [0, 1]]), torch.tensor([5.0, 6.0])), {"reduction": "add"}),
    ("scatter_update", (X, torch.tensor([[0, 1], [2, 2]]), torch.tensor([5.0, -6.0])), {"reduction": "max"}),
    ("stft", (torch.randn(2, 40, generator=_g), 8, 4, 8), {}), ("stft", (torch.randn(3, 2, 33, generator=_g), 6, 3, 8),
                                                                  {"window": "hamming", "center": False}),
    ("stft", (torch.randn(30, generator=_g), 8, 2, 16), {"window": None}),
    ("istft", (tuple(torch.randn(2, 11, 5, generator=_g).unbind(0)), 8, 4, 8), {}),
    ("istft", (tuple(torch.randn(2, 3, 9, 9, generator=_g).unbind(0)), 16, 4, 16), {"length": 40, "window": "hamming"}),
    ("rearrange", (NHWC, "b h w c -> b c h w"), {}), ("rearrange", (NHWC, "b h w c -> (b h) (w c)"), {}),
    ("rearrange", (NHWC, "b h (w p) c -> b (h w) (p c)"), {"p": 2}),
    ("rearrange", (torch.randn(2, 12, 5, generator=_g), "b (h w) c -> b h w c"), {"h": 3}),
    ("rearrange", (torch.randn(2, 12, 5, generator=_g), "b (h w) c -> c (w b) h"), {"w": 6}),
]

SEQ = torch.randn(2, 9, 3, generator=_g)
VOL = torch.randn(1, 5, 6, 7, 2, generator=_g)
K1, K2 = torch.randn(3, 3, 4, generator=_g), torch.randn(3, 2, 8, 5, generator=_g)
CONV = [("conv", (SEQ, K1), {}), ("conv", (SEQ, K1), {"padding": "same", "strides": 2}),
        ("conv", (SEQ, K1), {"dilation_rate": 2}), ("conv", (NHWC, K2), {"padding": "same"}),
        ("conv", (NHWC, K2), {"strides": (2, 1)}), ("conv", (NHWC, torch.randn(3, 2, 4, 6, generator=_g)), {}),
        ("conv", (NHWC.permute(0, 3, 1, 2), K2), {"data_format": "channels_first", "padding": "same", "strides": 2}),
        ("conv", (VOL, torch.randn(2, 2, 2, 2, 3, generator=_g)), {"padding": "same", "strides": 2}),
        ("depthwise_conv", (NHWC, torch.randn(3, 3, 8, 2, generator=_g)), {}),
        ("depthwise_conv", (NHWC, torch.randn(2, 2, 8, 1, generator=_g)), {"padding": "same", "strides": 2}),
        ("depthwise_conv", (SEQ, torch.randn(4, 3, 2, generator=_g)), {"padding": "same"}),
        ("separable_conv", (NHWC, torch.randn(3, 3, 8, 2, generator=_g), torch.randn(1, 1, 16, 4, generator=_g)), {}),
        ("conv_transpose", (SEQ, torch.randn(3, 5, 3, generator=_g)), {}),
        ("conv_transpose", (SEQ, torch.randn(3, 5, 3, generator=_g)), {"strides": 2, "padding": "same"}),
        ("conv_transpose", (SEQ, torch.randn(4, 5, 3, generator=_g)), {"strides": 2, "padding": "same"}),
        ("conv_transpose", (SEQ, torch.randn(2, 5, 3, generator=_g)), {"strides": 3, "padding": "same"}),
        ("conv_transpose", (SEQ, torch.randn(3, 5, 3, generator=_g)), {"strides": 2, "output_padding": 1}),
        ("conv_transpose", (NHWC, torch.randn(3, 3, 4, 8, generator=_g)), {"strides": 2, "padding": "same"}),
        ("conv_transpose", (NHWC, torch.randn(3, 3, 4, 8, generator=_g)), {"strides": (2, 1), "padding": "same",
                                                                           "output_padding": (1, 0)}),
        ("max_pool", (SEQ, 2), {}), ("max_pool", (SEQ, 2), {"padding": "same"}), ("max_pool", (NHWC, 3, 2), {}),
        ("max_pool", (NHWC, (3, 2)), {"padding": "same", "strides": 2}), ("max_pool", (VOL, 2), {}),
        ("average_pool", (SEQ, 2), {}), ("average_pool", (SEQ, 2), {"padding": "same"}),
        ("average_pool", (NHWC, 2), {"strides": 2, "padding": "same"}), ("average_pool", (VOL, 2), {"padding": "same"}),
        ("average_pool", (NHWC.permute(0, 3, 1, 2), 2), {"data_format": "channels_first"}),
        ("adaptive_average_pool", (NHWC, (2, 3)), {}), ("adaptive_max_pool", (NHWC, 2), {}),
        ("adaptive_average_pool", (SEQ, 4), {}), ("adaptive_max_pool", (NHWC.permute(0, 3, 1, 2), (3, 2)),
                                                  {"data_format": "channels_first"})]

ACTIVATIONS = [(name, (X * 3,), {}) for name in (
    "log_sigmoid glu hard_tanh hard_shrink soft_shrink tanh_shrink celu squareplus sparse_plus sparse_sigmoid "
    "hard_silu hard_swish").split()]
ACTIVATIONS += [
    ("glu", (CUBE, 2), {}), ("hard_shrink", (X,), {"threshold": 1.0}),
    ("soft_shrink", (X,), {"threshold": 0.2}), ("celu", (X,), {"alpha": 0.5}), ("squareplus", (X,), {"b": 1}),
    ("threshold", (X, 0.1, -2.0), {}), ("threshold", (I, 1, 0), {}),
]

LINALG = [
    ("det", (A,), {}), ("inv", (A,), {}), ("solve", (A, RHS), {}), ("cholesky", (SPD,), {}),
    ("cholesky", (SPD,), {"upper": True}), ("slogdet", (A,), {}), ("logdet", (SPD,), {}),
    ("svd", (A[:, :3],), {"full_matrices": False}), ("svd", (A,), {"compute_uv": False}),
    ("qr", (A[:, :3],), {}), ("qr", (A,), {"mode": "complete"}), ("eigh", (SPD,), {}),
    ("lu_factor", (A,), {}), ("pinv", (A[:, :3],), {}), ("matrix_rank", (A,), {}),
    ("solve_triangular", (torch.tril(SPD), RHS), {"lower": True}), ("solve_triangular", (torch.triu(SPD), RHS[:, 0]), {}),
    ("lstsq", (A[:, :3], RHS), {}), ("cholesky_inverse", (torch.linalg.cholesky(SPD),), {}),
    ("det", (torch.stack([A, SPD]),), {}),
]

CASES = MATH + ARRAYS + STATS + MISC + NN_MORE + SIGNAL + CONV + ACTIVATIONS + LINALG
_ARBITRARY = {"empty", "empty_like"}   # values unset: compare shape and dtype only


def _check(ours, theirs, name, args):
    if name in _ARBITRARY:
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, name
        return
    if isinstance(theirs, torch.Tensor) and theirs.is_floating_point() and theirs.isnan().any():
        assert isinstance(ours, torch.Tensor) and ours.dtype == theirs.dtype, f"ops.{name}: {ours!r} vs {theirs!r}"
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6, equal_nan=True)
        return
    _same(ours, theirs, f"ops.{name}{args!r:.60}")


@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_equals_keras3(name, args, kwargs):
    ours = getattr(ops, name)(*args, **kwargs)
    theirs = getattr(keras.ops, name)(*args, **kwargs)
    _check(ours, theirs, name, args)
