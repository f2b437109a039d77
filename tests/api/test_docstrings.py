"""Every public name added for TensorFlow's tutorials documents itself with a short example."""

from __future__ import annotations

import pytest

import multidev as md

NAMES = [getattr(md.train, n) for n in md.train.__all__ if n != "ClusterSpec"] + [
    md.summary.create_file_writer, md.summary.create_noop_writer, md.summary.scalar, md.summary.histogram,
    md.summary.text, md.summary.flush, md.summary.SummaryWriter, md.random.set_seed,
    md.keras.utils.set_random_seed, md.constant, md.reduce_sum, md.reduce_mean, md.add_n,
    md.distribute.TPUStrategy, md.distribute.cluster_resolver.TPUClusterResolver,
    md.distribute.experimental_set_strategy,
    *(getattr(md.config.threading, n) for n in md.config.threading.__all__),
    md.saved_model.save, md.saved_model.load, md.Module,
    md.keras.regularizers.L1, md.keras.regularizers.L2, md.keras.regularizers.L1L2, md.keras.regularizers.get,
    md.keras.layers.MultiHeadAttention, md.keras.layers.Masking, md.keras.layers.Normalization,
    md.keras.layers.Rescaling, md.keras.layers.RandomFlip, md.keras.layers.RandomRotation,
    *(getattr(md.keras.datasets, n).load_data for n in ("mnist", "fashion_mnist", "cifar10", "cifar100", "imdb"))]


@pytest.mark.parametrize("obj", NAMES, ids=lambda o: getattr(o, "__qualname__", repr(o)))
def test_public_names_have_a_docstring_with_an_example(obj):
    doc = obj.__doc__ or ""
    assert doc.strip(), f"{obj!r} has no docstring"
    assert "Example" in doc or ">>>" in doc, f"{obj!r}'s docstring has no example"
