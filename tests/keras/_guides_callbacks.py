"""Guide "Writing your own callbacks": every hook in order with its logs, stop_training, schedules."""

import numpy as np

from _guides_common import K, L, X, Y, deterministic, history, scope


def _model(r, lr=0.1):
    with scope(r):
        model = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh"), L.Dense(1)])
        deterministic(model)
        model.compile(optimizer=K.optimizers.SGD(lr), loss="mean_squared_error", metrics=["mean_absolute_error"])
    return model


def _logs(logs):
    return {k: round(float(v), 5) for k, v in sorted((logs or {}).items()) if np.ndim(v) == 0}


class CustomCallback(K.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seen = []

    def _note(self, hook, index, logs):
        keys = sorted(logs or {})
        self.seen.append([hook, index, keys, _logs(logs)])


for _hook in ("train_begin", "train_end", "test_begin", "test_end", "predict_begin", "predict_end"):
    setattr(CustomCallback, f"on_{_hook}", lambda self, logs=None, _h=_hook: self._note(_h, None, logs))
for _hook in ("epoch_begin", "epoch_end", "train_batch_begin", "train_batch_end", "test_batch_begin",
              "test_batch_end", "predict_batch_begin", "predict_batch_end"):
    setattr(CustomCallback, f"on_{_hook}", lambda self, i, logs=None, _h=_hook: self._note(_h, i, logs))


def every_hook(r):
    model = _model(r)
    callback = CustomCallback()
    model.fit(X, Y, batch_size=4, epochs=2, verbose=0, shuffle=False, validation_data=(X[:6], Y[:6]),
              validation_batch_size=4, callbacks=[callback])
    model.evaluate(X, Y, batch_size=4, verbose=0, callbacks=[callback])
    model.predict(X, batch_size=4, verbose=0, callbacks=[callback])
    return callback.seen


class EarlyStoppingAtMinLoss(K.callbacks.Callback):
    """Stop training when the loss is at its min, i.e. the loss stops decreasing."""

    def __init__(self, patience=0):
        super().__init__()
        self.patience = patience
        self.best_weights = None

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = np.inf

    def on_epoch_end(self, epoch, logs=None):
        current = logs.get("loss")
        if np.less(current, self.best):
            self.best = current
            self.wait = 0
            self.best_weights = self.model.get_weights()
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = epoch
                self.model.stop_training = True
                self.model.set_weights(self.best_weights)


def early_stopping_at_min_loss(r):
    model = _model(r, lr=0.3)
    stop = EarlyStoppingAtMinLoss()
    h = model.fit(X, Y, batch_size=4, epochs=30, verbose=0, shuffle=False, callbacks=[stop])
    return {"h": history(h), "stopped": stop.stopped_epoch,
            "w": [round(float(np.sum(w)), 5) for w in model.get_weights()]}


class StopAtBatch(K.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 1:
            self.model.stop_training = True


def stop_training_mid_epoch(r):
    model = _model(r)
    h = model.fit(X, Y, batch_size=2, epochs=3, verbose=0, shuffle=False, callbacks=[StopAtBatch()])
    return {"h": history(h), "iterations": int(np.asarray(model.optimizer.iterations))}


class CustomLearningRateScheduler(K.callbacks.Callback):
    def __init__(self, schedule):
        super().__init__()
        self.schedule = schedule

    def on_epoch_begin(self, epoch, logs=None):
        if not hasattr(self.model.optimizer, "learning_rate"):
            raise ValueError('Optimizer must have a "learning_rate" attribute.')
        lr = self.model.optimizer.learning_rate
        scheduled_lr = self.schedule(epoch, lr)
        self.model.optimizer.learning_rate = scheduled_lr


LR_SCHEDULE = [(1, 0.05), (2, 0.01)]


def lr_schedule(epoch, lr):
    if epoch < LR_SCHEDULE[0][0] or epoch > LR_SCHEDULE[-1][0]:
        return lr
    for i in range(len(LR_SCHEDULE)):
        if epoch == LR_SCHEDULE[i][0]:
            return LR_SCHEDULE[i][1]
    return lr


def learning_rate_schedulers(r):
    model = _model(r)
    h = model.fit(X, Y, batch_size=4, epochs=4, verbose=0, shuffle=False,
                  callbacks=[CustomLearningRateScheduler(lr_schedule)])
    out = {"custom": {"h": history(h), "lr": round(float(np.asarray(model.optimizer.learning_rate)), 6)}}
    model = _model(r)
    h = model.fit(X, Y, batch_size=4, epochs=3, verbose=0, shuffle=False,
                  callbacks=[K.callbacks.LearningRateScheduler(lambda epoch: 0.1 / (epoch + 1), verbose=0)])
    out["builtin"] = history(h)
    return out


SNIPPETS = [every_hook, early_stopping_at_min_loss, stop_training_mid_epoch, learning_rate_schedulers]
