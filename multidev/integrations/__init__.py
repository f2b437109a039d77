"""Adapters for other front ends (one module per front end); installed when multidev is imported."""

from multidev.integrations import keras3

keras3.install()

__all__ = ["keras3"]
