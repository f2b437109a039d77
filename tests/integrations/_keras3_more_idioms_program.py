"""More Keras 3 idioms on one device and on multidev's MirroredStrategy (2 logical CPUs).

``python tests/integrations/_keras3_more_idioms_program.py [idiom ...]`` prints one JSON dict
``{"1": {idiom: observation}, "2": {...}}`` as ``_keras3_idioms_program.py`` does (same conventions:
float64, weights set from numpy, fixed data, ``shuffle=False``): noise and dropout layers, loss
reductions, losses added in ``call``, overridden ``compute_loss``/``test_step``/``predict_step``, trackers
with sample weights, stateful metrics, more optimizers, saving in one scope and loading in another.
"""

import contextlib
import os
import sys

os.environ["KERAS_BACKEND"] = "torch"
import keras  # noqa: E402
import numpy as np  # noqa: E402

import multidev as md  # noqa: E402

md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
keras.config.set_floatx("float64")
from tests.integrations._keras3_idiom_runner import num, run_idioms  # noqa: E402
K, L, ops = keras, keras.layers, keras.ops
rng = np.random.RandomState(0)
X = rng.randn(10, 4)
W_TRUE = np.array([[1.0], [-2.0], [0.5], [0.3]])
Y = X @ W_TRUE + 0.1
YB = (Y > 0).astype("float64")
XV = rng.randn(6, 4)
YV = XV @ W_TRUE
SW = np.linspace(0.5, 2.0, 10)
W1 = np.arange(12).reshape(4, 3) / 10.0 - 0.5
B1 = np.array([0.1, -0.1, 0.05])
W2 = np.arange(3).reshape(3, 1) / 5.0 - 0.2
STRATEGY = {}


def scope(replicas, key="s"):
    if replicas == 1:
        return contextlib.nullcontext()
    if key not in STRATEGY:
        STRATEGY[key] = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    return STRATEGY[key].scope()



def observe(model, history=None, **extra):
    out = {"w": [num(w) for w in model.get_weights()]}
    if history is not None:
        out["h"] = {k: num(v) for k, v in sorted(history.history.items())}
    return {**out, **extra}


def with_middle(r, middle=(), model_class=None, final_activation=None, weights=()):
    """Dense(3, tanh) -> the layers ``middle()`` makes -> Dense(1), built in the scope with fixed weights."""
    with scope(r):
        inputs = K.Input((4,))
        hidden = L.Dense(3, activation="tanh")(inputs)
        for layer in (middle() if middle else ()):
            hidden = layer(hidden)
        model = (model_class or K.Model)(inputs, L.Dense(1, activation=final_activation)(hidden))
        model.set_weights([W1, B1, *weights, W2, np.zeros(1)])
    return model


def fitted(r, model, optimizer=None, loss="mse", metrics=None, x=X, y=Y, **fit):
    with scope(r):
        model.compile(optimizer=optimizer() if optimizer else K.optimizers.SGD(0.1), loss=loss, metrics=metrics)
    fit = {"batch_size": 4, "epochs": 2, "shuffle": False, "verbose": 0, **fit}
    return model, model.fit(x, y, **fit)


# --- randomness -------------------------------------------------------------------------------------

def gaussian_noise(r):
    return observe(*fitted(r, with_middle(r, lambda: [L.GaussianNoise(0.2, seed=3)]), batch_size=3))


def gaussian_dropout(r):
    return observe(*fitted(r, with_middle(r, lambda: [L.GaussianDropout(0.3, seed=3)]), batch_size=3))


def alpha_dropout(r):
    return observe(*fitted(r, with_middle(r, lambda: [L.AlphaDropout(0.3, seed=3)]), batch_size=3))


def spatial_dropout(r):   # one mask entry per example and channel
    out = {}
    for seed in (3, None):
        middle = lambda: [L.Reshape((1, 3)), L.SpatialDropout1D(0.5, seed=seed), L.Flatten()]  # noqa: E731
        out[str(seed)] = observe(*fitted(r, with_middle(r, middle), batch_size=3))
    middle = lambda: [L.Reshape((1, 1, 3)), L.SpatialDropout2D(0.4, seed=4), L.Flatten()]  # noqa: E731
    out["2d"] = observe(*fitted(r, with_middle(r, middle), batch_size=3))
    return out


# --- losses -----------------------------------------------------------------------------------------

def loss_reduction_sum(r):
    model, history = fitted(r, with_middle(r), loss=K.losses.MeanSquaredError(reduction="sum"),
                            optimizer=lambda: K.optimizers.SGD(0.01), batch_size=3, validation_data=(XV, YV))
    return observe(model, history, evaluate=model.evaluate(X, Y, batch_size=4, verbose=0))


def loss_function(r):   # a plain function as the loss, with sample weights
    def plain(y_true, y_pred):
        return ops.mean(ops.abs(y_true - y_pred), axis=-1)

    return observe(*fitted(r, with_middle(r), loss=plain, sample_weight=SW, batch_size=3))


def mean_with_sample_weight(r):   # divided by each replica's own weight sum (as on TensorFlow's strategies)
    loss = K.losses.MeanAbsoluteError(reduction="mean_with_sample_weight")
    return observe(*fitted(r, with_middle(r), loss=loss, sample_weight=SW, batch_size=3))


def activity_regularization(r):   # add_loss in call: a sum over the batch
    return observe(*fitted(r, with_middle(r, lambda: [L.ActivityRegularization(l1=0.05, l2=0.02)]), batch_size=3))


def kernel_regularizer(r):
    with scope(r):
        model = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh", kernel_regularizer=K.regularizers.L2(0.1)),
                              L.Dense(1, bias_regularizer=K.regularizers.L1(0.2))])
        model.set_weights([W1, B1, W2, np.zeros(1)])
    return observe(*fitted(r, model, batch_size=3))


def add_loss_mean_in_layer(r):   # add_loss of a batch mean (keras.io's "losses in call")
    class Penalty(L.Layer):
        def call(self, x):
            self.add_loss(0.1 * ops.mean(ops.square(x)))
            return x

    return observe(*fitted(r, with_middle(r, lambda: [Penalty()]), batch_size=3))


def compute_loss_override(r):   # keras.io: override compute_loss, not train_step
    class Model(K.Model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.tracker = K.metrics.Mean(name="custom_loss")

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            loss = ops.mean(ops.square(y_pred - y)) + 0.01 * ops.mean(ops.square(y_pred))
            self.tracker.update_state(loss)
            return loss

        @property
        def metrics(self):
            return [self.tracker]

    model, history = fitted(r, with_middle(r, model_class=Model), batch_size=3)
    return observe(model, history, evaluate=model.evaluate(XV, YV, batch_size=4, verbose=0, return_dict=True))


# --- custom steps -----------------------------------------------------------------------------------

def custom_steps_model_class():
    import torch

    class Model(K.Model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.loss_tracker = K.metrics.Mean(name="loss")
            self.mae = K.metrics.MeanAbsoluteError(name="mae")

        def train_step(self, data):
            x, y, sw = keras.utils.unpack_x_y_sample_weight(data)
            self.zero_grad()
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred, sample_weight=sw)
            loss.backward()
            grads = [v.value.grad for v in self.trainable_weights]
            with torch.no_grad():
                self.optimizer.apply(grads, self.trainable_weights)
            self.loss_tracker.update_state(loss)
            self.mae.update_state(y, y_pred, sample_weight=sw)
            return {m.name: m.result() for m in self.metrics}

        def test_step(self, data):
            x, y, sw = keras.utils.unpack_x_y_sample_weight(data)
            y_pred = self(x, training=False)
            self.loss_tracker.update_state(self.compute_loss(y=y, y_pred=y_pred, sample_weight=sw))
            self.mae.update_state(y, y_pred, sample_weight=sw)
            return {m.name: m.result() for m in self.metrics}

        def predict_step(self, data):
            x, _, _ = keras.utils.unpack_x_y_sample_weight(data)
            return {"y": self(x, training=False), "twice": 2 * self(x, training=False)}

        @property
        def metrics(self):
            return [self.loss_tracker, self.mae]

    return Model


def custom_train_test_predict_steps(r):
    model, history = fitted(r, with_middle(r, model_class=custom_steps_model_class()), sample_weight=SW,
                            batch_size=5, validation_data=(XV, YV, SW[:6]),
                            validation_batch_size=3)
    return observe(model, history, evaluate=model.evaluate(X, Y, sample_weight=SW, batch_size=4, verbose=0),
                   predict=model.predict(XV[:5], batch_size=2, verbose=0))


def tracker_updated_per_example(r):   # a Mean fed per-example values with weights in train_step
    import torch

    class Model(K.Model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.err = K.metrics.Mean(name="err")
            self.total = K.metrics.Sum(name="total")

        def train_step(self, data):
            x, y = data
            self.zero_grad()
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
            loss.backward()
            with torch.no_grad():
                self.optimizer.apply([v.value.grad for v in self.trainable_weights], self.trainable_weights)
            self.err.update_state(ops.abs(y - y_pred), sample_weight=ops.abs(x[:, :1]))
            self.total.update_state(y_pred)   # per example (a scalar would count once a step)
            return {"err": self.err.result(), "total": self.total.result()}

        @property
        def metrics(self):
            return [self.err, self.total]

    return observe(*fitted(r, with_middle(r, model_class=Model), batch_size=5))


def custom_train_step_sum_loss(r):   # keras.io's torch train_step with a reduction="sum" loss
    model, history = fitted(r, with_middle(r, model_class=custom_steps_model_class()), batch_size=5,
                            loss=K.losses.MeanSquaredError(reduction="sum"), optimizer=lambda: K.optimizers.SGD(0.01))
    return observe(model, history, evaluate=model.evaluate(X, Y, batch_size=4, verbose=0))


# --- metrics ----------------------------------------------------------------------------------------

def stateful_metrics(r):
    metrics = [K.metrics.AUC(name="auc"), K.metrics.Precision(name="p"), K.metrics.Recall(name="rec"),
               K.metrics.BinaryAccuracy(name="acc"), K.metrics.F1Score(threshold=0.5, name="f1"),
               K.metrics.R2Score(name="r2")]
    model, history = fitted(r, with_middle(r, final_activation="sigmoid"), loss="binary_crossentropy",
                            metrics=metrics, y=YB, batch_size=3, validation_data=(XV, (YV > 0).astype("float64")))
    return observe(model, history, evaluate=model.evaluate(X, YB, sample_weight=SW, batch_size=3, verbose=0,
                                                           return_dict=True))


# --- state ------------------------------------------------------------------------------------------

def layer_norm_fit_twice_predict(r):
    model = with_middle(r, lambda: [L.LayerNormalization()], weights=[np.ones(3), np.zeros(3)])
    model, first = fitted(r, model, optimizer=lambda: K.optimizers.Adam(0.05))
    second = model.fit(X, Y, batch_size=3, epochs=2, shuffle=False, verbose=0)
    return observe(model, second, first=num(first.history["loss"]), predict=model.predict(X[:7], batch_size=4,
                                                                                          verbose=0))


def save_then_load_in_another_scope(r):
    model, _ = fitted(r, with_middle(r), optimizer=lambda: K.optimizers.Adam(0.05))
    model.save("m.keras")
    with scope(r, key="other"):
        loaded = K.saving.load_model("m.keras")
    history = loaded.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    return observe(loaded, history, iterations=num(loaded.optimizer.iterations))


# --- optimizers -------------------------------------------------------------------------------------

def adamw_exclude():
    optimizer = K.optimizers.AdamW(0.05, weight_decay=0.5)
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    return optimizer


OPTIMIZERS = {
    "adamw_exclude_from_weight_decay": adamw_exclude,
    "adafactor": lambda: K.optimizers.Adafactor(0.1),
    "ftrl": lambda: K.optimizers.Ftrl(0.1, l1_regularization_strength=0.01),
    "lamb": lambda: K.optimizers.Lamb(0.05),
    "muon": lambda: K.optimizers.Muon(0.05),
    "rmsprop_centered": lambda: K.optimizers.RMSprop(0.05, centered=True, momentum=0.5),
    "nadam_clipnorm": lambda: K.optimizers.Nadam(0.05, clipnorm=0.1),
    "lion_schedule": lambda: K.optimizers.Lion(K.optimizers.schedules.CosineDecay(0.05, 4, warmup_target=0.1,
                                                                                  warmup_steps=2)),
    "sgd_inverse_time_decay": lambda: K.optimizers.SGD(K.optimizers.schedules.InverseTimeDecay(0.1, 1, 0.5)),
    "adam_accumulation_ema": lambda: K.optimizers.Adam(0.05, gradient_accumulation_steps=2, use_ema=True),
}


def optimizers(r):
    out = {}
    for name, make in OPTIMIZERS.items():
        try:
            model, history = fitted(r, with_middle(r), optimizer=make, epochs=3)
            out[name] = observe(model, history, slots=[num(v) for v in model.optimizer.variables])
        except Exception as e:
            out[name] = {"raises": type(e).__name__, "message": str(e)[:300]}
    return out


# --- more inputs and state --------------------------------------------------------------------------

def shuffled(r):   # fit's default shuffle, with an unseeded Dropout and validation_split drawing from torch's RNG
    middle = lambda: [L.Dropout(0.3)]  # noqa: E731
    model, history = fitted(r, with_middle(r, middle), shuffle=True, batch_size=3, epochs=3, validation_split=0.2)
    return observe(model, history)


def torch_tensors_and_apply_gradients(r):   # torch tensors to fit; a train_step with TF's apply_gradients form
    import torch

    class Model(K.Model):
        def train_step(self, data):
            x, y = data
            self.zero_grad()
            loss = self.compute_loss(y=y, y_pred=self(x, training=True))
            loss.backward()
            with torch.no_grad():
                self.optimizer.apply_gradients(zip([v.value.grad for v in self.trainable_weights],
                                                   self.trainable_weights))
            return {"loss": loss}

    return observe(*fitted(r, with_middle(r, model_class=Model), x=torch.as_tensor(X), y=torch.as_tensor(Y)))


def normalization_adapted(r):
    with scope(r):
        norm = L.Normalization()
        norm.adapt(X)
        model = K.Sequential([K.Input((4,)), norm, L.Dense(3, activation="tanh"), L.Dense(1)])
        model.set_weights([*norm.get_weights(), W1, B1, W2, np.zeros(1)])
    return observe(*fitted(r, model, batch_size=3))


def dict_outputs_and_losses(r):
    with scope(r):
        inputs = K.Input((4,))
        hidden = L.Dense(3, activation="tanh")(inputs)
        model = K.Model(inputs, {"reg": L.Dense(1, name="reg")(hidden),
                                 "cls": L.Dense(1, activation="sigmoid", name="cls")(hidden)})
        model.set_weights([W1, B1, W2, np.zeros(1), -W2, np.zeros(1)])
    model, history = fitted(r, model, loss={"reg": K.losses.Huber(reduction="sum"), "cls": "binary_crossentropy"},
                            y={"reg": Y, "cls": YB}, metrics={"cls": ["accuracy"]}, batch_size=3,
                            optimizer=lambda: K.optimizers.SGD(0.05))
    return observe(model, history, evaluate=model.evaluate(X, {"reg": Y, "cls": YB}, batch_size=4, verbose=0,
                                                           return_dict=True))


def recurrent_dropout_and_masking(r):
    xs = np.tile(X[:, :, None], (1, 1, 2))
    xs[::3, 3:] = 0.0
    with scope(r):
        model = K.Sequential([K.Input((4, 2)), L.Masking(0.0),
                              L.GRU(3, dropout=0.2, recurrent_dropout=0.2, seed=5), L.Dense(1)])
        model.set_weights([np.arange(18).reshape(2, 9) / 20.0 - 0.4, np.arange(27).reshape(3, 9) / 30.0 - 0.4,
                           np.zeros((2, 9)), W2, np.zeros(1)])
    return observe(*fitted(r, model, x=xs, batch_size=3))


def attention_dropout(r):   # keras.layers.Attention draws its dropout itself (backend.random.dropout)
    out = {}
    for seed in (3, None):
        with scope(r):
            inputs = K.Input((4,))
            seq = L.Reshape((2, 3))(L.Dense(6, activation="tanh")(inputs))
            attended = L.Attention(dropout=0.5, seed=seed)([seq, seq])
            model = K.Model(inputs, L.Dense(1)(L.Flatten()(attended)))
            model.set_weights([np.arange(24).reshape(4, 6) / 20.0 - 0.5, np.zeros(6),
                               np.arange(6).reshape(6, 1) / 5.0 - 0.5, np.zeros(1)])
        out[str(seed)] = observe(*fitted(r, model, batch_size=3))
    return out


def summed_state_weight(r):   # keras.io's ComputeSum: a non-trainable weight (aggregation "sum") added to in call
    class ComputeSum(L.Layer):
        def build(self, shape):
            self.total = self.add_weight(shape=(shape[-1],), initializer=K.initializers.Constant(1.0),
                                         trainable=False, aggregation="sum")

        def call(self, x, training=False):
            if training:
                self.total.assign_add(ops.sum(x, axis=0))
            return x

    with scope(r):
        layer = ComputeSum()
        inputs = K.Input((4,))
        model = K.Model(inputs, L.Dense(1)(layer(L.Dense(3, activation="tanh")(inputs))))
        initial = num(layer.total)
        model.set_weights([W1, B1, np.asarray(initial), W2, np.zeros(1)])
    return observe(*fitted(r, model, batch_size=3), initial=initial, total=num(layer.total))


class Shuffled(keras.utils.PyDataset):   # keras.io's PyDataset: batches, with weights, reshuffled at each epoch's end
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.order, self.rng = np.arange(10), np.random.RandomState(1)

    def __len__(self):
        return 4

    def __getitem__(self, i):
        rows = self.order[i * 3:(i + 1) * 3]
        return X[rows], Y[rows], SW[rows]

    def on_epoch_end(self):
        self.rng.shuffle(self.order)


def pydataset_on_epoch_end_threads(r):
    return observe(*fitted(r, with_middle(r), x=Shuffled(workers=2), y=None, batch_size=None, shuffle=None,
                           epochs=3))


def custom_metric_class(r):   # keras.io's CategoricalTruePositives-style metric with add_variable and weights
    class WeightedHits(K.metrics.Metric):
        def __init__(self, **kwargs):
            super().__init__(name="hits", **kwargs)
            self.hits = self.add_variable(shape=(), initializer="zeros", name="hits")

        def update_state(self, y_true, y_pred, sample_weight=None):
            hits = ops.cast(ops.abs(y_true - y_pred) < 1.0, "float64")
            if sample_weight is not None:
                hits = hits * ops.reshape(ops.cast(sample_weight, "float64"), (-1, 1))
            self.hits.assign_add(ops.sum(hits))

        def result(self):
            return self.hits

        def reset_state(self):
            self.hits.assign(0.0)

    model, history = fitted(r, with_middle(r), metrics=[WeightedHits()], sample_weight=SW, batch_size=3,
                            validation_data=(XV, YV))
    return observe(model, history, evaluate=model.evaluate(X, Y, sample_weight=SW, batch_size=4, verbose=0))


def frozen_whole_model(r):   # nothing to train: fit still logs the loss
    model = with_middle(r)
    model.trainable = False
    return observe(*fitted(r, model, optimizer=lambda: K.optimizers.Adam(0.1)))


def loss_scale_and_ema_in_train_step(r):   # torch-style step with scale_loss, LossScaleOptimizer, EMA
    import torch

    class Model(K.Model):
        def train_step(self, data):
            x, y = data
            self.zero_grad()
            loss = self.compute_loss(y=y, y_pred=self(x, training=True))
            self.optimizer.scale_loss(loss).backward()
            with torch.no_grad():
                self.optimizer.apply([v.value.grad for v in self.trainable_weights], self.trainable_weights)
            return {"loss": loss}

    def optimizer():
        return K.optimizers.LossScaleOptimizer(K.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.5),
                                               initial_scale=8.0, dynamic_growth_steps=2)

    model, history = fitted(r, with_middle(r, model_class=Model), optimizer=optimizer, epochs=3, batch_size=5)
    return observe(model, history, scale=num(model.optimizer.dynamic_scale))


def custom_loop_gradients_kept(r):   # a custom loop reading v.value.grad after optimizer.apply, never zeroing them
    model = with_middle(r)
    with scope(r):
        optimizer = K.optimizers.SGD(0.01)
    seen = []

    def step(x, y):
        loss = K.losses.MeanSquaredError(reduction="sum")(y, model(x, training=True))
        loss.backward()
        grads = [v.value.grad for v in model.trainable_weights]
        optimizer.apply(grads, model.trainable_weights)
        return ops.stack([ops.sum(g) for g in grads])   # after apply: still this replica's own sums

    for _ in range(3):
        if r == 1:
            seen.append(num(step(torch_x(X[:8]), torch_x(Y[:8]))))
        else:
            def replica_step():
                i = int(md.distribute.get_replica_context().replica_id_in_sync_group)
                return step(torch_x(X[4 * i:4 * i + 4]), torch_x(Y[4 * i:4 * i + 4]))
            per_replica = STRATEGY["s"].run(replica_step)
            seen.append(num(STRATEGY["s"].reduce("SUM", per_replica, axis=None)))
    return observe(model, grad_sums=seen)


def torch_x(a):
    import torch
    return torch.as_tensor(a)


# --- torch modules in a Keras model -----------------------------------------------------------------

def torch_linear():
    import torch

    linear = torch.nn.Linear(4, 3).double()
    with torch.no_grad():
        linear.weight.copy_(torch.as_tensor(W1.T))
        linear.bias.copy_(torch.as_tensor(B1))
    return linear


def torch_module_wrapper(r):   # keras.io's torch interop: TorchModuleWrapper, and a module as a layer's attribute
    import torch

    class Block(L.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.linear = torch_linear()   # Keras wraps it (TorchModuleWrapper)

        def call(self, x):
            return torch.tanh(self.linear(x))

    out = {}
    for name, first in (("wrapper", lambda: [L.TorchModuleWrapper(torch_linear()), L.Activation("tanh")]),
                        ("attribute", lambda: [Block()])):
        with scope(r):
            model = K.Sequential([K.Input((4,)), *first(), L.Dense(1)])
            model(X[:1])   # builds the Dense (the torch module has no symbolic output shape)
            model.layers[-1].set_weights([W2, np.zeros(1)])
            model.compile(optimizer=K.optimizers.Adam(0.05), loss="mse")
        history = model.fit(X, Y, batch_size=3, epochs=2, shuffle=False, verbose=0)
        model.save_weights("m.weights.h5")
        model.load_weights("m.weights.h5")
        out[name] = observe(model, history, evaluate=model.evaluate(XV, YV, batch_size=4, verbose=0),
                            predict=model.predict(XV[:5], batch_size=2, verbose=0))
    with scope(r):   # keras.io's torch-style train_step/test_step on it
        inputs = K.Input((4,))
        hidden = L.Activation("tanh")(L.TorchModuleWrapper(torch_linear(), output_shape=(None, 3))(inputs))
        model = custom_steps_model_class()(inputs, L.Dense(1)(hidden))
        model(X[:1])
        model.layers[-1].set_weights([W2, np.zeros(1)])
    out["custom_train_step"] = observe(*fitted(r, model, batch_size=5, validation_data=(XV, YV),
                                               validation_batch_size=3))
    return out


def torch_module_made_outside_the_scope(r):   # refused on replicas: its forward would read one plain parameter
    linear = torch_linear()
    with scope(r):
        model = K.Sequential([K.Input((4,)), L.TorchModuleWrapper(linear), L.Dense(1)])
    return observe(*fitted(r, model))


IDIOMS = [gaussian_noise, gaussian_dropout, alpha_dropout, spatial_dropout, loss_reduction_sum,
          loss_function, mean_with_sample_weight,
          activity_regularization, kernel_regularizer,
          add_loss_mean_in_layer, compute_loss_override, custom_train_test_predict_steps,
          tracker_updated_per_example, custom_train_step_sum_loss, stateful_metrics, layer_norm_fit_twice_predict,
          save_then_load_in_another_scope, optimizers, shuffled, torch_tensors_and_apply_gradients,
          normalization_adapted, dict_outputs_and_losses, recurrent_dropout_and_masking,
          attention_dropout, summed_state_weight, pydataset_on_epoch_end_threads, custom_metric_class,
          frozen_whole_model, loss_scale_and_ema_in_train_step, custom_loop_gradients_kept, torch_module_wrapper, torch_module_made_outside_the_scope]



if __name__ == "__main__":
    run_idioms(IDIOMS, sys.argv[1:])
