"""keras.io/examples/vision/forwardforward as printed (``tf.function`` -> ``md.function``, ``xla.dynamic_update_slice``
-> ``ops.slice_update``, ``tf.map_fn`` -> ``ops.map``, ``tf.random.shuffle`` -> ``keras.random.shuffle``): ``FFDense``
layers each holding a ``Dense``, a ``ReLU``, ITS OWN optimizer made in ``__init__`` (``init_optimizer()``) and a
``Mean`` loss metric, whose ``forward_forward`` runs ``num_epochs`` tape steps on the goodness loss of positive and
negative samples and returns ``stop_gradient`` outputs; an ``FFNetwork(keras.Model)`` with no ``call``, two
``keras.Variable(0.0, trainable=False)`` counters, ``self.layer_list = [keras.Input(shape=(dims[0],))]`` grown by
``self.layer_list += [FFDense(...)]``, ``overlay_y_on_x`` writing the label's one-hot of the sample's max into the
first 10 pixels, a ``train_step`` (``@tf.function(jit_compile=False)``) that walks ``self.layers`` training each
``FFDense`` with its own optimizer and ``assign_add``s its loss, returning ``loss_var / loss_count``; an overridden
``predict`` (``ops.vectorized_map`` of ``predict_one_sample``, the label with the best goodness) and
``compile(optimizer=Adam(0.03), loss="mse", jit_compile=False, metrics=[])``, ``fit(train_dataset, epochs=...)``.

MNIST is made up: 4x4 images (28x28) of 10 classes, float64 as ``x_train.astype(float) / 255`` makes them; the
dataset is one batch, as the example's ``batch(60000)``. Shrunk: dims [16, 8, 8] ([784, 500, 500]), 3 inner epochs
(50), 2 epochs (250), 40 training and 10 test images.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/forwardforward/"


def digits(rng, n):
    protos = np.random.RandomState(7).rand(10, 4, 4) * 255
    y = rng.randint(0, 10, n)
    return np.clip(protos[y] + rng.normal(0, 30, (n, 4, 4)), 0, 255), y


def run(keras, strategy, workdir, scale=1):
    ops = keras.ops

    class FFDense(keras.layers.Layer):
        def __init__(self, units, init_optimizer, loss_metric, num_epochs=3, use_bias=True,
                     kernel_initializer="glorot_uniform", bias_initializer="zeros", kernel_regularizer=None,
                     bias_regularizer=None, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(units=units, use_bias=use_bias, kernel_initializer=kernel_initializer,
                                            bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                                            bias_regularizer=bias_regularizer)
            self.relu = keras.layers.ReLU()
            self.optimizer = init_optimizer()
            self.loss_metric = loss_metric
            self.threshold = 1.5
            self.num_epochs = num_epochs

        def call(self, x):
            x_norm = ops.norm(x, ord=2, axis=1, keepdims=True)
            x_norm = x_norm + 1e-4
            x_dir = x / x_norm
            res = self.dense(x_dir)
            return self.relu(res)

        def forward_forward(self, x_pos, x_neg):
            for i in range(self.num_epochs):
                with md.GradientTape() as tape:
                    g_pos = ops.mean(ops.power(self.call(x_pos), 2), 1)
                    g_neg = ops.mean(ops.power(self.call(x_neg), 2), 1)
                    loss = ops.log(1 + ops.exp(ops.concatenate([-g_pos + self.threshold, g_neg - self.threshold],
                                                               0)))
                    mean_loss = ops.cast(ops.mean(loss), dtype="float32")
                    self.loss_metric.update_state([mean_loss])
                gradients = tape.gradient(mean_loss, self.dense.trainable_weights)
                self.optimizer.apply_gradients(zip(gradients, self.dense.trainable_weights))
            return (ops.stop_gradient(self.call(x_pos)), ops.stop_gradient(self.call(x_neg)),
                    self.loss_metric.result())

    class FFNetwork(keras.Model):
        def __init__(self, dims, init_optimizer=lambda: keras.optimizers.Adam(learning_rate=0.03), **kwargs):
            super().__init__(**kwargs)
            self.init_optimizer = init_optimizer
            self.loss_var = keras.Variable(0.0, trainable=False, dtype="float32")
            self.loss_count = keras.Variable(0.0, trainable=False, dtype="float32")
            self.layer_list = [keras.Input(shape=(dims[0],))]
            self.metrics_built = False
            for d in range(len(dims) - 1):
                self.layer_list += [FFDense(dims[d + 1], init_optimizer=self.init_optimizer,
                                            loss_metric=keras.metrics.Mean())]

        @md.function(reduce_retracing=True)
        def overlay_y_on_x(self, data):
            X_sample, y_sample = data
            max_sample = ops.amax(X_sample, axis=0, keepdims=True)
            max_sample = ops.cast(max_sample, dtype="float64")
            X_zeros = ops.zeros([10], dtype="float64")
            X_update = ops.slice_update(X_zeros, [y_sample], max_sample)
            X_sample = ops.slice_update(X_sample, [0], X_update)
            return X_sample, y_sample

        @md.function(reduce_retracing=True)
        def predict_one_sample(self, x):
            goodness_per_label = []
            x = ops.reshape(x, [ops.shape(x)[0] * ops.shape(x)[1]])
            for label in range(10):
                h, label = self.overlay_y_on_x(data=(x, label))
                h = ops.reshape(h, [-1, ops.shape(h)[0]])
                goodness = []
                for layer_idx in range(1, len(self.layer_list)):
                    layer = self.layer_list[layer_idx]
                    h = layer(h)
                    goodness += [ops.mean(ops.power(h, 2), 1)]
                goodness_per_label += [ops.expand_dims(ops.sum(goodness, keepdims=True), 1)]
            goodness_per_label = ops.concatenate(goodness_per_label, 1)
            return ops.cast(ops.argmax(goodness_per_label, 1), dtype="float64")

        def predict(self, data):
            x = data
            preds = list()
            preds = ops.vectorized_map(self.predict_one_sample, x)
            return np.asarray(preds, dtype=int)

        @md.function(jit_compile=False)
        def train_step(self, data):
            x, y = data
            if not self.metrics_built:
                for metric in self.metrics:
                    if hasattr(metric, "build"):
                        metric.build(y, y)
                self.metrics_built = True
            x = ops.reshape(x, [-1, ops.shape(x)[1] * ops.shape(x)[2]])
            x_pos, y = ops.vectorized_map(self.overlay_y_on_x, (x, y))
            random_y = keras.random.shuffle(y)
            x_neg, y = ops.map(self.overlay_y_on_x, (x, random_y))
            h_pos, h_neg = x_pos, x_neg
            for idx, layer in enumerate(self.layers):
                if isinstance(layer, FFDense):
                    h_pos, h_neg, loss = layer.forward_forward(h_pos, h_neg)
                    self.loss_var.assign_add(loss)
                    self.loss_count.assign_add(1.0)
                else:
                    x = layer(x)
            mean_res = ops.divide(self.loss_var, self.loss_count)
            return {"FinalLoss": mean_res}

    rng = np.random.RandomState(0)
    x_train, y_train = digits(rng, 40 * scale)
    x_test, y_test = digits(rng, 10)
    x_train = x_train.astype(float) / 255
    x_test = x_test.astype(float) / 255
    train_dataset = md.data.Dataset.from_tensor_slices((x_train, y_train))
    train_dataset = train_dataset.batch(40 * scale)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = FFNetwork(dims=[16, 8, 8])
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.03), loss="mse", jit_compile=False,
                      metrics=[])
    history = model.fit(train_dataset, epochs=2, verbose=0)
    preds = model.predict(ops.convert_to_tensor(x_test))
    preds = preds.reshape((preds.shape[0], preds.shape[1]))
    return {"_model": model, "history": history.history, "preds": preds, "trained_layers": len(model.layers),
            "loss_count": float(np.asarray(keras.ops.convert_to_numpy(model.loss_count)))}
