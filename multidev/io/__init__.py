"""``md.io``: the part of ``tf.io`` the multi-worker tutorials call (``tf.io.gfile``)."""

from multidev.io import gfile

__all__ = ["gfile"]
