"""``keras.ops.linalg`` on torch (``md.keras.ops.linalg``; the flat ``ops.X`` names too): factorisations,
inverses and solves of (batches of) matrices.

As Keras 3, the matrix ops want inputs of rank >= 2 (the last two axes square where the op needs it),
``lu_factor``'s pivots are 0-based, ``matrix_rank`` gives int32, ``svd`` gives (u, s, vh). Ints and bools
are promoted to floatx first (torch's factorisations take floats only).

Example:
    w = ops.linalg.solve(ops.matmul(x.T, x) + lam * ops.eye(d), ops.matmul(x.T, y))
"""

from __future__ import annotations

import torch

from multidev.keras.ops.numpy import _float, norm  # noqa: F401 - keras.ops.linalg has norm too


def _matrix(x, name, square=True):
    x = _float(x)
    if x.ndim < 2:
        raise ValueError(f"{name}: expected input of rank >= 2; received shape {tuple(x.shape)}.")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name}: the last two axes must be square; received shape {tuple(x.shape)}.")
    return x


def cholesky(x, upper=False):
    """The Cholesky factor of a symmetric positive-definite matrix (lower unless ``upper``)."""
    return torch.linalg.cholesky(_matrix(x, "cholesky"), upper=upper)


def cholesky_inverse(x, upper=False):
    """The inverse of A from its Cholesky factor ``x``."""
    return torch.cholesky_inverse(_matrix(x, "cholesky_inverse"), upper=upper)


def det(x):
    """The determinant."""
    return torch.linalg.det(_matrix(x, "det"))


def slogdet(x):
    """(sign, log|det|) of the determinant, without overflow."""
    return tuple(torch.linalg.slogdet(_matrix(x, "slogdet")))


def logdet(x):
    """log(det(x)) of a positive-definite matrix (NaN where det < 0)."""
    return torch.logdet(_matrix(x, "logdet"))


def eig(x):
    """(eigenvalues, eigenvectors) of a general square matrix (complex)."""
    return tuple(torch.linalg.eig(_matrix(x, "eig")))


def eigh(x):
    """(eigenvalues ascending, eigenvectors) of a symmetric matrix."""
    return tuple(torch.linalg.eigh(_matrix(x, "eigh")))


def inv(x):
    """The inverse."""
    return torch.linalg.inv(_matrix(x, "inv"))


def pinv(x, rcond=None):
    """The Moore-Penrose pseudo-inverse (singular values below ``rcond`` times the largest dropped)."""
    return torch.linalg.pinv(_matrix(x, "pinv", square=False), rtol=rcond)


def matrix_rank(x, tol=None):
    """The numerical rank (int32); ``tol`` is the absolute singular-value cut-off."""
    return torch.linalg.matrix_rank(_matrix(x, "matrix_rank", square=False), atol=tol).to(torch.int32)


def lu_factor(x):
    """(LU, pivots) of the LU factorisation, pivots 0-based as in scipy and Keras."""
    lu, pivots = torch.linalg.lu_factor(_matrix(x, "lu_factor"))
    return lu, pivots - 1


def qr(x, mode="reduced"):
    """(q, r) of the QR factorisation; ``mode`` 'reduced' or 'complete'."""
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: `mode` must be 'reduced' or 'complete'; received mode={mode!r}.")
    return tuple(torch.linalg.qr(_matrix(x, "qr", square=False), mode=mode))


def svd(x, full_matrices=True, compute_uv=True):
    """(u, s, vh) of the singular value decomposition, or the singular values alone."""
    x = _matrix(x, "svd", square=False)
    if not compute_uv:
        return torch.linalg.svdvals(x)
    return tuple(torch.linalg.svd(x, full_matrices=full_matrices))


def solve(a, b):
    """x with a @ x = b (``b`` a vector or a matrix of right-hand sides)."""
    return torch.linalg.solve(_matrix(a, "solve"), _float(b))


def solve_triangular(a, b, lower=False):
    """x with a @ x = b for a triangular ``a`` (upper unless ``lower``)."""
    a, b = _matrix(a, "solve_triangular"), _float(b)
    if b.ndim == a.ndim - 1:
        return torch.linalg.solve_triangular(a, b.unsqueeze(-1), upper=not lower).squeeze(-1)
    return torch.linalg.solve_triangular(a, b, upper=not lower)


def lstsq(a, b, rcond=None):
    """The least-squares solution x of a @ x = b (numpy's ``rcond`` cut-off through the SVD driver)."""
    a, b = _matrix(a, "lstsq", square=False), _float(b)
    vector = b.ndim == 1
    rhs = b.unsqueeze(-1) if vector else b
    if rcond is None:
        out = torch.linalg.lstsq(a, rhs).solution
    else:
        out = torch.linalg.pinv(a, rtol=rcond) @ rhs
    return out.squeeze(-1) if vector else out


def jvp(fun, primals, tangents, has_aux=False):
    """(fun(*primals), the Jacobian-vector product with ``tangents``) by forward-mode autodiff."""
    return torch.func.jvp(fun, tuple(primals), tuple(tangents), has_aux=has_aux)
