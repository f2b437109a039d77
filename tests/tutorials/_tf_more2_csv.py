"""tensorflow.org's tutorials/load_data/csv, typed as printed with ``tf.`` -> ``md.`` (see
``_tf_more2_programs.py``): abalone- and titanic-shaped tables made here, ``make_csv_dataset`` on CSV and
GZIP files written here. md has no string tensors: the titanic model's ``tf.keras.Input(dtype=tf.string)``
stops at ``md.string`` with the reason (``test_tf_more2_tutorials.py``'s MD_REFUSES).
"""

import gzip

import numpy as np

from _tf_core_common import copies_agree, deterministic, history, raised, rnd, scope, tf


def _fixed(model):
    for layer in model.layers:
        if layer.get_weights():
            deterministic(layer)
    return model


def _abalone(n, seed):
    rng = np.random.RandomState(seed)
    x = rng.rand(n, 7).astype("float32") * [0.8, 0.6, 0.2, 2.5, 1.0, 0.5, 0.7]
    return x, (x @ [3, 2, 8, 1, -2, 4, 5] + 5 + rng.rand(n)).astype("float32")


def _titanic(n, seed):
    rng = np.random.RandomState(seed)
    features = {"sex": rng.choice(["male", "female"], n), "age": rng.randint(1, 70, n).astype("float64"),
                "n_siblings_spouses": rng.randint(0, 4, n).astype("float64"), "parch": rng.randint(0, 3, n)
                .astype("float64"), "fare": np.round(rng.rand(n) * 80, 2), "class": rng.choice(["First", "Second",
                                                                                                "Third"], n),
                "deck": rng.choice(["unknown", "A", "B", "C"], n), "embark_town": rng.choice(["Southampton",
                                                                                              "Cherbourg"], n),
                "alone": rng.choice(["y", "n"], n)}
    labels = ((features["sex"] == "female") ^ (rng.rand(n) < 0.2)).astype("int64")
    return features, labels


def csv_abalone(replicas):
    layers = tf.keras.layers
    abalone_features, abalone_labels = _abalone(32, 21)
    out = {}
    with scope(replicas):
        abalone_model = tf.keras.Sequential([layers.Dense(64, activation='relu'), layers.Dense(1)])
        abalone_model.build((None, 7))
        _fixed(abalone_model)
        abalone_model.compile(loss=tf.keras.losses.MeanSquaredError(), optimizer=tf.keras.optimizers.Adam())
    out["abalone"] = history(abalone_model.fit(abalone_features, abalone_labels, epochs=4, verbose=0))
    with scope(replicas):
        normalize = layers.Normalization()
        normalize.adapt(abalone_features)
        norm_abalone_model = tf.keras.Sequential([normalize, layers.Dense(64, activation='relu'), layers.Dense(1)])
        norm_abalone_model.build((None, 7))
        for layer in norm_abalone_model.layers[1:]:
            deterministic(layer)
        norm_abalone_model.compile(loss=tf.keras.losses.MeanSquaredError(), optimizer=tf.keras.optimizers.Adam())
    out["norm_abalone"] = history(norm_abalone_model.fit(abalone_features, abalone_labels, epochs=4, verbose=0))
    out["copies_agree"] = copies_agree(abalone_model.trainable_variables + norm_abalone_model.trainable_variables)
    out["make_csv_dataset"] = _make_csv_dataset()
    return out


def _dtype(value):
    """'string' for TF's string tensors and md's numpy arrays of str; 'float32' for both frameworks'."""
    name = str(getattr(value.dtype, "name", value.dtype)).replace("torch.", "")
    return "string" if name == "object" else name


def _make_csv_dataset():
    """The page's make_csv_dataset sections: titanic.csv (mixed types, shuffled) and a GZIP file."""
    features, labels = _titanic(23, 23)
    with open("titanic.csv", "w") as f:
        f.write("survived," + ",".join(features) + "\n")
        for i in range(23):
            f.write(f"{labels[i]}," + ",".join(str(column[i]) for column in features.values()) + "\n")
    with open("titanic.csv", "rb") as f, gzip.open("titanic.csv.gz", "wb") as g:
        g.write(f.read())
    titanic_csv_ds = tf.data.experimental.make_csv_dataset(
        "titanic.csv", batch_size=5, label_name='survived', num_epochs=1, ignore_errors=True,)
    out = {}
    for batch, label in titanic_csv_ds.take(1):
        out["keys"] = list(batch)
        out["dtypes"] = [_dtype(value) for value in batch.values()] + [_dtype(label)]
    out["epoch"] = [len(list(titanic_csv_ds)), int(sum(int(v) for _, y in titanic_csv_ds for v in np.asarray(y)))]
    traffic_ds = tf.data.experimental.make_csv_dataset(
        "titanic.csv.gz", batch_size=8, label_name='survived', num_epochs=1, compression_type="GZIP")
    out["gzip_fare_sum"] = rnd(sum(float(np.sum(np.asarray(b["fare"]))) for b, _ in traffic_ds), 2)
    forever = tf.data.experimental.make_csv_dataset("titanic.csv", batch_size=10, shuffle=False)
    out["forever"] = [[int(v) for v in np.asarray(b["survived"])] for b in forever.take(3)]
    return out


def csv_titanic(replicas):
    layers = tf.keras.layers
    out = {}

    titanic_features, titanic_labels = _titanic(32, 22)
    with scope(replicas):
        inputs = {}
        for name, column in titanic_features.items():
            dtype = tf.string if column.dtype.kind in "OUS" else tf.float32
            inputs[name] = tf.keras.Input(shape=(1,), name=name, dtype=dtype)
        numeric_inputs = {name: input for name, input in inputs.items() if input.dtype == tf.float32}
        x = layers.Concatenate()(list(numeric_inputs.values()))
        norm = layers.Normalization()
        norm.adapt(np.stack([titanic_features[k] for k in numeric_inputs], 1))
        all_numeric_inputs = norm(x)
        preprocessed_inputs = [all_numeric_inputs]
        for name, input in inputs.items():
            if input.dtype == tf.float32:
                continue
            lookup = layers.StringLookup(vocabulary=np.unique(titanic_features[name]))
            one_hot = layers.CategoryEncoding(num_tokens=lookup.vocabulary_size())
            x = lookup(input)
            x = one_hot(x)
            preprocessed_inputs.append(x)
        preprocessed_inputs_cat = layers.Concatenate()(preprocessed_inputs)
        titanic_preprocessing = tf.keras.Model(inputs, preprocessed_inputs_cat)
    titanic_features_dict = {name: np.array(value) for name, value in titanic_features.items()}
    features_dict = {name: values[:1] for name, values in titanic_features_dict.items()}
    out["preprocessed"] = rnd(titanic_preprocessing(features_dict), 4)

    def titanic_model(preprocessing_head, inputs):
        body = tf.keras.Sequential([layers.Dense(64), layers.Dense(1)])
        preprocessed_inputs = preprocessing_head(inputs)
        result = body(preprocessed_inputs)
        model = tf.keras.Model(inputs, result)
        _fixed(body)
        model.compile(loss=tf.keras.losses.BinaryCrossentropy(from_logits=True), optimizer=tf.keras.optimizers.Adam())
        return model

    with scope(replicas):
        titanic_model = titanic_model(titanic_preprocessing, inputs)
    out["titanic"] = history(titanic_model.fit(x=titanic_features_dict, y=titanic_labels, epochs=4, verbose=0))

    def save_and_reload():
        titanic_model.save('test.keras')
        reloaded = tf.keras.models.load_model('test.keras')
        return rnd(reloaded(features_dict) - titanic_model(features_dict), 5)
    out["reloaded_same"] = raised(save_and_reload)
    titanic_ds = tf.data.Dataset.from_tensor_slices((titanic_features_dict, titanic_labels))
    titanic_batches = titanic_ds.shuffle(len(titanic_labels)).batch(32)
    out["titanic_ds"] = history(titanic_model.fit(titanic_batches, epochs=3, verbose=0))
    out["copies_agree"] = copies_agree(titanic_model.trainable_variables)
    return out
