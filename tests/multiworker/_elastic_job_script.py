"""The training script of ``_elastic_job`` (run by torchrun's workers; see that module for its settings)."""

import faulthandler
import json
import os
import signal
import sys
import time

import numpy as np
import torch

import multidev as md
from multidev import keras

faulthandler.register(signal.SIGUSR1, all_threads=True)   # where a stuck worker is: kill -USR1 <pid>
env = os.environ
out = env["JOB_DIR"]
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(
        timeout_seconds=float(env.get("JOB_TIMEOUT", "30"))))
rank = strategy.extended.worker_index
print(f"HOST {rank} {env.get('GLOO_SOCKET_IFNAME', '-')} {env.get('TORCHELASTIC_RESTART_COUNT', '0')}", flush=True)
torch.manual_seed(1 + 10 * rank)      # workers seeded differently: the chief's values win

rng = np.random.RandomState(0)
x = rng.randn(48, 4).astype("float32")
y = (x @ rng.randn(4, 1)).astype("float32")
with strategy.scope():
    layers = [keras.layers.Dense(8, activation="relu", input_shape=(4,))]
    if env.get("JOB_DROPOUT") == "1":
        layers.append(keras.layers.Dropout(0.25))
    model = keras.models.Sequential(layers + [keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.01), "mse")


class Kill(keras.callbacks.Callback):
    """SIGKILLs this worker after batch ``at`` of its fit, once per job (a marker file guards it)."""

    def __init__(self, spec):
        super().__init__()
        who, at = spec.split(":")
        self.active, self.at, self.seen = int(who) == rank, int(at), 0
        self.marker = os.path.join(out, f"killed-{who}")

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.active and self.seen == self.at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            print(f"worker {rank} kills itself after batch {self.seen}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


class Pause(keras.callbacks.Callback):
    """After batch ``at``, says so in a file and waits for JOB_DIR/go (at most 120 s)."""

    def __init__(self, at):
        super().__init__()
        self.at, self.seen = int(at), 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen != self.at:
            return
        open(os.path.join(out, f"paused-{rank}"), "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(out, "go")) and time.monotonic() < deadline:
            time.sleep(0.05)


callbacks = []
if env.get("JOB_BACKUP_FREQ"):
    callbacks.append(keras.callbacks.BackupAndRestore(os.path.join(out, "backup"),
                                                      save_freq=int(env["JOB_BACKUP_FREQ"])))
if env.get("JOB_KILL"):
    callbacks.append(Kill(env["JOB_KILL"]))
if env.get("JOB_PAUSE"):
    callbacks.append(Pause(env["JOB_PAUSE"]))
try:
    model.fit(x, y, batch_size=8, epochs=3, shuffle=True, verbose=0, callbacks=callbacks)
except Exception as err:
    print(f"FAILED {time.time():.3f} {type(err).__name__}: {err}", flush=True)
    sys.exit(3)
print("RESULT " + json.dumps({"rank": rank, "weights": [w.tolist() for w in model.get_weights()],
                              "iterations": int(model.optimizer.iterations)}), flush=True)
