"""``md.keras.preprocessing``: ``sequence.pad_sequences``, ``sequence.skipgrams``/``make_sampling_table`` (tf.keras's
word2vec helpers), ``text.Tokenizer``; ``image.load_img`` and tf.keras 2's aliases of ``md.keras.utils``'s dataset
builders (``tf.keras.preprocessing.image_dataset_from_directory``), imported when first read (``md.keras.utils``
imports this package)."""

import importlib

from multidev.keras._missing import missing_names
from multidev.keras.preprocessing import sequence, text

__all__ = ["sequence", "text"]

_missing = missing_names(__name__, 'preprocessing', globals())  # unknown names: does Keras 3 have them?
_ALIASES = {"image_dataset_from_directory": "multidev.keras.utils.image_dataset",
            "text_dataset_from_directory": "multidev.keras.utils.text_dataset",
            "timeseries_dataset_from_array": "multidev.keras.utils.timeseries_dataset"}


def __getattr__(name):
    if name == "image":
        return importlib.import_module("multidev.keras.preprocessing.image")
    if name in _ALIASES:
        return getattr(importlib.import_module(_ALIASES[name]), name)
    return _missing(name)
