"""``md.io``: the part of ``tf.io`` the multi-worker tutorials call (``tf.io.gfile``)."""

from multidev.io import gfile

__all__ = ["gfile"]


def __getattr__(name: str):
    """``multidev.io.X`` that multidev lacks: an AttributeError saying what to use instead."""
    from multidev._core.missing import missing_attribute

    raise missing_attribute("multidev.io", name, f"tf.io.{name}")
