"""StringLookup / IntegerLookup against the outputs in Keras 3's own docstrings (issue 17 #13).

Each expected array below is the one printed in Keras's documentation for the same call; OOV
hash buckets use TensorFlow's Fingerprint64 (checked against TF's documented
``tf.strings.to_hash_bucket_fast`` output and independent FarmHash values).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras.layers._fingerprint import fingerprint64

L = md.keras.layers
VOCAB = ["a", "b", "c", "d"]
DATA = [["a", "c", "d"], ["d", "z", "b"]]
DATA4 = [["a", "c", "d", "d"], ["d", "z", "b", "z"]]
IVOCAB = [12, 36, 1138, 42]
IDATA = np.array([[12, 1138, 42], [42, 1000, 36]])
IDATA4 = np.array([[12, 1138, 42, 42], [42, 7, 36, 7]])


def _eq(got, expected):
    np.testing.assert_allclose(np.asarray(got, dtype="float64"), np.asarray(expected, dtype="float64"), rtol=1e-6)


def test_string_lookup_known_and_adapted_vocabulary():
    _eq(L.StringLookup(vocabulary=VOCAB)(DATA), [[1, 3, 4], [4, 0, 2]])
    layer = L.StringLookup()
    layer.adapt(DATA)
    assert layer.get_vocabulary() == ["[UNK]", "d", "z", "c", "b", "a"]    # count, then descending token
    _eq(layer(DATA), [[5, 3, 1], [1, 2, 4]])
    assert layer(DATA).dtype == torch.int64 and layer.vocabulary_size() == 6


def test_string_lookup_multiple_oov_indices_hash_like_tensorflow():
    layer = L.StringLookup(vocabulary=VOCAB, num_oov_indices=2)
    _eq(layer([["a", "c", "d"], ["m", "z", "b"]]), [[2, 4, 5], [0, 1, 3]])


def test_fingerprint64_matches_tensorflow_and_farmhash():
    assert [fingerprint64(s.encode()) % 3 for s in ["Hello", "TensorFlow", "2.x"]] == [0, 2, 2]   # TF docs
    reference = {"": 11160318154034397263, "a": 12917804110809363939, "hello": 13009744463427800296,
                 "seventeen bytes!!": 5799120529764292453, "x" * 33: 12270365409943098935,
                 "the quick brown fox jumps over the lazy dog": 12423751071000433619,
                 "y" * 64: 4471793200125962424, "z" * 65: 8299915583762718517, "w" * 200: 5137922210105849728}
    assert {s: fingerprint64(s.encode()) for s in reference} == reference


@pytest.mark.parametrize("mode,data,expected", [
    ("one_hot", ["a", "b", "c", "d", "z"], np.eye(5)[[1, 2, 3, 4, 0]]),
    ("multi_hot", DATA4, [[0, 1, 0, 1, 1], [1, 0, 1, 0, 1]]),
    ("count", DATA4, [[0, 1, 0, 1, 2], [2, 0, 1, 0, 1]]),
])
def test_string_lookup_encodings(mode, data, expected):
    out = L.StringLookup(vocabulary=VOCAB, output_mode=mode)(data)
    assert out.dtype == torch.float32
    _eq(out, expected)


def test_string_lookup_tf_idf():
    layer = L.StringLookup(output_mode="tf_idf")
    layer.set_vocabulary(VOCAB, idf_weights=[0.25, 0.75, 0.6, 0.4])       # OOV idf: the mean, 0.5
    _eq(layer(DATA4), [[0, 0.25, 0, 0.6, 0.8], [1.0, 0, 0.75, 0, 0.4]])
    layer.set_vocabulary(["[UNK]"] + VOCAB, idf_weights=[0.9, 0.25, 0.75, 0.6, 0.4])
    _eq(layer(DATA4), [[0, 0.25, 0, 0.6, 0.8], [1.8, 0, 0.75, 0, 0.4]])


def test_tf_idf_adapt_uses_keras_formula():
    layer = L.StringLookup(output_mode="tf_idf")
    layer.adapt(DATA4)                                  # 2 documents; 'd' in both, 'z' in one
    idf = {t: math.log(1 + 2 / (1 + n)) for t, n in {"d": 2, "z": 1, "c": 1, "b": 1, "a": 1}.items()}
    vocab = layer.get_vocabulary()
    assert vocab == ["[UNK]", "d", "z", "c", "b", "a"]
    out = layer([["d", "d", "z"]])
    assert out[0, 1].item() == pytest.approx(2 * idf["d"]) and out[0, 2].item() == pytest.approx(idf["z"])


def test_string_lookup_invert_and_round_trip():
    inverse = L.StringLookup(vocabulary=VOCAB, invert=True)
    out = inverse([[1, 3, 4], [4, 0, 2]])
    assert out.tolist() == [["a", "c", "d"], ["d", "[UNK]", "b"]]         # TF: the same, as bytes
    forward = L.StringLookup(vocabulary=VOCAB)
    assert inverse(forward(DATA)).tolist() == [["a", "c", "d"], ["d", "[UNK]", "b"]]


def test_mask_token_is_zero_in_int_mode_and_dropped_otherwise():
    layer = L.StringLookup(vocabulary=VOCAB, mask_token="")
    assert layer.get_vocabulary() == ["", "[UNK]", "a", "b", "c", "d"]
    _eq(layer([["a", "", "z"]]), [[2, 0, 1]])
    assert layer(np.array(["d"])).tolist() == [5]
    multi = L.StringLookup(vocabulary=VOCAB, mask_token="", output_mode="multi_hot")
    _eq(multi([["a", "", ""]]), [[0, 1, 0, 0, 0]])
    inverse = L.StringLookup(vocabulary=VOCAB, mask_token="", invert=True)
    assert inverse([[0, 1, 2]]).tolist() == [["", "[UNK]", "a"]]


def test_integer_lookup_docstring_examples():
    _eq(L.IntegerLookup(vocabulary=IVOCAB)(IDATA), [[1, 3, 4], [4, 0, 2]])
    layer = L.IntegerLookup()
    layer.adapt(IDATA)
    assert layer.get_vocabulary() == [-1, 42, 1138, 1000, 36, 12]
    _eq(layer(IDATA), [[5, 2, 1], [1, 3, 4]])
    _eq(L.IntegerLookup(vocabulary=IVOCAB, num_oov_indices=2)(np.array([[12, 1138, 42], [37, 1000, 36]])),
        [[2, 4, 5], [1, 0, 3]])
    _eq(L.IntegerLookup(vocabulary=IVOCAB, output_mode="one_hot")(np.array([12, 36, 1138, 42, 7])),
        np.eye(5)[[1, 2, 3, 4, 0]])
    _eq(L.IntegerLookup(vocabulary=IVOCAB, output_mode="multi_hot")(IDATA4), [[0, 1, 0, 1, 1], [1, 0, 1, 0, 1]])
    _eq(L.IntegerLookup(vocabulary=IVOCAB, output_mode="count")(IDATA4), [[0, 1, 0, 1, 2], [2, 0, 1, 0, 1]])
    _eq(L.IntegerLookup(output_mode="tf_idf", vocabulary=IVOCAB, idf_weights=[0.25, 0.75, 0.6, 0.4])(IDATA4),
        [[0, 0.25, 0, 0.6, 0.8], [1.0, 0, 0.75, 0, 0.4]])
    _eq(L.IntegerLookup(output_mode="tf_idf", vocabulary=[-1] + IVOCAB,
                        idf_weights=[0.9, 0.25, 0.75, 0.6, 0.4])(IDATA4),
        [[0, 0.25, 0, 0.6, 0.8], [1.8, 0, 0.75, 0, 0.4]])
    inverse = L.IntegerLookup(vocabulary=IVOCAB, invert=True)
    _eq(inverse(np.array([[1, 3, 4], [4, 0, 2]])), [[12, 1138, 42], [42, -1, 36]])
    forward = L.IntegerLookup(vocabulary=IVOCAB)
    _eq(L.IntegerLookup(vocabulary=forward.get_vocabulary(), invert=True)(forward(IDATA)),
        [[12, 1138, 42], [42, -1, 36]])
    _eq(forward(torch.tensor([12, 5])), [1, 0])


def test_adapt_max_tokens_dataset_and_pad_to_max_tokens():
    ds = md.data.Dataset.from_tensor_slices(np.array([1, 1, 1, 2, 2, 3, 4], dtype="int64")).batch(3)
    layer = L.IntegerLookup(max_tokens=3)
    layer.adapt(ds)
    assert layer.get_vocabulary() == [-1, 1, 2]                   # max_tokens counts the OOV index
    padded = L.StringLookup(vocabulary=VOCAB, max_tokens=8, pad_to_max_tokens=True, output_mode="multi_hot")
    assert tuple(padded(DATA).shape) == (2, 8)


def test_vocabulary_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("a\nb\nc\nd\n")
    _eq(L.StringLookup(vocabulary=str(path))(DATA), [[1, 3, 4], [4, 0, 2]])


def test_config_round_trip():
    layer = L.StringLookup(vocabulary=VOCAB, num_oov_indices=2, mask_token="", name="look")
    clone = L.StringLookup.from_config(layer.get_config())
    assert clone.get_vocabulary() == layer.get_vocabulary()
    _eq(clone([["a", "", "m"]]), layer([["a", "", "m"]]))


@pytest.mark.parametrize("kwargs,match", [
    ({"output_mode": "binary"}, "Invalid value for argument `output_mode`.*'binary'"),
    ({"invert": True, "output_mode": "one_hot"}, "must be 'int' when `invert`"),
    ({"max_tokens": 1}, "greater than 1"),
    ({"num_oov_indices": -1}, ">= 0"),
    ({"sparse": True}, "TensorFlow backend"),
    ({"pad_to_max_tokens": True}, "max_tokens` must be set"),
    ({"vocabulary": ["a", "b", "a"]}, "repeated term.*'a'"),
    ({"vocabulary": ["a", "[UNK]", "b"]}, "reserved OOV token at unexpected location"),
    ({"vocabulary": ["a", "b", "c"], "max_tokens": 3}, "larger than the maximum vocab size"),
    ({"vocabulary": ["a"], "output_mode": "tf_idf"}, "`idf_weights` must be set"),
])
def test_bad_arguments_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        L.StringLookup(**kwargs)


def test_oov_without_oov_indices_and_wrong_token_types():
    with pytest.raises(md.errors.InvalidArgumentError, match="'z' is not in the vocabulary"):
        L.StringLookup(vocabulary=VOCAB, num_oov_indices=0)(["a", "z"])
    with pytest.raises(TypeError, match="torch has no strings"):
        L.StringLookup(vocabulary=VOCAB)(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="Use StringLookup"):
        L.IntegerLookup(vocabulary=IVOCAB)(np.array(["a"]))
