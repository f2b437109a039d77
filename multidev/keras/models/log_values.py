"""What ``fit``/``evaluate``/``predict`` hand back: metric results as Python floats (or numpy arrays),
outputs as numpy, as Keras 3 returns them."""

from __future__ import annotations

import numpy as np
import torch


def _to_numpy(t):
    t = t.detach()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    return t.cpu().numpy()


def _floats(logs) -> dict:
    """Logs as floats; a metric whose result is a dict (``compile_metrics``) gives its entries, as Keras 3."""
    out = {}
    for k, v in (logs or {}).items():
        if isinstance(v, dict):
            out.update(_floats(v))
        else:
            out[k] = _number(v)
    return out


def _number(value):
    """A float, or (a metric with several thresholds, as ``Recall(thresholds=[...])``) a numpy array."""
    array = np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value)
    return float(array) if array.size == 1 else array
