"""``tf.strings`` as the nmt_with_attention tutorial's ``tf_lower_and_split_punct`` writes it: RE2's ``\\0``
rewrite (the whole match; Python's re reads it as NUL) and ``tf.strings.join`` (values from TF 2.21)."""

import pytest

import multidev as md


def tf_lower_and_split_punct(text):
    text = md.strings.lower(text)
    text = md.strings.regex_replace(text, '[^ a-z.?!,¿]', '')
    text = md.strings.regex_replace(text, '[.?!,¿]', r' \0 ')
    text = md.strings.strip(text)
    text = md.strings.join(['[START]', text, '[END]'], separator=' ')
    return text


def test_whole_match_rewrite_and_groups_as_re2():
    assert md.strings.regex_replace('hola, amigo!', '[.?!,]', r' \0 ') == 'hola ,  amigo ! '
    assert md.strings.regex_replace('ab', '(a)(b)', r'\2\1\\x') == 'ba\\x'    # \\ is one backslash
    assert md.strings.regex_replace(b'a1', r'(\d)', r'<\1>') == b'a<1>'
    assert md.strings.regex_replace(['x.y.', 'z'], r'\.', r'[\0]', replace_global=False) == ['x[.]y.', 'z']


def test_join_scalars_and_element_wise():
    assert md.strings.join(['[START]', 'a b', '[END]'], separator=' ') == '[START] a b [END]'
    assert md.strings.join(['x', 'y']) == 'xy'
    assert md.strings.join(['<', ['a', 'b'], '>'], separator='|') == ['<|a|>', '<|b|>']
    assert md.strings.join([b'a', b'b'], separator='-') == b'a-b'
    with pytest.raises(TypeError, match="list of strings"):
        md.strings.join('ab')


def test_nmt_standardize_gives_punctuation_tokens():
    assert tf_lower_and_split_punct('¿Todavía está en casa?') == '[START] ¿ todava est en casa ? [END]'
    processor = md.keras.layers.TextVectorization(standardize=tf_lower_and_split_punct, max_tokens=50)
    processor.adapt(['Hola, amigo!', '¿Es casa?'])
    vocabulary = processor.get_vocabulary()
    assert {',', '!', '?', '¿', '[START]', '[END]'} <= set(vocabulary)
    assert not any('\x00' in word for word in vocabulary)


def test_ragged_text_vectorization_is_refused_with_why():
    with pytest.raises(ValueError, match=r"ragged=True.*no ragged tensors.*ragged=False.*target\[:, :-1\]"):
        md.keras.layers.TextVectorization(standardize=tf_lower_and_split_punct, max_tokens=50, ragged=True)
    assert md.keras.layers.TextVectorization(ragged=False, vocabulary=['a', 'b'])(['a b']).shape == (1, 2)
