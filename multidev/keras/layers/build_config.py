"""Keras 3's ``get_build_config``/``build_from_config`` for md.keras layers (a part of ``Layer``).

``load_model`` builds a layer whose class overrides either before its weights are read (keras.io's customizing
saving guide: a ``build`` with an extra argument, built by hand before the model); md.keras rebuilds the other
layers by replaying their calls (``saving/serialization.py``).
"""

from __future__ import annotations


class BuildConfig:
    """The two methods, on ``Layer`` (which provides ``built``, ``_build_input_shape`` and ``_build_once``)."""

    def get_build_config(self):
        """Keras 3's: what ``build_from_config`` needs to build the layer again (the input shape it was built with)."""
        if not self.built or self._build_input_shape is None:
            return None
        return {"input_shape": _listed(self._build_input_shape)}

    def build_from_config(self, config):
        """Build from ``get_build_config()``: ``load_model`` calls it before reading the weights of a layer that
        overrides either (keras.io: a ``build`` with an extra argument, built by hand before the model)."""
        if config and config.get("input_shape") is not None:
            self._build_once(_tupled(config["input_shape"]))


def _listed(shape):
    """A shape (or nested shapes) as JSON lists."""
    return [_listed(s) for s in shape] if isinstance(shape, (list, tuple)) else shape


def _tupled(shape):
    """A shape read back from JSON: a flat list is one shape (a tuple), a list of lists several."""
    if isinstance(shape, list) and any(isinstance(s, (list, tuple)) for s in shape):
        return [_tupled(s) for s in shape]
    return tuple(shape) if isinstance(shape, (list, tuple)) else shape
