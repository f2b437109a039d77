"""tensorflow.org's tutorials/keras/text_classification, typed as printed with ``tf.`` -> ``md.``.

Data: a small ``aclImdb`` directory of .txt reviews written here (never downloaded), 40 training and 16
test files, each class's words drawn from its own list with ``<br />`` and punctuation for the page's
``custom_standardization``; batch_size 32 so the training split (32 files) is one batch and the epoch's
shuffle only reorders a sum. The Embedding and Dense weights are set from a fixed pattern once built;
Dropout's rate is a parameter (the page's 0.2 on "<name>", 0.0 on "<name>_no_dropout").
"""

import os
import re
import string

import numpy as np

from _tf_core_common import copies_agree, deterministic, history, rnd, scope, tf

POSITIVE = "great wonderful superb moving brilliant fun charming".split()
NEGATIVE = "awful boring dull terrible waste bad clumsy".split()
COMMON = "the movie plot actor film story was and".split()


def _write_reviews(root, n_per_class, seed):
    rng = np.random.RandomState(seed)
    for label, words in (("pos", POSITIVE), ("neg", NEGATIVE)):
        os.makedirs(os.path.join(root, label))
        for i in range(n_per_class):
            tokens = list(rng.choice(words, size=3 + i % 4)) + list(rng.choice(COMMON, size=4 + i % 3))
            rng.shuffle(tokens)
            text = " ".join(tokens[:4]).capitalize() + "!<br /><br />" + " ".join(tokens[4:]) + "..."
            with open(os.path.join(root, label, f"{i}_{i % 10}.txt"), "w") as f:
                f.write(text)


def custom_standardization(input_data):
    lowercase = tf.strings.lower(input_data)
    stripped_html = tf.strings.regex_replace(lowercase, '<br />', ' ')
    return tf.strings.regex_replace(stripped_html, '[%s]' % re.escape(string.punctuation), '')


def text_classification(replicas, rate=0.2):
    layers, losses = tf.keras.layers, tf.keras.losses
    _write_reviews('aclImdb/train', 20, 1)
    _write_reviews('aclImdb/test', 8, 2)
    out = {}
    batch_size = 32
    seed = 42
    raw_train_ds = tf.keras.utils.text_dataset_from_directory(
        'aclImdb/train', batch_size=batch_size, validation_split=0.2, subset='training', seed=seed)
    raw_val_ds = tf.keras.utils.text_dataset_from_directory(
        'aclImdb/train', batch_size=batch_size, validation_split=0.2, subset='validation', seed=seed)
    raw_test_ds = tf.keras.utils.text_dataset_from_directory('aclImdb/test', batch_size=batch_size)
    out["class_names"] = [raw_train_ds.class_names[0], raw_train_ds.class_names[1]]
    for text_batch, label_batch in raw_train_ds.take(1):
        out["batch"] = sorted(zip((t.decode() for t in text_batch.numpy()), label_batch.numpy().tolist()))[:3]
    max_features = 10000
    sequence_length = 250
    with scope(replicas):
        vectorize_layer = layers.TextVectorization(
            standardize=custom_standardization, max_tokens=max_features, output_mode='int',
            output_sequence_length=sequence_length)
    train_text = raw_train_ds.map(lambda x, y: x)
    vectorize_layer.adapt(train_text)

    def vectorize_text(text, label):
        text = tf.expand_dims(text, -1)
        return vectorize_layer(text), label

    text_batch, label_batch = next(iter(raw_train_ds))
    first_review, first_label = text_batch[0], label_batch[0]
    vectorized, _ = vectorize_text(first_review, first_label)
    out["vectorized"] = list(vectorized.shape)   # which review is first: each shuffle's own
    out["vocabulary"] = vectorize_layer.get_vocabulary()
    out["vocabulary_size"] = len(vectorize_layer.get_vocabulary())
    train_ds = raw_train_ds.map(vectorize_text)
    val_ds = raw_val_ds.map(vectorize_text)
    test_ds = raw_test_ds.map(vectorize_text)
    AUTOTUNE = tf.data.AUTOTUNE
    train_ds = train_ds.cache().prefetch(buffer_size=AUTOTUNE)
    val_ds = val_ds.cache().prefetch(buffer_size=AUTOTUNE)
    test_ds = test_ds.cache().prefetch(buffer_size=AUTOTUNE)
    embedding_dim = 16
    with scope(replicas):
        model = tf.keras.Sequential([
            layers.Embedding(max_features, embedding_dim),
            layers.Dropout(rate),
            layers.GlobalAveragePooling1D(),
            layers.Dropout(rate),
            layers.Dense(1)])
        model.build((None, sequence_length))   # not in the page: built to set its weights
        deterministic(model, scale=0.05)
        model.compile(loss=losses.BinaryCrossentropy(from_logits=True), optimizer='adam',
                      metrics=[tf.metrics.BinaryAccuracy(threshold=0.0)])
    epochs = 10
    h = model.fit(train_ds, validation_data=val_ds, epochs=epochs, verbose=0)
    history_dict = h.history
    out["history_keys"] = sorted(history_dict.keys())
    out["fit"] = history(h)
    loss, accuracy = model.evaluate(test_ds, verbose=0)
    out["evaluate"] = rnd([loss, accuracy], 4)
    with scope(replicas):
        export_model = tf.keras.Sequential([vectorize_layer, model, layers.Activation('sigmoid')])
        export_model.compile(loss=losses.BinaryCrossentropy(from_logits=False), optimizer="adam",
                             metrics=['accuracy'])
    metrics = export_model.evaluate(raw_test_ds, return_dict=True, verbose=0)
    out["export_evaluate"] = {k: rnd(v, 4) for k, v in sorted(metrics.items())}
    examples = tf.constant(["The movie was great!", "The movie was okay.", "The movie was terrible..."])
    out["export_predict"] = rnd(export_model.predict(examples, verbose=0), 4)
    out["copies_agree"] = copies_agree(model.trainable_variables)
    return out


def text_classification_no_dropout(replicas):
    return text_classification(replicas, rate=0.0)


PROGRAMS = []
REPLICATED = [text_classification, text_classification_no_dropout]
