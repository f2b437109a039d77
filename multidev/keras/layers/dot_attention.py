"""Keras 3's Attention (Luong, dot or concat scores) and AdditiveAttention (Bahdanau), with TF 2.21's
numbers: masked scores get ``-1e9`` added (not replaced), the query mask zeroes the output rows.

Example:
    att = md.keras.layers.Attention(use_scale=True)
    out, scores = att([query, value], return_attention_scores=True, use_causal_mask=True)
"""

from __future__ import annotations

import torch

from multidev.keras import batch_draw, initializers
from multidev.keras.layers.base import Layer


class Attention(Layer):
    """``softmax(scores(query, key)) @ value``; scores ``q . k`` ('dot', times ``scale`` if ``use_scale``)
    or ``concat_score_weight * sum(tanh(scale * (q + k)))`` ('concat')."""

    def __init__(self, use_scale=False, score_mode="dot", dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        if score_mode not in ("dot", "concat"):
            raise ValueError(f"Invalid value for argument score_mode. Expected one of {{'dot', 'concat'}}. "
                             f"Received: score_mode={score_mode!r}")
        self.use_scale, self.score_mode, self.dropout, self.seed = bool(use_scale), score_mode, float(dropout), seed

    def build(self, input_shape):
        if self.use_scale:
            self.add_weight("scale", (), "ones")
        if self.score_mode == "concat":
            self.add_weight("concat_score_weight", (), "ones")

    def _scores(self, query, key):
        if self.score_mode == "dot":
            scores = torch.matmul(query, key.transpose(-1, -2))
            return scores * self.scale if self.use_scale else scores
        summed = query.unsqueeze(-2) + key.unsqueeze(-3)
        if self.use_scale:
            summed = self.scale * summed
        return self.concat_score_weight * torch.tanh(summed).sum(-1)

    def call(self, inputs, mask=None, training=False, return_attention_scores=False, use_causal_mask=False):
        if not isinstance(inputs, (list, tuple)) or len(inputs) not in (2, 3):
            raise ValueError(f"{type(self).__name__} layer must be called on a list of inputs, namely "
                             "[query, value] or [query, value, key].")
        query, value = inputs[0], inputs[1]
        key = inputs[2] if len(inputs) > 2 else value
        q_mask, v_mask = (mask[0], mask[1]) if mask is not None else (None, None)
        scores = self._scores(query, key)
        allowed = None if v_mask is None else v_mask.bool().unsqueeze(-2)
        if use_causal_mask:
            t, s = scores.shape[-2], scores.shape[-1]
            causal = torch.ones(t, s, dtype=torch.bool, device=scores.device).tril()[None]
            allowed = causal if allowed is None else causal & allowed
        if allowed is not None:   # Keras subtracts 1e9 where not allowed (a fully masked row stays uniform-ish)
            scores = scores - 1.0e9 * (~allowed).to(scores.dtype)
        weights = torch.softmax(scores, dim=-1)
        attended = batch_draw.dropout(weights, self.dropout, training) if self.dropout > 0 else weights
        out = torch.matmul(attended, value)
        if q_mask is not None:
            out = out * q_mask.to(out.dtype).unsqueeze(-1)
        return (out, weights) if return_attention_scores else out

    def compute_mask(self, inputs, mask=None):
        return None if mask is None else mask[0]

    def get_config(self):
        return {**super().get_config(), "use_scale": self.use_scale, "score_mode": self.score_mode,
                "dropout": self.dropout}


class AdditiveAttention(Attention):
    """Bahdanau attention: scores ``sum(scale * tanh(q + k))``, ``scale`` one weight per feature."""

    def __init__(self, use_scale=True, dropout=0.0, **kwargs):
        super().__init__(use_scale=use_scale, dropout=dropout, **kwargs)

    def build(self, input_shape):
        if self.use_scale:
            self.add_weight("scale", (input_shape[0][-1],), initializers.get("glorot_uniform"))

    def _scores(self, query, key):
        summed = torch.tanh(query.unsqueeze(-2) + key.unsqueeze(-3))
        return (self.scale * summed).sum(-1) if self.use_scale else summed.sum(-1)

    def get_config(self):
        config = super().get_config()
        config.pop("score_mode")
        return config
