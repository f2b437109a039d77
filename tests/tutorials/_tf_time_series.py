"""tensorflow.org's tutorials/structured_data/time_series, typed as printed with ``tf.`` -> ``md.``.

Data: a synthetic weather table of 4 columns (never downloaded; the page's pandas DataFrames are numpy
arrays here with the column names kept beside them, and ``df.mean()``/``df.std()`` numpy's). The
WindowGenerator class (``__init__``, ``split_window``, ``make_dataset``, the ``train``/``val``/``test``/
``example`` properties) and the models are the page's; OUT_STEPS is 8 (the page's 24), MAX_EPOCHS 3.
``timeseries_dataset_from_array(shuffle=True)`` draws a different order in each framework, so the
numbers are compared on "<name>_no_shuffle" (``shuffle=False``); "<name>" runs the page's shuffle.
Weights are set from a fixed pattern once a model is built. ``tf.signal.rfft`` (the page's FFT plot)
is left out: md names torch.fft.rfft.
"""

import numpy as np

from _tf_core_common import copies_agree, deterministic, rnd, scope, tf

COLUMNS = ['p (mbar)', 'T (degC)', 'rho (g/m**3)', 'Day sin']
MAX_EPOCHS, OUT_STEPS, CONV_WIDTH = 3, 8, 3


def _weather(n=300, seed=5):
    rng = np.random.RandomState(seed)
    t = np.arange(n)
    day = np.sin(t * 2 * np.pi / 24)
    temp = 10 + 5 * day + np.cumsum(rng.randn(n)) * 0.2
    return np.column_stack([990 + rng.randn(n), temp, 1200 - 3 * temp + rng.randn(n), day]).astype("float32")


def time_series(replicas, shuffle=True):
    data = _weather()
    column_indices = {name: i for i, name in enumerate(COLUMNS)}
    n = len(data)
    train_df, val_df, test_df = data[0:int(n * 0.7)], data[int(n * 0.7):int(n * 0.9)], data[int(n * 0.9):]
    num_features = data.shape[1]
    train_mean, train_std = train_df.mean(0), train_df.std(0)
    train_df = (train_df - train_mean) / train_std
    val_df = (val_df - train_mean) / train_std
    test_df = (test_df - train_mean) / train_std

    class WindowGenerator():
        def __init__(self, input_width, label_width, shift, train_df=train_df, val_df=val_df, test_df=test_df,
                     label_columns=None):
            self.train_df, self.val_df, self.test_df = train_df, val_df, test_df
            self.label_columns = label_columns
            if label_columns is not None:
                self.label_columns_indices = {name: i for i, name in enumerate(label_columns)}
            self.column_indices = {name: i for i, name in enumerate(COLUMNS)}   # train_df.columns
            self.input_width, self.label_width, self.shift = input_width, label_width, shift
            self.total_window_size = input_width + shift
            self.input_slice = slice(0, input_width)
            self.input_indices = np.arange(self.total_window_size)[self.input_slice]
            self.label_start = self.total_window_size - self.label_width
            self.labels_slice = slice(self.label_start, None)
            self.label_indices = np.arange(self.total_window_size)[self.labels_slice]

        def __repr__(self):
            return '\n'.join([f'Total window size: {self.total_window_size}',
                              f'Input indices: {self.input_indices}',
                              f'Label indices: {self.label_indices}',
                              f'Label column name(s): {self.label_columns}'])

        def split_window(self, features):
            inputs = features[:, self.input_slice, :]
            labels = features[:, self.labels_slice, :]
            if self.label_columns is not None:
                labels = tf.stack([labels[:, :, self.column_indices[name]] for name in self.label_columns],
                                  axis=-1)
            inputs.set_shape([None, self.input_width, None])
            labels.set_shape([None, self.label_width, None])
            return inputs, labels

        def make_dataset(self, data):
            data = np.array(data, dtype=np.float32)
            ds = tf.keras.utils.timeseries_dataset_from_array(
                data=data, targets=None, sequence_length=self.total_window_size, sequence_stride=1,
                shuffle=shuffle, batch_size=32, )
            ds = ds.map(self.split_window)
            return ds

        @property
        def train(self):
            return self.make_dataset(self.train_df)

        @property
        def val(self):
            return self.make_dataset(self.val_df)

        @property
        def test(self):
            return self.make_dataset(self.test_df)

        @property
        def example(self):
            result = getattr(self, '_example', None)
            if result is None:
                result = next(iter(self.train))
                self._example = result
            return result

    out = {}
    w2 = WindowGenerator(input_width=6, label_width=1, shift=1, label_columns=['T (degC)'])
    out["w2"] = repr(w2)
    example_window = tf.stack([np.array(train_df[:w2.total_window_size]),
                               np.array(train_df[100:100 + w2.total_window_size]),
                               np.array(train_df[200:200 + w2.total_window_size])])
    example_inputs, example_labels = w2.split_window(example_window)
    out["split"] = [list(example_window.shape), list(example_inputs.shape), list(example_labels.shape),
                    rnd(example_labels[:, 0, 0], 4)]
    out["element_spec"] = [list(s.shape) for s in w2.train.element_spec]
    for example_inputs, example_labels in w2.train.take(1):
        out["batch"] = [list(example_inputs.shape), list(example_labels.shape)]

    single_step_window = WindowGenerator(input_width=1, label_width=1, shift=1, label_columns=['T (degC)'])
    wide_window = WindowGenerator(input_width=24, label_width=24, shift=1, label_columns=['T (degC)'])

    class Baseline(tf.keras.Model):
        def __init__(self, label_index=None):
            super().__init__()
            self.label_index = label_index

        def call(self, inputs):
            if self.label_index is None:
                return inputs
            result = inputs[:, :, self.label_index]
            return result[:, :, tf.newaxis]

    val_performance, performance, histories = {}, {}, {}

    def compile_and_fit(model, window, patience=2):
        early_stopping = tf.keras.callbacks.EarlyStopping(monitor='val_loss', patience=patience, mode='min')
        with scope(replicas):
            model.compile(loss=tf.keras.losses.MeanSquaredError(), optimizer=tf.keras.optimizers.Adam(),
                          metrics=[tf.keras.metrics.MeanAbsoluteError()])
        return model.fit(window.train, epochs=MAX_EPOCHS, validation_data=window.val,
                         callbacks=[early_stopping], verbose=0)

    def run(name, model, window, build_shape=None):
        if build_shape is not None:   # not in the page: built (in the scope) so its weights can be set
            with scope(replicas):
                model(np.zeros(build_shape, "float32"))
                deterministic(model, scale=0.1)
        if model.trainable_variables:
            h = compile_and_fit(model, window)
            histories[name] = {k: rnd(v, 4) for k, v in sorted(h.history.items())}
        else:
            with scope(replicas):
                model.compile(loss=tf.keras.losses.MeanSquaredError(),
                              metrics=[tf.keras.metrics.MeanAbsoluteError()])
        val_performance[name] = rnd(list(model.evaluate(window.val, return_dict=True, verbose=0).values()), 4)
        performance[name] = rnd(model.evaluate(window.test, verbose=0), 4)
        out.setdefault("copies_agree", []).append(copies_agree(model.trainable_variables))
        return model

    with scope(replicas):
        baseline = Baseline(label_index=column_indices['T (degC)'])
    run('Baseline', baseline, single_step_window)
    out["baseline_wide"] = list(baseline(wide_window.example[0]).shape)
    with scope(replicas):
        linear = tf.keras.Sequential([tf.keras.layers.Dense(units=1)])
    run('Linear', linear, single_step_window, (1, 1, num_features))
    out["linear_kernel"] = rnd(linear.layers[0].kernel[:, 0].numpy(), 4)
    with scope(replicas):
        dense = tf.keras.Sequential([
            tf.keras.layers.Dense(units=64, activation='relu'),
            tf.keras.layers.Dense(units=64, activation='relu'),
            tf.keras.layers.Dense(units=1)
        ])
    run('Dense', dense, single_step_window, (1, 1, num_features))
    conv_window = WindowGenerator(input_width=CONV_WIDTH, label_width=1, shift=1, label_columns=['T (degC)'])
    with scope(replicas):
        multi_step_dense = tf.keras.Sequential([
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(units=32, activation='relu'),
            tf.keras.layers.Dense(units=32, activation='relu'),
            tf.keras.layers.Dense(units=1),
            tf.keras.layers.Reshape([1, -1]),
        ])
    run('Multi step dense', multi_step_dense, conv_window, (1, CONV_WIDTH, num_features))
    with scope(replicas):
        conv_model = tf.keras.Sequential([
            tf.keras.layers.Conv1D(filters=32, kernel_size=(CONV_WIDTH,), activation='relu'),
            tf.keras.layers.Dense(units=32, activation='relu'),
            tf.keras.layers.Dense(units=1),
        ])
    run('Conv', conv_model, conv_window, (1, CONV_WIDTH, num_features))
    LABEL_WIDTH = 24
    wide_conv_window = WindowGenerator(input_width=LABEL_WIDTH + (CONV_WIDTH - 1), label_width=LABEL_WIDTH,
                                       shift=1, label_columns=['T (degC)'])
    out["conv_wide"] = list(conv_model(wide_conv_window.example[0]).shape)
    with scope(replicas):
        lstm_model = tf.keras.models.Sequential([
            tf.keras.layers.LSTM(32, return_sequences=True),
            tf.keras.layers.Dense(units=1)
        ])
    run('LSTM', lstm_model, wide_window, (1, 24, num_features))

    class ResidualWrapper(tf.keras.Model):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def call(self, inputs, *args, **kwargs):
            delta = self.model(inputs, *args, **kwargs)
            return inputs + delta

    all_wide = WindowGenerator(input_width=24, label_width=24, shift=1)
    with scope(replicas):
        residual_lstm = ResidualWrapper(tf.keras.Sequential([
            tf.keras.layers.LSTM(32, return_sequences=True),
            tf.keras.layers.Dense(num_features, kernel_initializer=tf.initializers.zeros())
        ]))
    run('Residual LSTM', residual_lstm, all_wide, (1, 24, num_features))
    multi_window = WindowGenerator(input_width=OUT_STEPS, label_width=OUT_STEPS, shift=OUT_STEPS)

    class MultiStepLastBaseline(tf.keras.Model):
        def call(self, inputs):
            return tf.tile(inputs[:, -1:, :], [1, OUT_STEPS, 1])

    class RepeatBaseline(tf.keras.Model):
        def call(self, inputs):
            return inputs

    with scope(replicas):
        last_baseline, repeat_baseline = MultiStepLastBaseline(), RepeatBaseline()
    run('Last', last_baseline, multi_window)
    run('Repeat', repeat_baseline, multi_window)
    with scope(replicas):
        multi_linear_model = tf.keras.Sequential([
            tf.keras.layers.Lambda(lambda x: x[:, -1:, :]),
            tf.keras.layers.Dense(OUT_STEPS * num_features, kernel_initializer=tf.initializers.zeros()),
            tf.keras.layers.Reshape([OUT_STEPS, num_features])
        ])
    run('Multi linear', multi_linear_model, multi_window, (1, OUT_STEPS, num_features))
    with scope(replicas):
        multi_conv_model = tf.keras.Sequential([
            tf.keras.layers.Lambda(lambda x: x[:, -CONV_WIDTH:, :]),
            tf.keras.layers.Conv1D(32, activation='relu', kernel_size=(CONV_WIDTH)),
            tf.keras.layers.Dense(OUT_STEPS * num_features, kernel_initializer=tf.initializers.zeros()),
            tf.keras.layers.Reshape([OUT_STEPS, num_features])
        ])
    run('Multi conv', multi_conv_model, multi_window, (1, OUT_STEPS, num_features))

    class FeedBack(tf.keras.Model):
        def __init__(self, units, out_steps):
            super().__init__()
            self.out_steps = out_steps
            self.units = units
            self.lstm_cell = tf.keras.layers.LSTMCell(units)
            self.lstm_rnn = tf.keras.layers.RNN(self.lstm_cell, return_state=True)
            self.dense = tf.keras.layers.Dense(num_features)

        def warmup(self, inputs):
            x, *state = self.lstm_rnn(inputs)
            prediction = self.dense(x)
            return prediction, state

        def call(self, inputs, training=None):
            predictions = []
            prediction, state = self.warmup(inputs)
            predictions.append(prediction)
            for n in range(1, self.out_steps):
                x = prediction
                x, state = self.lstm_cell(x, states=state, training=training)
                prediction = self.dense(x)
                predictions.append(prediction)
            predictions = tf.stack(predictions)
            predictions = tf.transpose(predictions, [1, 0, 2])
            return predictions

    with scope(replicas):
        feedback_model = FeedBack(units=16, out_steps=OUT_STEPS)
        prediction, state = feedback_model.warmup(multi_window.example[0])   # builds its layers: in the scope
    out["warmup"] = [list(prediction.shape), len(state)]
    out["feedback_shape"] = list(feedback_model(multi_window.example[0]).shape)
    run('AR LSTM', feedback_model, multi_window, (1, OUT_STEPS, num_features))
    out["val_performance"], out["performance"] = val_performance, performance
    out["histories"] = histories
    return out


def time_series_no_shuffle(replicas):
    return time_series(replicas, shuffle=False)


PROGRAMS = []
REPLICATED = [time_series, time_series_no_shuffle]
