"""TextVectorization: strings -> padded integer id tensors, vocabulary learnt with ``adapt``.

Index 0 is padding and 1 is the OOV token '[UNK]'; the rest is ordered by frequency.

Example:
    vec = md.keras.layers.TextVectorization(max_tokens=20000, output_sequence_length=300)
    vec.adapt(train_texts)
    ids = vec(["some news text"])         # int64 tensor (1, 300)
"""

from __future__ import annotations

import numpy as np
import torch

from multidev.keras.layers.base import Layer
from multidev.keras.layers.host_inputs import HostInputs
from multidev.keras.layers.lookup import StringLookup
from multidev.keras.preprocessing.text import text_to_word_sequence

_STANDARDIZE = ("lower_and_strip_punctuation", "lower", "strip_punctuation", None)


class TextVectorization(HostInputs, Layer):
    """Standardize, split on whitespace, add ``ngrams``, and map tokens through a ``StringLookup``.

    ``output_mode`` 'int' (padded ids, '' -> 0 and '[UNK]' -> 1), or 'multi_hot', 'count', 'tf_idf'
    (one vector of vocabulary size per text, '[UNK]' at 0), as Keras 3.
    """

    def __init__(self, max_tokens=None, standardize="lower_and_strip_punctuation", split="whitespace", ngrams=None,
                 output_mode="int", output_sequence_length=None, pad_to_max_tokens=False, vocabulary=None,
                 idf_weights=None, ragged=False, **kwargs):
        super().__init__(**kwargs)
        if ragged:   # torch has no ragged tensors, and slicing padded ids is not slicing ragged rows
            raise ValueError(
                "TextVectorization(ragged=True) is not supported: multidev has no ragged tensors. Use ragged=False "
                "(ids padded with 0 to the batch's longest text, what ragged .to_tensor() gives), and slice per "
                "text before padding where it matters: a ragged target[:, :-1] drops each text's last token, a "
                "padded one drops the last column (often a 0).")
        if standardize not in _STANDARDIZE and not callable(standardize):
            raise ValueError(f"Invalid standardize {standardize!r}. Valid values: {list(_STANDARDIZE)} or a callable.")
        if split != "whitespace" and not callable(split):
            raise ValueError(f"Invalid split {split!r}. Valid values: 'whitespace' or a callable.")
        if output_mode not in _OUTPUT_MODES:
            raise ValueError(f"Invalid value for argument `output_mode` of TextVectorization: {output_mode!r}. "
                             f"Expected one of {list(_OUTPUT_MODES)}.")
        if not (ngrams is None or isinstance(ngrams, int) or isinstance(ngrams, tuple)
                and all(isinstance(n, int) for n in ngrams)):
            raise ValueError(f"`ngrams` must be None, an integer, or a tuple of integers. Received: ngrams={ngrams!r}")
        if output_mode != "int" and output_sequence_length is not None:
            raise ValueError(f"`output_sequence_length` must not be set if `output_mode` is not 'int'. Received "
                             f"output_sequence_length={output_sequence_length!r}.")
        self.max_tokens, self.standardize, self.split = max_tokens, standardize, split
        self.output_mode, self.output_sequence_length = output_mode, output_sequence_length
        self.ngrams = ngrams
        self._widths = tuple(range(1, ngrams + 1)) if isinstance(ngrams, int) else ngrams
        self._lookup = StringLookup(max_tokens=max_tokens, mask_token="", output_mode=output_mode,
                                    pad_to_max_tokens=pad_to_max_tokens, name=f"{self.name}_lookup")
        if vocabulary is not None:
            self.set_vocabulary(vocabulary, idf_weights)
        self.built = True

    def _tokens(self, text) -> list[str]:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="ignore")
        text = text if isinstance(text, str) else str(text)
        if callable(self.standardize):
            text = self.standardize(text)
        else:
            lower = self.standardize in ("lower_and_strip_punctuation", "lower")
            strip = self.standardize in ("lower_and_strip_punctuation", "strip_punctuation")
            text = " ".join(text_to_word_sequence(text, lower=lower, filters=_PUNCT if strip else "\t\n"))
        words = self.split(text) if callable(self.split) else text.split()
        if not self._widths:
            return list(words)
        return [" ".join(words[i:i + n]) for n in self._widths for i in range(len(words) - n + 1)]   # tf.strings.ngrams

    def _documents(self, inputs) -> np.ndarray:
        """Each text's tokens, padded with the mask token '' into a rectangular object array."""
        texts = [inputs] if isinstance(inputs, (str, bytes)) else list(np.asarray(inputs, dtype=object).reshape(-1))
        rows = [self._tokens(t) for t in texts]
        width = max((len(r) for r in rows), default=0)
        out = np.full((len(rows), max(width, 1)), "", dtype=object)
        for i, row in enumerate(rows):
            out[i, :len(row)] = row
        return out

    def adapt(self, data, batch_size=None, steps=None):
        """Learn the vocabulary (and document frequencies for 'tf_idf') from texts or batches of texts."""
        batches = [data] if isinstance(data, (list, tuple, np.ndarray, str, bytes)) else data
        docs = []
        for i, batch in enumerate(batches):   # a repeated Dataset ends at `steps`
            if steps is not None and i >= steps:
                break
            docs.append(self._documents(batch))
        width = max((d.shape[1] for d in docs), default=1)
        padded = [np.pad(d, ((0, 0), (0, width - d.shape[1])), constant_values="") for d in docs]
        self._lookup.adapt(np.concatenate(padded) if padded else np.full((0, 1), "", dtype=object))

    def set_vocabulary(self, vocabulary, idf_weights=None):
        """Use ``vocabulary`` (most frequent first; '' and '[UNK]' are dropped if present)."""
        words = [w for w in vocabulary if w not in ("", "[UNK]")]
        self._lookup.set_vocabulary(words, idf_weights=idf_weights)

    def get_vocabulary(self, include_special_tokens=True) -> list[str]:
        """The vocabulary in index order ('' and '[UNK]' first in 'int' mode, '[UNK]' otherwise)."""
        return [str(w) for w in self._lookup.get_vocabulary(include_special_tokens)]

    def vocabulary_size(self) -> int:
        return self._lookup.vocabulary_size()

    def call(self, inputs):
        if not self._lookup.get_vocabulary(include_special_tokens=False):
            raise ValueError(f'TextVectorization "{self.name}" has no vocabulary: call adapt(texts) or pass vocabulary=.')
        docs = self._documents(inputs)
        if self.output_mode != "int":
            return self._lookup(docs)
        length = self.output_sequence_length or max((int((d != "").sum()) for d in docs), default=0)
        docs = docs[:, :length] if docs.shape[1] >= length else np.pad(
            docs, ((0, 0), (0, length - docs.shape[1])), constant_values="")
        return self._lookup(docs)

    def get_config(self):
        return {**super().get_config(), "max_tokens": self.max_tokens, "output_mode": self.output_mode,
                "output_sequence_length": self.output_sequence_length, "ngrams": self.ngrams,
                "pad_to_max_tokens": self._lookup.pad_to_max_tokens,
                "standardize": self.standardize if isinstance(self.standardize, str) else None,
                "vocabulary": self.get_vocabulary(include_special_tokens=False)}


_OUTPUT_MODES = ("int", "multi_hot", "count", "tf_idf")
_PUNCT = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'
