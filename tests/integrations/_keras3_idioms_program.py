"""Keras 3 idioms around ``fit`` on one device and on multidev's MirroredStrategy (2 logical CPUs).

``python tests/integrations/_keras3_idioms_program.py [idiom ...]`` prints one JSON dict
``{"1": {idiom: observation}, "2": {...}}``: each idiom as plain Keras 3 (no strategy: the reference)
and with the model built in ``MirroredStrategy(["/cpu:0", "/cpu:1"]).scope()``. An observation is what
the program sees (weights, history, returned values) in full precision, or the exception's type and
message. ``keras.config.set_floatx("float64")``: 2 replicas must give the reference to reassociation.
The weights start equal (set from numpy), the data is fixed and ``shuffle=False``.
"""

import contextlib
import os
import sys

os.environ["KERAS_BACKEND"] = "torch"
import keras  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import multidev as md  # noqa: E402

md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
keras.config.set_floatx("float64")
from tests.integrations._keras3_idiom_runner import num, run_idioms  # noqa: E402
K, L = keras, keras.layers
F = "float64"
rng = np.random.RandomState(0)
X = rng.randn(10, 4)
W_TRUE = np.array([[1.0], [-2.0], [0.5], [0.3]])
Y = X @ W_TRUE + 0.1
YC = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0, 1], "int64")
XV = rng.randn(6, 4)
YV = XV @ W_TRUE
SW = np.linspace(0.5, 2.0, 10)
W1 = np.arange(12).reshape(4, 3) / 10.0 - 0.5
B1 = np.array([0.1, -0.1, 0.05])
W2 = np.arange(3).reshape(3, 1) / 5.0 - 0.2
W2C = np.arange(9).reshape(3, 3) / 7.0 - 0.5
STRATEGY = {}


def scope(replicas):
    if replicas == 1:
        return contextlib.nullcontext()
    if "s" not in STRATEGY:
        STRATEGY["s"] = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    return STRATEGY["s"].scope()


def regression_model():
    model = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh"), L.Dense(1)])
    model.set_weights([W1, B1, W2, np.zeros(1)])
    return model


def classifier():
    model = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh"), L.Dense(3, activation="softmax")])
    model.set_weights([W1, B1, W2C, np.zeros(3)])
    return model



def observe(model, history=None, **extra):
    out = {"w": [num(w) for w in model.get_weights()]}
    if history is not None:
        out["h"] = {k: num(v) for k, v in sorted(history.history.items())}
    return {**out, **extra}


def trained(replicas, optimizer=None, loss="mse", model=None, x=X, y=Y, compile_options=None, **fit):
    with scope(replicas):
        model = model or regression_model()
        model.compile(optimizer=optimizer or K.optimizers.SGD(0.1), loss=loss, **(compile_options or {}))
    fit = {"batch_size": 4, "epochs": 2, "shuffle": False, "verbose": 0, **fit}
    fit = {k: v for k, v in fit.items() if v is not None}
    history = model.fit(x, y, **fit)
    return model, history


def fit_plain(r):          # 10 examples, batch 4: the last batch has 2 (one per replica)
    return observe(*trained(r))


def fit_batch3(r):         # batches of 3 split [2, 1]; the last one (1 example) [1, 0]
    return observe(*trained(r, batch_size=3))


def sample_weight(r):
    return observe(*trained(r, sample_weight=SW, validation_data=(XV, YV, SW[:6])))


def class_weight_weighted_metrics(r):
    with scope(r):
        model = classifier()
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                      weighted_metrics=["accuracy"])
    history = model.fit(X, YC, batch_size=4, epochs=2, shuffle=False, verbose=0, class_weight={0: 1.0, 1: 2.0, 2: 0.5},
                        validation_data=(XV, YC[:6]), validation_batch_size=3)
    evaluated = model.evaluate(X, YC, batch_size=3, return_dict=True, verbose=0)
    return observe(model, history, evaluate=evaluated)


def validation_split(r):
    return observe(*trained(r, validation_split=0.2))


def validation_dataloader(r):
    data = torch.utils.data.TensorDataset(torch.as_tensor(XV), torch.as_tensor(YV))
    return observe(*trained(r, validation_data=torch.utils.data.DataLoader(data, batch_size=4)))


def validation_generator(r):
    def batches():
        while True:
            for i in range(0, 6, 4):
                yield XV[i:i + 4], YV[i:i + 4]

    return observe(*trained(r, validation_data=batches(), validation_steps=2))


class Batches(keras.utils.PyDataset):
    def __init__(self, x, y, batch, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch = x, y, batch

    def __len__(self):
        return -(-len(self.x) // self.batch)

    def __getitem__(self, i):
        return self.x[i * self.batch:(i + 1) * self.batch], self.y[i * self.batch:(i + 1) * self.batch]


def pydataset_train_and_validation(r):
    return observe(*trained(r, x=Batches(X, Y, 3), y=None, batch_size=None, shuffle=None,
                            validation_data=Batches(XV, YV, 4)))


def dataloader_steps_per_epoch(r):
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.as_tensor(X), torch.as_tensor(Y)),
                                       batch_size=4)
    return observe(*trained(r, x=data, y=None, batch_size=None, shuffle=None, steps_per_epoch=2, epochs=3))


def generator_steps_per_epoch(r):
    def batches():
        while True:
            for i in range(0, 10, 4):
                yield X[i:i + 4], Y[i:i + 4]

    return observe(*trained(r, x=batches(), y=None, batch_size=None, shuffle=None, steps_per_epoch=2, epochs=3))


def initial_epoch(r):
    model, history = trained(r, epochs=3, initial_epoch=1)
    return observe(model, history, epochs=list(history.epoch))


def early_stopping_restores_best(r):
    stop = K.callbacks.EarlyStopping(monitor="val_loss", patience=1, restore_best_weights=True)
    model, history = trained(r, optimizer=K.optimizers.SGD(0.5), epochs=8, validation_data=(XV, YV), callbacks=[stop])
    return observe(model, history, stopped=stop.stopped_epoch)


def checkpoint_weights_best_relative(r):
    save = K.callbacks.ModelCheckpoint("ckpt/model.weights.h5", save_weights_only=True, save_best_only=True,
                                       monitor="val_loss")
    trained(r, optimizer=K.optimizers.SGD(0.5), epochs=4, validation_data=(XV, YV), callbacks=[save])
    with scope(r):
        model = regression_model()
    model.load_weights("ckpt/model.weights.h5")
    return observe(model)


def checkpoint_keras_file(r):
    save = K.callbacks.ModelCheckpoint("m/epoch{epoch}.keras")
    model, _ = trained(r, optimizer=K.optimizers.Adam(0.1), epochs=2, callbacks=[save])
    loaded = K.saving.load_model("m/epoch1.keras")
    return observe(loaded, files=sorted(os.listdir("m")),
                   slots=[num(v) for v in loaded.optimizer.variables], iterations=num(model.optimizer.iterations))


def lr_callbacks(r):
    plateau = K.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=0, min_delta=100.0, min_lr=0.01)
    schedule = K.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.8 if epoch > 1 else lr)
    seen = []

    class ReadsRate(K.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append([epoch, sorted(logs), num(self.model.optimizer.learning_rate),
                         num(self.model.optimizer.iterations)])

    return observe(*trained(r, epochs=4, callbacks=[plateau, schedule, ReadsRate()]), seen=seen)


def csv_logger(r):
    trained(r, validation_data=(XV, YV), callbacks=[K.callbacks.CSVLogger("log.csv")])
    with open("log.csv") as f:
        rows = f.read().splitlines()
    return {"header": rows[0], "rows": [[float(v) for v in row.split(",")] for row in rows[1:]]}


def terminate_on_nan(r):
    y = Y.copy()
    y[5] = np.nan
    model, history = trained(r, y=y, epochs=3, callbacks=[K.callbacks.TerminateOnNaN()])
    return {"epochs": list(history.epoch), "loss_is_nan": [bool(np.isnan(v)) for v in history.history["loss"]]}


def backup_and_restore(r):
    class Interrupt(K.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 2:
                raise RuntimeError("preempted")

    backup = K.callbacks.BackupAndRestore("backup")
    with scope(r):
        model = regression_model()
        model.compile(optimizer=K.optimizers.Adam(0.05), loss="mse")
    try:
        model.fit(X, Y, batch_size=4, epochs=4, shuffle=False, verbose=0, callbacks=[backup, Interrupt()])
    except RuntimeError:
        pass
    with scope(r):
        model = regression_model()
        model.compile(optimizer=K.optimizers.Adam(0.05), loss="mse")
    history = model.fit(X, Y, batch_size=4, epochs=4, shuffle=False, verbose=0, callbacks=[backup])
    return observe(model, history, epochs=list(history.epoch), iterations=num(model.optimizer.iterations))


def single_batch_methods(r):
    with scope(r):
        model = regression_model()
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    out = {"train": num(model.train_on_batch(X[:3], Y[:3])),
           "train_dict": {k: num(v) for k, v in model.train_on_batch(X[3:], Y[3:], sample_weight=SW[3:],
                                                                     return_dict=True).items()},
           "test": num(model.test_on_batch(XV[:5], YV[:5])),
           "predict_on_batch": num(model.predict_on_batch(XV[:5]))}
    return observe(model, **out)


def evaluate_predict_uneven(r):
    with scope(r):
        model = regression_model()
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    return {"evaluate": model.evaluate(X, Y, batch_size=4, return_dict=True, verbose=0),
            "evaluate_weighted": model.evaluate(X, Y, sample_weight=SW, batch_size=3, return_dict=True, verbose=0),
            "evaluate_list": model.evaluate(XV, YV, batch_size=5, verbose=0),
            "predict": num(model.predict(X, batch_size=3, verbose=0))}


def two_outputs_loss_weights(r):
    with scope(r):
        inputs = K.Input((4,))
        hidden = L.Dense(3, activation="tanh")(inputs)
        model = K.Model(inputs, [L.Dense(1, name="a")(hidden), L.Dense(1, name="b")(hidden)])
        model.set_weights([W1, B1, W2, np.zeros(1), -W2, np.ones(1)])
        model.compile(optimizer=K.optimizers.SGD(0.1), loss=["mse", "mae"], loss_weights=[1.0, 0.5],
                      metrics=[["mae"], ["mse"]])
    history = model.fit(X, [Y, -Y], batch_size=4, epochs=2, shuffle=False, verbose=0, validation_data=(XV, [YV, -YV]))
    return observe(model, history)


def dict_inputs(r):
    with scope(r):
        a, b = K.Input((2,), name="a"), K.Input((2,), name="b")
        hidden = L.Dense(3, activation="tanh")(L.Concatenate()([a, b]))
        model = K.Model({"a": a, "b": b}, L.Dense(1)(hidden))
        model.set_weights([W1, B1, W2, np.zeros(1)])
    return observe(*trained(r, model=model, x={"a": X[:, :2], "b": X[:, 2:]}, batch_size=3))


def batch_norm(r, synchronized=False, batch_size=4, n=10):
    with scope(r):
        model = K.Sequential([K.Input((4,)), L.Dense(3), L.BatchNormalization(synchronized=synchronized), L.Dense(1)])
        model.set_weights([W1, B1, np.ones(3), np.zeros(3), np.zeros(3), np.ones(3), W2, np.zeros(1)])
    model, history = trained(r, model=model, x=X[:n], y=Y[:n], validation_data=(XV, YV), batch_size=batch_size)
    return observe(model, history)


def batch_norm_synchronized(r):   # (Keras on torch refuses synchronized=True; on one device it means nothing)
    return batch_norm(r, synchronized=r > 1)


def batch_norm_synchronized_odd(r):   # 9 examples in batches of 3: every batch split [2, 1]
    return batch_norm(r, synchronized=r > 1, batch_size=3, n=9)


def batch_norm_synchronized_uneven(r):   # batches of 3 split [2, 1]: the last one (1 example) leaves a replica empty
    return batch_norm(r, synchronized=r > 1, batch_size=3)


def unfreeze_recompiled(r):   # fine-tuning: train the head on a frozen base, unfreeze, recompile, train all
    with scope(r):
        base = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh")])
        model = K.Sequential([K.Input((4,)), base, L.Dense(1)])
        model.set_weights([W1, B1, W2, np.zeros(1)])
        base.trainable = False
        model.compile(optimizer=K.optimizers.Adam(0.05), loss="mse")
    first = model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    base.trainable = True
    with scope(r):
        model.compile(optimizer=K.optimizers.Adam(0.01), loss="mse")
    history = model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0, validation_freq=2,
                        validation_data=(XV, YV))
    return observe(model, history, first=num(first.history["loss"]))


def compiled_with(r, **options):
    return observe(*trained(r, compile_options=options))


def run_eagerly(r):
    return compiled_with(r, run_eagerly=True)


def steps_per_execution(r):
    return compiled_with(r, steps_per_execution=2)


def frozen_nested_model_recompiled(r):
    with scope(r):
        base = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh")])
        model = K.Sequential([K.Input((4,)), base, L.Dense(1)])
        model.set_weights([W1, B1, W2, np.zeros(1)])
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    base.trainable = False
    with scope(r):
        model.compile(optimizer=K.optimizers.Adam(0.05), loss="mse")
    history = model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return observe(model, history, trainable=len(model.trainable_weights))


def dropout_seeded(r, **dropout):   # batches of 3: masks of 3 rows split [2, 1]
    dropout = {"seed": 3, **dropout}
    with scope(r):
        model = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh"), L.Dropout(0.5, **dropout), L.Dense(1)])
        model.set_weights([W1, B1, W2, np.zeros(1)])
    return observe(*trained(r, model=model, batch_size=3))


def dropout_unseeded(r):   # torch's global generator (seeded by keras.utils.set_random_seed)
    return dropout_seeded(r, seed=None)


def dropout_noise_shape(r):
    return dropout_seeded(r, seed=5, noise_shape=(None, 1))


def custom_train_step_dropout(r):
    with scope(r):
        inputs = K.Input((4,))
        hidden = L.Dropout(0.3, seed=2)(L.Dense(3, activation="tanh")(inputs))
        model = custom_model_class()(inputs, L.Dense(1)(hidden))
        model.set_weights([W1, B1, W2, np.zeros(1)])
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    return observe(model, model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0))


def random_in_a_layer(r):
    class Noise(L.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.seed = K.random.SeedGenerator(7)

        def call(self, x, training=False):
            return x + K.random.normal(keras.ops.shape(x), stddev=0.1, seed=self.seed) if training else x

    with scope(r):
        model = K.Sequential([K.Input((4,)), Noise(), L.Dense(3, activation="tanh"), L.Dense(1)])
        model.set_weights([W1, B1, W2, np.zeros(1)])
    return observe(*trained(r, model=model))


def custom_model_class():
    """keras.io's torch custom train_step (p08's form)."""

    class CustomModel(K.Model):
        def train_step(self, data):
            x, y = data
            self.zero_grad()
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
            loss.backward()
            trainable_weights = [v for v in self.trainable_weights]
            gradients = [v.value.grad for v in trainable_weights]
            with torch.no_grad():
                self.optimizer.apply(gradients, trainable_weights)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

    return CustomModel


def custom_train_step(r):
    CustomModel = custom_model_class()
    with scope(r):
        inputs = K.Input((4,))
        hidden = L.Dense(3, activation="tanh")(inputs)
        model = CustomModel(inputs, L.Dense(1)(hidden))
        model.set_weights([W1, B1, W2, np.zeros(1)])
        model.compile(optimizer=K.optimizers.Adam(0.05), loss="mse", metrics=["mae"])
    return observe(model, model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0))


def custom_train_step_synchronized_bn(r, batch_size=4):
    with scope(r):
        inputs = K.Input((4,))
        hidden = L.BatchNormalization(synchronized=r > 1)(L.Dense(3)(inputs))
        model = custom_model_class()(inputs, L.Dense(1)(hidden))
        model.set_weights([W1, B1, np.ones(3), np.zeros(3), np.zeros(3), np.ones(3), W2, np.zeros(1)])
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    return observe(model, model.fit(X[:8], Y[:8], batch_size=batch_size, epochs=2, shuffle=False, verbose=0))


def custom_train_step_synchronized_bn_odd(r):   # batches of 3 split [2, 1]: refused on 2 replicas
    return custom_train_step_synchronized_bn(r, batch_size=3)


OPTIMIZERS = {
    "clipnorm": lambda: K.optimizers.SGD(0.1, clipnorm=0.05),
    "clipvalue": lambda: K.optimizers.SGD(0.1, clipvalue=0.02),
    "global_clipnorm": lambda: K.optimizers.SGD(0.1, global_clipnorm=0.05),
    "adamw_weight_decay": lambda: K.optimizers.AdamW(0.05, weight_decay=0.1),
    "sgd_weight_decay_nesterov": lambda: K.optimizers.SGD(0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
    "adam_exponential_decay": lambda: K.optimizers.Adam(K.optimizers.schedules.ExponentialDecay(0.1, 2, 0.5)),
    "gradient_accumulation": lambda: K.optimizers.SGD(0.1, momentum=0.5, gradient_accumulation_steps=2),
    "adam_ema": lambda: K.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.5),
    "adam_ema_overwrite": lambda: K.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.5, ema_overwrite_frequency=2),
}


def optimizers(r):
    out = {}
    for name, make in OPTIMIZERS.items():
        with scope(r):
            optimizer = make()
        model, history = trained(r, optimizer=optimizer, epochs=3)
        out[name] = observe(model, history, slots=[num(v) for v in model.optimizer.variables])
    return out


def optimizer_outside_scope(r):   # compile(optimizer=...) in the scope, the optimizer made before it
    adam = K.optimizers.Adam(0.1)
    scaled = K.optimizers.LossScaleOptimizer(K.optimizers.SGD(0.1), initial_scale=4.0, dynamic_growth_steps=2)
    out = {}
    for name, optimizer in (("adam", adam), ("loss_scale", scaled)):
        model, history = trained(r, optimizer=optimizer, epochs=2)
        out[name] = observe(model, history, variables=[num(v) for v in optimizer.variables])
    return out


def mixed_bfloat16_loss_scale(r):
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        with scope(r):
            optimizer = K.optimizers.LossScaleOptimizer(K.optimizers.SGD(0.1))
            model = regression_model()
        model, history = trained(r, optimizer=optimizer, model=model)
        return observe(model, history, scale=num(optimizer.dynamic_scale))
    finally:
        keras.config.set_dtype_policy(F)


IDIOMS = [fit_plain, fit_batch3, sample_weight, class_weight_weighted_metrics, validation_split, validation_dataloader,
          validation_generator, pydataset_train_and_validation, dataloader_steps_per_epoch, generator_steps_per_epoch,
          initial_epoch, early_stopping_restores_best, checkpoint_weights_best_relative, checkpoint_keras_file,
          lr_callbacks, csv_logger, terminate_on_nan, backup_and_restore, single_batch_methods,
          evaluate_predict_uneven, two_outputs_loss_weights, run_eagerly, steps_per_execution,
          frozen_nested_model_recompiled, unfreeze_recompiled, dict_inputs, batch_norm, batch_norm_synchronized,
          batch_norm_synchronized_odd, batch_norm_synchronized_uneven, dropout_seeded, dropout_unseeded,
          dropout_noise_shape, custom_train_step_dropout, random_in_a_layer,
          custom_train_step, custom_train_step_synchronized_bn, custom_train_step_synchronized_bn_odd, optimizers,
          optimizer_outside_scope, mixed_bfloat16_loss_scale]



if __name__ == "__main__":
    run_idioms(IDIOMS, sys.argv[1:])
