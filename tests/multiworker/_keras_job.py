"""A small Keras training script for multi-worker tests, configured by environment variables.

JOB_DIR: where backups, checkpoints and logs go. JOB_TIMEOUT: collective timeout (s).
JOB_DROPOUT=1: add a Dropout layer. JOB_BACKUP_FREQ: BackupAndRestore save_freq ("epoch" or N).
JOB_CRASH="<worker>:<batch>": that worker calls os._exit(17) after that global batch (counted over
the fit). JOB_HANG="<worker>:<batch>": that worker sleeps 120 s there instead. JOB_WRITERS=1:
ModelCheckpoint, CSVLogger and TensorBoard. Prints ``RESULT {...}`` (weights, chief flag) at the
end, or ``FAILED <ErrorType>: <message>`` and exits 3 when fit raises.
"""

SCRIPT = r'''
import json, os, sys, time, numpy as np, torch, multidev as md
from multidev import keras

env = os.environ
out = env["JOB_DIR"]
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(
        timeout_seconds=float(env.get("JOB_TIMEOUT", "30"))))
worker = strategy.extended.worker_index
torch.manual_seed(1 + 10 * worker)      # workers seeded differently: the chief's values win

rng = np.random.RandomState(0)
x = rng.randn(40, 4).astype("float32")
y = (x @ rng.randn(4, 1)).astype("float32")
with strategy.scope():
    layers = [keras.layers.Dense(8, activation="relu", input_shape=(4,))]
    if env.get("JOB_DROPOUT") == "1":
        layers.append(keras.layers.Dropout(0.25))
    model = keras.models.Sequential(layers + [keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.01), "mse", metrics=["mae"])


class Fault(keras.callbacks.Callback):
    def __init__(self, spec, action):
        super().__init__()
        who, at = (spec.split(":") if spec else ("-1", "0"))
        self.active, self.at, self.seen, self.action = int(who) == worker, int(at), 0, action

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.active and self.seen == self.at:
            self.action()


def crash():
    print(f"worker {worker} exiting on purpose", flush=True)
    os._exit(17)


callbacks = []
if env.get("JOB_BACKUP_FREQ"):
    freq = env["JOB_BACKUP_FREQ"]
    callbacks.append(keras.callbacks.BackupAndRestore(os.path.join(out, "backup"),
                                                      save_freq=freq if freq == "epoch" else int(freq)))
if env.get("JOB_WRITERS") == "1":
    callbacks += [keras.callbacks.ModelCheckpoint(os.path.join(out, "ckpt", "w.{epoch:02d}.weights.h5"), save_weights_only=True),
                  keras.callbacks.CSVLogger(os.path.join(out, "log.csv")),
                  keras.callbacks.TensorBoard(os.path.join(out, "tb"))]
callbacks += [Fault(env.get("JOB_CRASH"), crash), Fault(env.get("JOB_HANG"), lambda: time.sleep(120))]
try:
    model.fit(x, y, batch_size=8, epochs=3, shuffle=True, verbose=2, callbacks=callbacks)
except Exception as err:
    print(f"FAILED {type(err).__name__}: {err}", flush=True)
    sys.exit(3)
print("RESULT " + json.dumps({"weights": [w.tolist() for w in model.get_weights()],
                              "chief": strategy.extended.should_checkpoint,
                              "iterations": int(model.optimizer.iterations)}), flush=True)
'''


def reference_weights():
    """The same training in one process without a strategy (the chief's seed, same global batches)."""
    import numpy as np
    import torch

    from multidev import keras

    keras.backend.clear_session()
    torch.manual_seed(1)
    rng = np.random.RandomState(0)
    x = rng.randn(40, 4).astype("float32")
    y = (x @ rng.randn(4, 1)).astype("float32")
    model = keras.models.Sequential([keras.layers.Dense(8, activation="relu", input_shape=(4,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.01), "mse", metrics=["mae"])
    model.fit(x, y, batch_size=8, epochs=3, shuffle=True, verbose=0)
    return model.get_weights()
