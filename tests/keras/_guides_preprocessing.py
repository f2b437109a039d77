"""Guide "Working with preprocessing layers": adapt, lookups, encodings, inside the model and in the dataset."""

import numpy as np

from _guides_common import K, L, X, Y, deterministic, fingerprint, history, ints, rnd, scope, tf

DATA = np.array([[0.1, 0.2, 0.3], [0.8, 0.9, 1.0], [1.5, 1.6, 1.7]], "float32")
SEQ = np.sin(np.arange(24.0)).reshape(4, 3, 2).astype("float32")


def normalization_adapt(r):
    out = {}
    with scope(r):
        layer = L.Normalization()
        layer.adapt(DATA)   # adapt inside the scope
    out["numpy"] = rnd(layer(DATA))
    layer = L.Normalization(axis=None)
    layer.adapt(DATA)
    out["axis_none"] = rnd(layer(DATA))
    for axis in (1, (1, 2), -1):
        layer = L.Normalization(axis=axis)
        layer.adapt(SEQ)
        out[f"axis_{axis}"] = rnd(layer(SEQ))
    layer = L.Normalization()
    layer.adapt(tf.data.Dataset.from_tensor_slices(DATA).batch(2))
    out["dataset"] = rnd(layer(DATA))
    out["given"] = rnd(L.Normalization(mean=2.0, variance=4.0)(DATA))
    layer = L.Normalization(invert=True)
    layer.adapt(DATA)
    out["invert"] = rnd(layer(np.array([[0.0, 1.0, -1.0]], "float32")))
    return out


def normalization_in_model_fit(r):
    norm = L.Normalization()
    norm.adapt(X)   # outside the scope, as the guide's "adapt then build the model"
    with scope(r):
        model = K.Sequential([K.Input((4,)), norm, L.Dense(1)])
        deterministic(model.layers[-1])
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    h = model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return {"w": fingerprint(model.trainable_weights), "h": history(h),
            "evaluate": round(float(model.evaluate(X, Y, batch_size=4, verbose=0)), 5)}


def normalization_in_dataset_fit(r):
    norm = L.Normalization()
    norm.adapt(X)
    ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(4).map(lambda x, y: (norm(x), y))
    with scope(r):
        model = K.Sequential([K.Input((4,)), L.Dense(1)])
        deterministic(model)
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    return {"w": fingerprint(model.trainable_weights), "h": history(model.fit(ds, epochs=2, verbose=0))}


def discretization(r):
    data = np.array([[-1.5, 1.0, 3.4, 0.5], [0.0, 3.0, 1.3, 0.0]])
    out = {"boundaries": ints(L.Discretization(bin_boundaries=[0.0, 1.0, 2.0])(data))}
    layer = L.Discretization(num_bins=4, epsilon=0.01)
    layer.adapt(data)
    out["adapted"] = ints(layer(data))
    out["learnt"] = rnd(layer.bin_boundaries)
    out["one_hot"] = rnd(L.Discretization(bin_boundaries=[0.0, 1.0], output_mode="one_hot")(np.array([-1.0, 0.5, 2.0])))
    return out


def category_encoding(r):
    return {"one_hot": rnd(L.CategoryEncoding(num_tokens=4, output_mode="one_hot")(np.array([3, 2, 0, 1]))),
            "multi_hot": rnd(L.CategoryEncoding(num_tokens=4, output_mode="multi_hot")(
                np.array([[0, 1], [0, 0], [1, 2], [3, 1]]))),
            "count": rnd(L.CategoryEncoding(num_tokens=4, output_mode="count")(
                np.array([[0, 1], [0, 0], [1, 2], [3, 1]]), count_weights=np.array(
                    [[0.1, 0.2], [0.1, 0.1], [0.2, 0.3], [0.4, 0.2]])))}


def hashing(r):
    out = {"strings": ints(L.Hashing(num_bins=3)(np.array([["A"], ["B"], ["C"], ["D"], ["E"]]))),
           "mask": ints(L.Hashing(num_bins=3, mask_value="")(np.array([["A"], ["B"], [""], ["C"], ["D"]]))),
           "ints": ints(L.Hashing(num_bins=3)(np.array([[1], [2], [3], [4], [5]]))),
           "one_hot": rnd(L.Hashing(num_bins=3, output_mode="one_hot")(np.array(["A", "B", "C"])))}
    try:
        out["salt"] = ints(L.Hashing(num_bins=3, salt=133)(np.array([["A"], ["B"], ["C"], ["D"], ["E"]])))
    except Exception as e:  # noqa: BLE001 - the observation is the exception's type
        out["salt"] = type(e).__name__
    return out


WORDS = np.array([["a"], ["b"], ["c"], ["b"], ["c"], ["a"], ["c"]])
TEST = np.array([["a"], ["b"], ["c"], ["d"], ["e"], [""]])


def string_lookup(r):
    out = {}
    for mode in ("int", "one_hot", "multi_hot", "count", "tf_idf"):
        layer = L.StringLookup(output_mode=mode)
        layer.adapt(WORDS)
        out[mode] = rnd(layer(TEST if mode != "multi_hot" else np.array([["a", "b"], ["c", "z"]])))
    layer = L.StringLookup(vocabulary=["a", "b", "c"], num_oov_indices=2, mask_token="")
    out["oov2_mask"] = ints(layer(TEST))
    out["vocabulary"] = layer.get_vocabulary()
    inverse = L.StringLookup(vocabulary=["a", "b", "c"], invert=True)
    out["invert"] = [s.decode() if isinstance(s, bytes) else str(s) for s in np.asarray(inverse(
        np.array([1, 3, 0, 2]))).reshape(-1)]
    return out


def integer_lookup(r):
    data = np.array([[12, 1138, 42], [42, 1000, 36], [36, 21, 7]])
    layer = L.IntegerLookup()
    layer.adapt(data)
    out = {"adapted": ints(layer(data)), "vocabulary": ints(layer.get_vocabulary())}
    layer = L.IntegerLookup(vocabulary=[12, 36, 1138, 42], mask_token=0, num_oov_indices=2)
    out["mask_oov2"] = ints(layer(np.array([[12, 1138, 42], [42, 0, 36], [36, 21, 7]])))
    out["invert"] = ints(L.IntegerLookup(vocabulary=[12, 36, 1138, 42], invert=True)(np.array([[2, 4, 1], [0, 3, 1]])))
    out["multi_hot"] = rnd(L.IntegerLookup(vocabulary=[12, 36], output_mode="multi_hot")(np.array([[12, 36], [7, 12]])))
    return out


TEXTS = np.array(["The Brain is wider than the Sky", "For put them side by side", "The one the other will contain",
                  "With ease and You beside"])


def text_vectorization(r):
    out = {}
    layer = L.TextVectorization(output_mode="int")
    layer.adapt(TEXTS)
    out["vocabulary"] = layer.get_vocabulary()
    out["int"] = ints(layer(np.array(["The Brain is deeper than the sea", "for if they are held"])))
    layer = L.TextVectorization(output_mode="int", output_sequence_length=5, max_tokens=8)
    layer.adapt(tf.data.Dataset.from_tensor_slices(TEXTS).batch(2))
    out["int_len5_max8"] = ints(layer(np.array(["The Brain is deeper than the sea", "side"])))
    for mode in ("multi_hot", "count", "tf_idf"):
        layer = L.TextVectorization(output_mode=mode, ngrams=2)
        layer.adapt(TEXTS)
        out[f"{mode}_ngrams2"] = [layer.get_vocabulary()[:6], rnd(layer(np.array(["The Brain is deeper than the sea"])))]
    return out


def lookup_in_dataset_fit(r):
    """The guide's "preprocess in the dataset" with a StringLookup, then fit on the strategy."""
    words = np.array([["a", "b"], ["c", "a"], ["d", "z"], ["b", "b"], ["c", "d"], ["a", "c"]])
    labels = np.array([[1.0], [0.0], [1.0], [0.0], [1.0], [0.0]], "float32")
    lookup = L.StringLookup()
    lookup.adapt(words)
    ds = tf.data.Dataset.from_tensor_slices((words, labels)).batch(2).map(lambda x, y: (lookup(x), y))
    with scope(r):
        model = K.Sequential([K.Input((2,), dtype="int64"), L.Embedding(lookup.vocabulary_size(), 3),
                              L.GlobalAveragePooling1D(), L.Dense(1, activation="sigmoid")])
        deterministic(model)
        model.compile(optimizer=K.optimizers.SGD(0.5), loss="binary_crossentropy", metrics=["accuracy"])
    return {"w": fingerprint(model.trainable_weights), "h": history(model.fit(ds, epochs=2, verbose=0))}


def lookup_inside_model_fit(r):
    """The lookup inside the model (adapted outside the scope); string inputs through fit."""
    words = np.array([["a", "b"], ["c", "a"], ["d", "z"], ["b", "b"], ["c", "d"], ["a", "c"]])
    labels = np.array([[1.0], [0.0], [1.0], [0.0], [1.0], [0.0]], "float32")
    lookup = L.StringLookup(output_mode="multi_hot")
    lookup.adapt(words)
    with scope(r):
        inputs = K.Input((2,), dtype="string")
        model = K.Model(inputs, L.Dense(1, activation="sigmoid")(lookup(inputs)))
        deterministic(model)
        model.compile(optimizer=K.optimizers.SGD(0.5), loss="binary_crossentropy")
    ds = tf.data.Dataset.from_tensor_slices((words, labels)).batch(2)   # Keras 3 on TF: no numpy str arrays in fit
    h = model.fit(ds, epochs=2, verbose=0)
    return {"w": fingerprint(model.trainable_weights), "h": history(h),
            "predict": rnd(model.predict(tf.data.Dataset.from_tensor_slices(words[:3]).batch(2), verbose=0))}


def readapt_and_steps(r):
    """A second adapt replaces the first one's state; ``steps`` stops early on a repeated dataset."""
    out = {}
    with scope(r):
        norm = L.Normalization()
    norm.adapt(DATA)
    norm.adapt(DATA * 2.0 + 1.0)
    out["normalization"] = rnd(norm(DATA))
    norm = L.Normalization()
    norm.adapt(tf.data.Dataset.from_tensor_slices(DATA).batch(2).take(1))   # Keras 3: no steps= here
    out["normalization_steps"] = rnd(norm(DATA))
    lookup = L.StringLookup()
    lookup.adapt(WORDS)
    lookup.adapt(np.array([["x"], ["y"], ["y"]]))
    out["lookup"] = lookup.get_vocabulary()
    vectorizer = L.TextVectorization(max_tokens=6)
    vectorizer.adapt(tf.data.Dataset.from_tensor_slices(TEXTS).batch(1).repeat(), steps=2)
    out["text_steps"] = vectorizer.get_vocabulary()
    return out


def text_vectorization_in_dataset_fit(r):
    """The text guide's pipeline: TextVectorization in ds.map, then Embedding -> pooling -> Dense on the strategy."""
    vectorizer = L.TextVectorization(max_tokens=20, output_sequence_length=6)
    vectorizer.adapt(TEXTS)
    labels = np.array([[1.0], [0.0], [1.0], [0.0]], "float32")
    ds = tf.data.Dataset.from_tensor_slices((TEXTS, labels)).batch(2).map(lambda x, y: (vectorizer(x), y))
    with scope(r):
        model = K.Sequential([K.Input((6,), dtype="int64"), L.Embedding(20, 3, mask_zero=True),
                              L.GlobalAveragePooling1D(), L.Dense(1, activation="sigmoid")])
        deterministic(model)
        model.compile(optimizer=K.optimizers.SGD(0.5), loss="binary_crossentropy", metrics=["accuracy"])
    return {"w": fingerprint(model.trainable_weights), "h": history(model.fit(ds, epochs=2, verbose=0))}


SNIPPETS = [readapt_and_steps, text_vectorization_in_dataset_fit, normalization_adapt, normalization_in_model_fit, normalization_in_dataset_fit, discretization,
            category_encoding, hashing, string_lookup, integer_lookup, text_vectorization, lookup_in_dataset_fit,
            lookup_inside_model_fit]
