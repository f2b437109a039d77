"""What a program gets from calling a Keras loss function itself (``tf.keras.losses.mae(reconstructions, data)``,
the autoencoder tutorial's anomaly threshold): an ``EagerTensor``, gradient or not, so numpy's functions read it
as they read TensorFlow's tensors (``np.mean(train_loss) + np.std(train_loss)``: on a plain torch tensor numpy
calls ``Tensor.mean(axis=...)``, a TypeError), and TensorFlow's InvalidArgumentError for shapes that do not
broadcast (torch raises RuntimeError). ``compile('mae')`` keeps the plain function (``losses._FUNCTIONS``)."""

from __future__ import annotations

import functools

import torch

from multidev._core import errors
from multidev._core.eager_tensor import eager


def program_result(fn):
    """``fn`` (a loss function of ``y_true, y_pred``) whose result a program reads with numpy."""

    @functools.wraps(fn)
    def loss(y_true, y_pred, *args, **kwargs):
        try:
            out = fn(y_true, y_pred, *args, **kwargs)
        except RuntimeError as exc:
            if "must match the size" not in str(exc):
                raise
            shapes = [list(getattr(v, "shape", ())) for v in (y_true, y_pred)]
            raise errors.InvalidArgumentError(
                f"Incompatible shapes: {shapes[0]} vs. {shapes[1]}: {fn.__name__} compares y_true and y_pred "
                "element by element; give them the same shape (or shapes that broadcast).") from None
        return eager(out) if type(out) is torch.Tensor else out
    return loss
