"""``keras.ops``' functional control flow on torch, run eagerly: ``switch``, ``map``, ``scan``,
``associative_scan``, ``vectorized_map``, ``vectorize`` and ``custom_gradient``.

``scan`` follows ``jax.lax.scan`` as Keras 3 does: ``f(carry, x) -> (carry, y)``, returning the last carry
and the ``y``s stacked on a new leading axis; structures (tuples, lists, dicts) are scanned leaf by leaf.
Everything runs as plain Python loops over torch ops, so autograd sees every step.

Example:
    last, running = ops.scan(lambda c, x: (c + x, c + x), ops.zeros(()), xs)
"""

from __future__ import annotations

import builtins
import inspect

import torch
from torch.utils import _pytree as pytree

from multidev.keras.ops.core import convert_to_tensor

_t = convert_to_tensor


def _stack(ys: list):
    """A list of equal structures as one structure of stacked leaves."""
    leaves, spec = pytree.tree_flatten(ys[0])
    columns = [pytree.tree_flatten(y)[0] for y in ys]
    return pytree.tree_unflatten([torch.stack([_t(c[i]) for c in columns]) for i in range(len(leaves))], spec)


def switch(index, branches, *operands):
    """``branches[index](*operands)``, ``index`` clipped to the valid range (as Keras and ``lax.switch``)."""
    chosen = builtins.min(builtins.max(int(_t(index)), 0), len(branches) - 1)
    return branches[chosen](*operands)


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """``jax.lax.scan``: carry ``init`` through ``f(carry, x)`` over ``xs``' leading axis; (carry, stacked ys)."""
    if not callable(f):
        raise TypeError(f"scan: `f` must be callable; received f={f!r}.")
    if xs is None and length is None:
        raise ValueError("scan: give `xs` to scan over, or `length` (received neither).")
    leaves, spec = pytree.tree_flatten(xs) if xs is not None else ([], None)
    leaves = [_t(leaf) for leaf in leaves]
    steps = length if not leaves else leaves[0].shape[0]
    if length is not None and leaves and length != steps:
        raise ValueError(f"scan: `length`={length} differs from the leading axis of `xs` ({steps}).")
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    carry, ys = pytree.tree_map(_t, init), []   # Python numbers carried as tensors, as Keras
    for i in order:
        x = pytree.tree_unflatten([leaf[i] for leaf in leaves], spec) if leaves else None
        carry, y = f(carry, x)
        ys.append(y)
    if reverse:
        ys.reverse()
    if not ys or builtins.all(y is None for y in ys):
        return carry, None
    return carry, _stack(ys)


def map(f, xs):  # noqa: A001 - Keras's name
    """``f`` applied to each slice of ``xs`` along its leading axis, the results stacked."""
    return scan(lambda _, x: ((), f(x)), (), xs)[1]


def vectorized_map(function, elements):
    """``function`` mapped over the leading axis of ``elements`` (torch.vmap, as Keras 3 on torch). Where vmap
    cannot batch it (a per-sample index: keras.io Forward-Forward's ``slice_update(zeros, [y_sample], ...)``), the
    slices run one by one, as TensorFlow's ``vectorized_map`` falls back to a loop; numpy inputs are converted."""
    leaves, spec = pytree.tree_flatten(elements)
    elements = pytree.tree_unflatten([_t(leaf) for leaf in leaves], spec)
    try:
        return torch.vmap(function)(elements)
    except RuntimeError as exc:
        if "vmap" not in str(exc):
            raise
    return map(function, elements)


def associative_scan(f, elems, reverse=False, axis=0):
    """Inclusive prefix scan of ``elems`` along ``axis`` with the associative ``f`` (sequential, eager)."""
    if not callable(f):
        raise TypeError(f"associative_scan: `f` must be callable; received f={f!r}.")
    leaves, spec = pytree.tree_flatten(elems)
    leaves = [_t(leaf).movedim(axis, 0) for leaf in leaves]
    if reverse:
        leaves = [leaf.flip(0) for leaf in leaves]
    acc = pytree.tree_unflatten([leaf[0] for leaf in leaves], spec)
    outs = [acc]
    for i in range(1, leaves[0].shape[0]):
        acc = f(acc, pytree.tree_unflatten([leaf[i] for leaf in leaves], spec))
        outs.append(acc)
    stacked = pytree.tree_flatten(_stack(outs))[0]
    if reverse:
        stacked = [s.flip(0) for s in stacked]
    return pytree.tree_unflatten([s.movedim(0, axis) for s in stacked], spec)


def vectorize(pyfunc, *, excluded=None, signature=None):
    """numpy's ``vectorize`` over tensors: ``pyfunc`` applied element by element to the broadcast arguments
    (torch.vmap, so autograd sees it); ``excluded`` positions/names are passed through whole."""
    if signature is not None:
        raise NotImplementedError(f"vectorize: md.keras has no `signature` (received {signature!r}); run with "
                                  "Keras 3 on multidev, or use ops.vectorized_map over the core dimensions.")
    excluded = set(excluded or ())

    def wrapped(*args, **kwargs):
        mapped = [i for i in range(len(args)) if i not in excluded]
        tensors = torch.broadcast_tensors(*[_t(args[i]) for i in mapped])
        shape = tensors[0].shape if tensors else ()

        def one(*flat):
            call = list(args)
            for i, value in zip(mapped, flat):
                call[i] = value
            return pyfunc(*call, **kwargs)
        out = torch.vmap(one)(*[t.reshape(-1) for t in tensors])
        return out.reshape(shape)
    return wrapped


def custom_gradient(f):
    """A decorator: ``f(*args)`` returns ``(y, grad_fn)``; backward calls ``grad_fn(upstream)`` or, when
    ``grad_fn`` takes an ``upstream`` keyword (Keras's torch form ``grad(*args, upstream)``),
    ``grad_fn(upstream=...)``; its results are the gradients of ``args``."""
    def wrapped(*args):
        return _CustomGradient.apply(f, *args)
    return wrapped


class _CustomGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, f, *args):
        y, grad_fn = f(*args)
        ctx.grad_fn, ctx.count = grad_fn, len(args)
        return y

    @staticmethod
    def backward(ctx, *upstreams):
        upstream = upstreams[0] if len(upstreams) == 1 else upstreams
        if "upstream" in inspect.signature(ctx.grad_fn).parameters:
            grads = ctx.grad_fn(upstream=upstream)
        else:
            grads = ctx.grad_fn(upstream)
        grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
        if len(grads) != ctx.count:
            raise ValueError(f"custom_gradient: grad_fn returned {len(grads)} gradient(s) for {ctx.count} "
                             "argument(s); return one per argument (None for non-tensors).")
        return (None, *grads)
