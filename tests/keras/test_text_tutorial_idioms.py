"""Idioms of tensorflow.org's keras/text_classification tutorial that multidev refused, as TF 2.21 runs them.

``custom_standardization`` calls ``tf.strings.lower`` / ``tf.strings.regex_replace``; ``vectorize_text``
calls ``tf.expand_dims`` on a batch of reviews; ``export_model = tf.keras.Sequential([vectorize_layer,
model, layers.Activation('sigmoid')])`` predicts on ``tf.constant([...three reviews...])``.
"""

import re
import string

import numpy as np
import pytest

import multidev as md

layers = md.keras.layers


def custom_standardization(input_data):
    lowercase = md.strings.lower(input_data)
    stripped_html = md.strings.regex_replace(lowercase, '<br />', ' ')
    return md.strings.regex_replace(stripped_html, '[%s]' % re.escape(string.punctuation), '')


def test_custom_standardization_on_a_str_bytes_and_a_batch():
    assert custom_standardization("Great MOVIE!<br /><br />Loved it.") == "great movie  loved it"
    assert custom_standardization(b"A<br />B.") == b"a b"
    batch = np.array(["X, y!", "Z<br />w"], dtype=object)
    np.testing.assert_array_equal(custom_standardization(batch), np.array(["x y", "z w"], dtype=object))
    assert md.strings.regex_replace("aaa", "a", "b", replace_global=False) == "baa"
    assert md.strings.regex_replace("ab", "(a)(b)", r"\2\1") == "ba"


def test_other_tf_strings_ops_are_refused_naming_what_to_write():
    with pytest.raises(AttributeError, match=r"tf.strings.split with Python's str methods or re"):
        md.strings.split


def test_constant_and_expand_dims_of_text_are_mdata_text():
    examples = md.constant(["The movie was great!", "The movie was okay.", "The movie was terrible..."])
    assert examples.shape == (3,) and examples[0] == "The movie was great!"
    assert list(examples.numpy()) == [b"The movie was great!", b"The movie was okay.", b"The movie was terrible..."]
    assert md.expand_dims(examples, -1).shape == (3, 1)
    assert md.expand_dims(examples[0], -1).shape == (1,)
    assert md.constant([1, 2]).dtype == md.int32   # numbers are unchanged


def _vectorizer():
    vectorize_layer = layers.TextVectorization(standardize=custom_standardization, max_tokens=100,
                                               output_mode='int', output_sequence_length=6)
    vectorize_layer.adapt(["a great movie<br />", "a terrible movie!", "great great fun"])
    return vectorize_layer


def test_vectorize_text_of_a_batch_and_of_one_review():
    vectorize_layer = _vectorizer()

    def vectorize_text(text, label):
        text = md.expand_dims(text, -1)
        return vectorize_layer(text), label

    ds = md.data.Dataset.from_tensor_slices((["A great movie", "Terrible!"], [1, 0])).batch(2)
    ids, _ = next(iter(ds.map(vectorize_text)))
    assert tuple(ids.shape) == (2, 6)
    first_review = next(iter(ds))[0][0]
    assert tuple(vectorize_text(first_review, 1)[0].shape) == (1, 6)


def test_export_model_predicts_on_a_constant_of_reviews_and_a_plain_layer_says_why_not():
    vectorize_layer = _vectorizer()
    model = md.keras.Sequential([layers.Embedding(100, 4), layers.GlobalAveragePooling1D(), layers.Dense(1)])
    export_model = md.keras.Sequential([vectorize_layer, model, layers.Activation('sigmoid')])
    export_model.compile(loss=md.keras.losses.BinaryCrossentropy(from_logits=False), optimizer="adam",
                         metrics=['accuracy'])
    examples = md.constant(["The movie was great!", "The movie was okay.", "The movie was terrible..."])
    probabilities = export_model.predict(examples, verbose=0)
    assert probabilities.shape == (3, 1)
    np.testing.assert_allclose(probabilities, export_model(examples).numpy(), rtol=1e-6)
    assert export_model.predict(np.array(["great fun"] * 5), batch_size=2, verbose=0).shape == (5, 1)
    with pytest.raises(ValueError, match=r'Layer "dense.*received text.*TextVectorization'):
        layers.Dense(1)(np.array(["great"], dtype=object))
