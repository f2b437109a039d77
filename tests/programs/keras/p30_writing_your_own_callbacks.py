"""keras.io/guides/writing_your_own_callbacks: every hook of a ``CustomCallback`` through ``fit`` (with
``validation_split``), ``evaluate`` and ``predict``; ``LossAndErrorPrintingCallback`` reading ``logs["loss"]``
per batch and ``logs["mean_absolute_error"]`` per epoch; ``EarlyStoppingAtMinLoss`` (``get_weights`` at the
best epoch, ``self.model.stop_training = True``, ``set_weights`` back); ``CustomLearningRateScheduler``
(reads ``self.model.optimizer.learning_rate``, assigns the scheduled rate back).

Instrumented: the callbacks' prints are recorded (every hook's log keys and values, under the hook's
name), so a hook that is not called, a log key that is missing, or a value that is one replica's
differs from one device. Shrunk: 32 features (not MNIST's 784), 128 training and 64 test examples,
batches of 32 (not 128/64), the early-stopping run at most 12 epochs and the scheduler's 8 (schedule
at epochs 2, 4, 6).
"""

import numpy as np

SOURCE = "https://keras.io/guides/writing_your_own_callbacks/"


def get_model(keras):
    model = keras.Sequential()
    model.add(keras.layers.Dense(1))
    model.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.1), loss="mean_squared_error",
                  metrics=["mean_absolute_error"])
    return model


def _record(printed, hook, logs):
    """What the guide prints: the hook's log keys (here: one entry per key) and their values."""
    printed.setdefault(hook + ".calls", []).append(1.0)
    for key, value in (logs or {}).items():
        printed.setdefault(f"{hook}.{key}", []).extend(np.asarray(value, dtype="float64").ravel().tolist())


def run(keras, strategy, workdir, scale=1):
    printed = {}

    class CustomCallback(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            _record(printed, "on_train_begin", logs)

        def on_train_end(self, logs=None):
            _record(printed, "on_train_end", logs)

        def on_epoch_begin(self, epoch, logs=None):
            _record(printed, "on_epoch_begin", logs)

        def on_epoch_end(self, epoch, logs=None):
            _record(printed, "on_epoch_end", logs)

        def on_test_begin(self, logs=None):
            _record(printed, "on_test_begin", logs)

        def on_test_end(self, logs=None):
            _record(printed, "on_test_end", logs)

        def on_predict_begin(self, logs=None):
            _record(printed, "on_predict_begin", logs)

        def on_predict_end(self, logs=None):
            _record(printed, "on_predict_end", logs)

        def on_train_batch_begin(self, batch, logs=None):
            _record(printed, "on_train_batch_begin", logs)

        def on_train_batch_end(self, batch, logs=None):
            _record(printed, "on_train_batch_end", logs)

        def on_test_batch_begin(self, batch, logs=None):
            _record(printed, "on_test_batch_begin", logs)

        def on_test_batch_end(self, batch, logs=None):
            _record(printed, "on_test_batch_end", logs)

        def on_predict_batch_begin(self, batch, logs=None):
            _record(printed, "on_predict_batch_begin", logs)

        def on_predict_batch_end(self, batch, logs=None):
            _record(printed, "on_predict_batch_end", logs)

    losses = {"train_batch": [], "test_batch": [], "epoch": [], "epoch_mae": []}

    class LossAndErrorPrintingCallback(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            losses["train_batch"].append(logs["loss"])   # print("Up to batch {}, the average loss is ...")

        def on_test_batch_end(self, batch, logs=None):
            losses["test_batch"].append(logs["loss"])

        def on_epoch_end(self, epoch, logs=None):
            losses["epoch"].append(logs["loss"])
            losses["epoch_mae"].append(logs["mean_absolute_error"])

    stopped = {}

    class EarlyStoppingAtMinLoss(keras.callbacks.Callback):
        """Stop training when the loss is at its min, i.e. the loss stops decreasing."""

        def __init__(self, patience=0):
            super().__init__()
            self.patience = patience
            # best_weights to store the weights at which the minimum loss occurs.
            self.best_weights = None

        def on_train_begin(self, logs=None):
            self.wait = 0   # The number of epoch it has waited when loss is no longer minimum.
            self.stopped_epoch = 0   # The epoch the training stops at.
            self.best = np.inf   # Initialize the best as infinity.

        def on_epoch_end(self, epoch, logs=None):
            current = logs.get("loss")
            if np.less(current, self.best):
                self.best = current
                self.wait = 0
                # Record the best weights if current results is better (less).
                self.best_weights = self.model.get_weights()
            else:
                self.wait += 1
                if self.wait >= self.patience:
                    self.stopped_epoch = epoch
                    self.model.stop_training = True
                    print("Restoring model weights from the end of the best epoch.")
                    self.model.set_weights(self.best_weights)

        def on_train_end(self, logs=None):
            stopped["epoch"] = float(self.stopped_epoch)
            stopped["best"] = float(self.best)

    class CustomLearningRateScheduler(keras.callbacks.Callback):
        def __init__(self, schedule):
            super().__init__()
            self.schedule = schedule

        def on_epoch_begin(self, epoch, logs=None):
            if not hasattr(self.model.optimizer, "learning_rate"):
                raise ValueError('Optimizer must have a "learning_rate" attribute.')
            # Get the current learning rate from model's optimizer.
            lr = self.model.optimizer.learning_rate
            # Call schedule function to get the scheduled learning rate.
            scheduled_lr = self.schedule(epoch, lr)
            # Set the value back to the optimizer before this epoch starts
            self.model.optimizer.learning_rate = scheduled_lr
            rates.append(float(np.array(scheduled_lr)))

    lr_schedule_table = [(2, 0.05), (4, 0.01), (6, 0.005)]

    def lr_schedule(epoch, lr):
        """Helper function to retrieve the scheduled learning rate based on epoch."""
        if epoch < lr_schedule_table[0][0] or epoch > lr_schedule_table[-1][0]:
            return lr
        for i in range(len(lr_schedule_table)):
            if epoch == lr_schedule_table[i][0]:
                return lr_schedule_table[i][1]
        return lr

    rng = np.random.RandomState(0)
    x_train = rng.randint(0, 256, (128 * scale, 32)).astype("float32") / 255.0
    y_train = rng.randint(0, 10, 128 * scale).astype("float32")
    x_test = rng.randint(0, 256, (64, 32)).astype("float32") / 255.0
    y_test = rng.randint(0, 10, 64).astype("float32")
    out = {}
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = get_model(keras)
    model.fit(x_train, y_train, batch_size=32, epochs=1, verbose=0, validation_split=0.5,
              callbacks=[CustomCallback()])
    out["evaluate"] = model.evaluate(x_test, y_test, batch_size=32, verbose=0, callbacks=[CustomCallback()])
    out["predict"] = model.predict(x_test, batch_size=32, verbose=0, callbacks=[CustomCallback()])

    model.fit(x_train, y_train, batch_size=32, epochs=2, verbose=0, callbacks=[LossAndErrorPrintingCallback()])
    out["evaluate_printed"] = model.evaluate(x_test, y_test, batch_size=32, verbose=0,
                                             callbacks=[LossAndErrorPrintingCallback()])

    with strategy.scope():
        model = get_model(keras)
    history = model.fit(x_train, y_train, batch_size=32, epochs=12, verbose=0,
                        callbacks=[LossAndErrorPrintingCallback(), EarlyStoppingAtMinLoss()])
    out["early_stopping"] = {"history": history.history, **stopped, "predict": model.predict(x_test[:4], verbose=0)}

    rates = []
    with strategy.scope():
        model = get_model(keras)
    history = model.fit(x_train, y_train, batch_size=32, epochs=8, verbose=0,
                        callbacks=[LossAndErrorPrintingCallback(), CustomLearningRateScheduler(lr_schedule)])
    out["scheduled"] = {"history": history.history, "rates": rates, "final_rate": float(
        np.array(model.optimizer.learning_rate))}
    return {"_model": model, "printed": printed, "losses": losses, **out}
