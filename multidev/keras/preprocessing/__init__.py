"""``md.keras.preprocessing``: ``sequence.pad_sequences``, ``sequence.skipgrams``/``make_sampling_table`` (tf.keras's
word2vec helpers) and ``text.Tokenizer``."""

from multidev.keras._missing import missing_names
from multidev.keras.preprocessing import sequence, text

__all__ = ["sequence", "text"]

__getattr__ = missing_names(__name__, 'preprocessing', globals())  # unknown names: does Keras 3 have them?
