"""MultiHeadAttention: Keras's multi-head (scaled dot-product) attention over channels-last sequences.

Weights follow Keras's layout and order (query, key, value, output projections, each a kernel and a
bias): query kernel ``(query_dim, num_heads, key_dim)``, output kernel ``(num_heads, value_dim,
output_dim)``. Masks: an explicit ``attention_mask`` (B, T, S) (True = attend), the Keras masks the
query and value carry (e.g. from ``Embedding(mask_zero=True)``) and ``use_causal_mask`` are combined;
the output carries the query's mask.

Example:
    mha = md.keras.layers.MultiHeadAttention(num_heads=2, key_dim=8)
    out = mha(query, value)                           # (B, T, query_dim)
    out, scores = mha(query, value, return_attention_scores=True)   # scores (B, heads, T, S)
"""

from __future__ import annotations

import math

import torch

from multidev.keras import batch_draw, initializers, regularizers
from multidev.keras.layers import layer_losses
from multidev.keras.layers.base import Layer


class MultiHeadAttention(Layer):
    """``softmax(Q K^T / sqrt(key_dim)) V`` in ``num_heads`` heads, then an output projection.

    Example:
        >>> mha = md.keras.layers.MultiHeadAttention(num_heads=2, key_dim=8)
        >>> mha(torch.ones(4, 10, 16), torch.ones(4, 6, 16)).shape
        torch.Size([4, 10, 16])
    """

    supports_masking = True

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None,
                 attention_axes=None, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        for arg, value in (("num_heads", num_heads), ("key_dim", key_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{arg}` must be a positive integer. Received: {arg}={value!r}")
        if attention_axes not in (None, 1, (1,), [1]):
            raise ValueError(f"Only attention over the sequence axis is supported (attention_axes=None or 1). "
                             f"Received: attention_axes={attention_axes!r}")
        self.num_heads, self.key_dim = num_heads, key_dim
        self.value_dim = key_dim if value_dim is None else int(value_dim)
        self.dropout, self.use_bias = float(dropout), bool(use_bias)
        self._output_dim = output_shape
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)

    def __call__(self, query, value=None, key=None, **kwargs):
        # One packed input, so a functional model records query, value and key as the node's inputs.
        if value is None and isinstance(query, (list, tuple)):
            packed = list(query)
        elif value is None:
            raise TypeError(f'Layer "{self.name}" needs `query` and `value` (e.g. mha(x, x) for self-attention).')
        else:
            packed = [query, value] + ([key] if key is not None else [])
        return super().__call__(packed, **kwargs)

    def _projection(self, name, in_dim, heads_dim):
        self.add_weight(f"{name}_kernel", (in_dim, self.num_heads, heads_dim), self.kernel_initializer,
                        regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.add_weight(f"{name}_bias", (self.num_heads, heads_dim), self.bias_initializer,
                            regularizer=self.bias_regularizer)

    def build(self, input_shape):
        query_shape, value_shape = input_shape[0], input_shape[1]
        key_shape = input_shape[2] if len(input_shape) > 2 else value_shape
        out_dim = self._output_dim if self._output_dim is not None else query_shape[-1]
        out_dim = out_dim[-1] if isinstance(out_dim, (list, tuple)) else int(out_dim)
        self._projection("query", query_shape[-1], self.key_dim)
        self._projection("key", key_shape[-1], self.key_dim)
        self._projection("value", value_shape[-1], self.value_dim)
        self.add_weight("output_kernel", (self.num_heads, self.value_dim, out_dim), self.kernel_initializer,
                        regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.add_weight("output_bias", (out_dim,), self.bias_initializer, regularizer=self.bias_regularizer)

    def _project(self, x, name):
        out = torch.einsum("btd,dnh->btnh", x, getattr(self, f"{name}_kernel"))
        return out + getattr(self, f"{name}_bias") if self.use_bias else out

    def _mask(self, query, value, key, attention_mask, use_causal_mask):
        """(B, T, S) boolean mask of allowed query/key pairs, or None."""
        q_mask, v_mask = layer_losses.mask_of(query), layer_losses.mask_of(value)
        k_mask = layer_losses.mask_of(key) if key is not value else v_mask
        mask = None if attention_mask is None else attention_mask.to(torch.bool)
        for m in (q_mask[:, :, None] if q_mask is not None else None,
                  v_mask[:, None, :] if v_mask is not None else None,
                  k_mask[:, None, :] if k_mask is not None and k_mask is not v_mask else None):
            if m is not None:
                mask = m if mask is None else mask & m
        if use_causal_mask:
            t, s = query.shape[1], value.shape[1]
            causal = torch.ones(t, s, dtype=torch.bool, device=query.device).tril()[None]
            mask = causal if mask is None else mask & causal
        return mask

    def call(self, inputs, attention_mask=None, return_attention_scores=False, training=False,
             use_causal_mask=False):
        query, value = inputs[0], inputs[1]
        key = inputs[2] if len(inputs) > 2 else value
        q = self._project(query, "query") * (1.0 / math.sqrt(self.key_dim))
        k, v = self._project(key, "key"), self._project(value, "value")
        scores = torch.einsum("btnh,bsnh->bnts", q, k)
        mask = self._mask(query, value, key, attention_mask, use_causal_mask)
        if mask is not None:   # Keras 3's masked softmax: -1e9 where not allowed, then those weights zeroed
            scores = scores.masked_fill(~mask[:, None], -3e4 if scores.dtype == torch.float16 else -1e9)
        probs = torch.softmax(scores, dim=-1)
        if mask is not None:   # a query allowed nothing attends to nothing (TF's output: the output bias)
            probs = probs.masked_fill(~mask[:, None], 0.0)
        attended = batch_draw.dropout(probs, self.dropout, training) if self.dropout else probs   # one device's mask
        out = torch.einsum("bnts,bsnh->btnh", attended, v)
        out = torch.einsum("btnh,nhd->btd", out, self.output_kernel)
        if self.use_bias:
            out = out + self.output_bias
        return (out, probs) if return_attention_scores else out

    def compute_mask(self, inputs, mask=None):
        return layer_losses.mask_of(inputs[0])

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "key_dim": self.key_dim,
                "value_dim": self.value_dim, "dropout": self.dropout, "use_bias": self.use_bias,
                "output_shape": self._output_dim,
                "kernel_initializer": initializers.serialize(self.kernel_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer),
                "kernel_regularizer": regularizers.serialize(self.kernel_regularizer),
                "bias_regularizer": regularizers.serialize(self.bias_regularizer)}
