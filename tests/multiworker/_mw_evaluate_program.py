"""``model.evaluate`` (and ``predict``) under MultiWorkerMirroredStrategy on datasets of each auto-shard
policy, for ``tf`` = TensorFlow or multidev, run as one worker of a 2-worker job.

``python _mw_evaluate_program.py tf|md OUT_DIR`` in each worker process (TF_CONFIG set: by
``record_mw_evaluate.py`` for TensorFlow 2.21 with tf-keras 2, by ``multidev launch --workers 2`` for
multidev) writes ``OUT_DIR/worker<i>.json``. With OFF the program's own per-worker data is the point:
each worker evaluates its own examples (worker 1's differ from worker 0's), as a program reading a
file per worker does; DATA/AUTO shard one in-memory dataset. 10 examples in batches of 4 leave a
partial last batch.
"""

import json
import os
import sys

import numpy as np

if sys.argv[1] == "tf":
    import tensorflow as tf
else:
    import multidev as tf

OUT = sys.argv[2]


def data(worker):
    x = (np.arange(20, dtype=np.float32).reshape(10, 2) / 10.0 + worker).astype(np.float32)
    y = (x[:, :1] * 2.0 - x[:, 1:] + 0.5 * worker).astype(np.float32)
    return x, y


def dataset(policy, worker):
    x, y = data(worker if policy == "OFF" else 0)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(4).with_options(options)


def model_in(strategy):
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1, kernel_initializer="ones",
                                                                                 bias_initializer="zeros")])
        model.compile(tf.keras.optimizers.SGD(0.01), "mse", metrics=["mae"])
    return model


class CountBatches(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.batches = 0

    def on_test_batch_end(self, batch, logs=None):
        self.batches += 1

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1


def main():
    tf_config = json.loads(os.environ["TF_CONFIG"])
    worker = tf_config["task"]["index"]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    result = {}
    for policy in ("OFF", "DATA", "AUTO"):
        model = model_in(strategy)
        counter = CountBatches()
        logs = model.evaluate(dataset(policy, worker), verbose=0, return_dict=True, callbacks=[counter])
        result[policy] = {"logs": {k: float(v) for k, v in sorted(logs.items())}, "batches": counter.batches}
    model, counter = model_in(strategy), CountBatches()   # fit without steps_per_epoch reads as many batches
    history = model.fit(dataset("OFF", worker), epochs=1, verbose=0, callbacks=[counter])
    result["fit_OFF"] = {"loss": [float(v) for v in history.history["loss"]], "batches": counter.batches,
                         "kernel": [float(v) for v in np.ravel(model.get_weights()[0])]}
    with open(os.path.join(OUT, f"worker{worker}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
