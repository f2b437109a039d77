"""tensorflow.org's tutorials/keras/overfit_and_underfit and structured_data/imbalanced_data, typed as
printed with ``tf.`` -> ``md.``.

Data: synthetic tables of the pages' shapes (never downloaded). overfit_and_underfit reads a gzipped CSV
of 28 features and a label, written here; md has no ``tf.data.experimental.CsvDataset`` (it says so and
names ``from_tensor_slices``), so the md side reads the same file with numpy (the one substitution).
The sizes are the page's divided by 50 (``N_TRAIN`` 200, one batch of ``BATCH_SIZE`` = 200 per step so
the shuffle only reorders a sum), ``max_epochs`` 6. tfdocs' EpochDots and the TensorBoard callback are
left out (plotting). imbalanced_data's pandas/sklearn steps are done with numpy; its BATCH_SIZE 2048
covers the 160 training rows. Dense weights are set from a fixed pattern after build; Dropout's rate
is a parameter (the pages' 0.5 on "<name>", 0.0 on "<name>_no_dropout" for numbers both frameworks
repeat).
"""

import gzip
import os

import numpy as np

from _tf_core_common import IS_TF, copies_agree, deterministic, history, linspace, rnd, scope, tf

FEATURES = 28


def _write_higgs_csv(path, n, seed=3):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, FEATURES)
    label = (x[:, :4].sum(1) + rng.randn(n) > 0).astype(float)
    with gzip.open(path, "wt") as f:
        for row in np.column_stack([label, x]):
            f.write(",".join(f"{v:.6f}" for v in row) + "\n")


def _packed_ds(gz):
    if IS_TF:
        ds = tf.data.experimental.CsvDataset(gz, [float(), ] * (FEATURES + 1), compression_type="GZIP")

        def pack_row(*row):
            label = row[0]
            features = tf.stack(row[1:], 1)
            return features, label

        return ds.batch(10000).map(pack_row).unbatch()
    table = np.loadtxt(gz, delimiter=",", dtype="float32")   # md: no CsvDataset (AttributeError names this)
    return tf.data.Dataset.from_tensor_slices((table[:, 1:], table[:, 0]))


def overfit_and_underfit(replicas, rate=0.5):
    layers, regularizers = tf.keras.layers, tf.keras.regularizers
    gz = os.path.abspath("HIGGS.csv.gz")
    _write_higgs_csv(gz, 240)
    packed_ds = _packed_ds(gz)
    out = {}
    for features, label in packed_ds.batch(1000).take(1):
        out["first_batch"] = [list(features.shape), rnd(label[:5])]
    N_VALIDATION, N_TRAIN, BUFFER_SIZE, BATCH_SIZE = 40, 200, 200, 200
    STEPS_PER_EPOCH = N_TRAIN // BATCH_SIZE
    validate_ds = packed_ds.take(N_VALIDATION).cache()
    train_ds = packed_ds.skip(N_VALIDATION).take(N_TRAIN).cache()
    validate_ds = validate_ds.batch(BATCH_SIZE)
    train_ds = train_ds.shuffle(BUFFER_SIZE).repeat().batch(BATCH_SIZE)
    lr_schedule = tf.keras.optimizers.schedules.InverseTimeDecay(
        0.001, decay_steps=STEPS_PER_EPOCH * 1000, decay_rate=1, staircase=False)
    step = np.linspace(0, 100000)
    lr = lr_schedule(step)
    out["lr"] = rnd(np.asarray(lr)[::10] * 1000)   # plt.plot(step/STEPS_PER_EPOCH, lr) reads it as an array

    def get_optimizer():
        return tf.keras.optimizers.Adam(lr_schedule)

    def get_callbacks(name):
        return [tf.keras.callbacks.EarlyStopping(monitor='val_binary_crossentropy', patience=200)]

    def compile_and_fit(model, name, optimizer=None, max_epochs=6):
        with scope(replicas):
            if optimizer is None:
                optimizer = get_optimizer()
            model.compile(optimizer=optimizer,
                          loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
                          metrics=[tf.keras.metrics.BinaryCrossentropy(from_logits=True,
                                                                       name='binary_crossentropy'),
                                   'accuracy'])
        model.summary(print_fn=lambda *a, **k: None)
        return model.fit(train_ds, steps_per_epoch=STEPS_PER_EPOCH, epochs=max_epochs,
                         validation_data=validate_ds, callbacks=get_callbacks(name), verbose=0)

    def built(model):
        return deterministic(model, scale=0.05)

    size_histories = {}
    with scope(replicas):
        tiny_model = built(tf.keras.Sequential([
            layers.Dense(16, activation='elu', input_shape=(FEATURES,)),
            layers.Dense(1)
        ]))
    size_histories['Tiny'] = compile_and_fit(tiny_model, 'sizes/Tiny')
    with scope(replicas):
        l2_model = built(tf.keras.Sequential([
            layers.Dense(64, activation='elu', kernel_regularizer=regularizers.l2(0.001),
                         input_shape=(FEATURES,)),
            layers.Dense(64, activation='elu', kernel_regularizer=regularizers.l2(0.001)),
            layers.Dense(1)
        ]))
    size_histories['l2'] = compile_and_fit(l2_model, "regularizers/l2")
    result = l2_model(features)
    regularization_loss = tf.add_n(l2_model.losses)
    out["l2_losses"] = [len(l2_model.losses), rnd(regularization_loss, 4), list(result.shape)]
    with scope(replicas):
        dropout_model = built(tf.keras.Sequential([
            layers.Dense(64, activation='elu', input_shape=(FEATURES,)),
            layers.Dropout(rate),
            layers.Dense(64, activation='elu'),
            layers.Dropout(rate),
            layers.Dense(1)
        ]))
    size_histories['dropout'] = compile_and_fit(dropout_model, "regularizers/dropout")
    with scope(replicas):
        combined_model = built(tf.keras.Sequential([
            layers.Dense(64, kernel_regularizer=regularizers.l2(0.0001), activation='elu',
                         input_shape=(FEATURES,)),
            layers.Dropout(rate),
            layers.Dense(64, kernel_regularizer=regularizers.l2(0.0001), activation='elu'),
            layers.Dropout(rate),
            layers.Dense(1)
        ]))
    size_histories['combined'] = compile_and_fit(combined_model, "regularizers/combined")
    out["histories"] = {name: history(h) for name, h in size_histories.items()}
    out["copies_agree"] = copies_agree(l2_model.trainable_variables + combined_model.trainable_variables)
    return out


def overfit_and_underfit_no_dropout(replicas):
    return overfit_and_underfit(replicas, rate=0.0)


def _creditcard(n, seed=4):
    """The tutorial's ``cleaned_df`` as numpy: 29 features (V1..V28, Log Amount) and Class, ~10% positive."""
    rng = np.random.RandomState(seed)
    labels = (rng.rand(n) < 0.1).astype("int64")
    features = rng.randn(n, 28) + labels[:, None] * np.linspace(-1.5, 1.5, 28)
    log_amount = np.log(rng.exponential(80, size=n) + 0.001)
    return np.column_stack([features, log_amount]), labels


def imbalanced_data(replicas, rate=0.5):
    keras = tf.keras
    features, labels = _creditcard(240)
    neg, pos = np.bincount(labels)
    total = neg + pos
    out = {"examples": [int(total), int(pos)]}
    train_features, test_features = features[:160], features[160:200]   # train_test_split(..., test_size=0.2)
    val_features = features[200:]
    train_labels, test_labels = labels[:160].reshape(-1, 1), labels[160:200].reshape(-1, 1)
    val_labels = labels[200:].reshape(-1, 1)
    bool_train_labels = train_labels[:, 0] != 0
    mean, std = train_features.mean(0), train_features.std(0)   # StandardScaler
    train_features = np.clip((train_features - mean) / std, -5, 5)
    val_features = np.clip((val_features - mean) / std, -5, 5)
    test_features = np.clip((test_features - mean) / std, -5, 5)
    METRICS = lambda: [   # noqa: E731  (the page's list, made once per model in the scope)
        keras.metrics.BinaryCrossentropy(name='cross entropy'),
        keras.metrics.MeanSquaredError(name='Brier score'),
        keras.metrics.TruePositives(name='tp'),
        keras.metrics.FalsePositives(name='fp'),
        keras.metrics.TrueNegatives(name='tn'),
        keras.metrics.FalseNegatives(name='fn'),
        keras.metrics.BinaryAccuracy(name='accuracy'),
        keras.metrics.Precision(name='precision'),
        keras.metrics.Recall(name='recall'),
        keras.metrics.AUC(name='auc'),
        keras.metrics.AUC(name='prc', curve='PR'),
    ]

    def make_model(metrics=None, output_bias=None):
        if output_bias is not None:
            output_bias = tf.keras.initializers.Constant(output_bias)
        with scope(replicas):
            model = keras.Sequential([
                keras.layers.Dense(16, activation='relu', input_shape=(train_features.shape[-1],)),
                keras.layers.Dropout(rate),
                keras.layers.Dense(1, activation='sigmoid', bias_initializer=output_bias),
            ])
            deterministic(model.layers[0], scale=0.2)
            deterministic(model.layers[-1], scale=0.2)
            model.layers[-1].bias.assign(np.zeros(1) if output_bias is None else np.asarray(initial_bias))
            model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3),
                          loss=keras.losses.BinaryCrossentropy(),
                          metrics=METRICS() if metrics is None else metrics)
        return model

    EPOCHS, BATCH_SIZE = 8, 2048
    early_stopping = tf.keras.callbacks.EarlyStopping(monitor='val_prc', verbose=0, patience=10, mode='max',
                                                      restore_best_weights=True)
    initial_bias = np.log([pos / neg])
    model = make_model()
    out["predict"] = rnd(model.predict(train_features[:10], verbose=0), 4)
    results = model.evaluate(train_features, train_labels, batch_size=BATCH_SIZE, verbose=0)
    out["loss_zero_bias"] = rnd(results[0], 4)
    model = make_model(output_bias=initial_bias)
    out["predict_bias"] = rnd(model.predict(train_features[:10], verbose=0), 4)
    results = model.evaluate(train_features, train_labels, batch_size=BATCH_SIZE, verbose=0)
    out["loss_bias"] = rnd(results[0], 4)
    initial_weights = os.path.abspath('initial.weights.h5')
    model.save_weights(initial_weights)
    model = make_model()
    model.load_weights(initial_weights)
    model.layers[-1].bias.assign([0.0])
    zero_bias_history = model.fit(train_features, train_labels, batch_size=BATCH_SIZE, epochs=4,
                                  validation_data=(val_features, val_labels), verbose=0)
    model = make_model()
    model.load_weights(initial_weights)
    careful_bias_history = model.fit(train_features, train_labels, batch_size=BATCH_SIZE, epochs=4,
                                     validation_data=(val_features, val_labels), verbose=0)
    out["zero_bias"], out["careful_bias"] = history(zero_bias_history), history(careful_bias_history)
    model = make_model()
    model.load_weights(initial_weights)
    baseline_history = model.fit(train_features, train_labels, batch_size=BATCH_SIZE, epochs=EPOCHS,
                                 callbacks=[early_stopping], validation_data=(val_features, val_labels),
                                 verbose=0)
    out["baseline"] = history(baseline_history)
    out["baseline_best_epoch"] = early_stopping.best_epoch
    out["baseline_val_prc"] = [float(v) for v in baseline_history.history['val_prc']]
    baseline_results = model.evaluate(test_features, test_labels, batch_size=BATCH_SIZE, verbose=0)
    out["baseline_test"] = {name: rnd(value, 4) for name, value in zip(model.metrics_names, baseline_results)}
    weight_for_0 = (1 / neg) * (total / 2.0)
    weight_for_1 = (1 / pos) * (total / 2.0)
    class_weight = {0: weight_for_0, 1: weight_for_1}
    weighted_model = make_model()
    weighted_model.load_weights(initial_weights)
    weighted_history = weighted_model.fit(train_features, train_labels, batch_size=BATCH_SIZE, epochs=EPOCHS,
                                          callbacks=[early_stopping], validation_data=(val_features, val_labels),
                                          class_weight=class_weight, verbose=0)
    out["weighted"] = history(weighted_history)
    out["weighted_test"] = rnd(weighted_model.evaluate(test_features, test_labels, batch_size=BATCH_SIZE,
                                                       verbose=0), 4)
    out["copies_agree"] = copies_agree(weighted_model.trainable_variables)
    pos_features, neg_features = train_features[bool_train_labels], train_features[~bool_train_labels]
    pos_labels, neg_labels = train_labels[bool_train_labels], train_labels[~bool_train_labels]

    def make_ds(features, labels):
        return tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(100000).repeat()

    pos_ds, neg_ds = make_ds(pos_features, pos_labels), make_ds(neg_features, neg_labels)
    resampled_ds = tf.data.Dataset.sample_from_datasets([pos_ds, neg_ds], weights=[0.5, 0.5])
    resampled_ds = resampled_ds.batch(BATCH_SIZE).prefetch(2)
    for features_, label in resampled_ds.take(1):
        out["resampled_batch"] = [list(features_.shape), bool(0.4 < float(np.mean(np.asarray(label))) < 0.6)]
    resampled_steps_per_epoch = np.ceil(2.0 * neg / BATCH_SIZE)
    resampled_model = make_model()
    resampled_model.load_weights(initial_weights)
    val_ds = tf.data.Dataset.from_tensor_slices((val_features, val_labels)).cache().batch(BATCH_SIZE).prefetch(2)
    resampled_history = resampled_model.fit(resampled_ds, epochs=2, steps_per_epoch=resampled_steps_per_epoch,
                                            callbacks=[early_stopping], validation_data=val_ds, verbose=0)
    out["resampled_keys"] = sorted(resampled_history.history)
    out["resampled_epochs"] = len(resampled_history.epoch)
    return out


def imbalanced_data_no_dropout(replicas):
    return imbalanced_data(replicas, rate=0.0)


PROGRAMS = []
REPLICATED = [overfit_and_underfit, overfit_and_underfit_no_dropout, imbalanced_data, imbalanced_data_no_dropout]
