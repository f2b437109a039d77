"""``Dataset.zip`` of datasets batched to different sizes (keras.io's semi-supervised SimCLR: 16 unlabeled and 4
labeled rows a step) on multidev, the way TensorFlow 2.21 was recorded running it (zip_split_tensorflow.json).
Run with MULTIDEV_LOGICAL_CPUS=3: MirroredStrategy on cpu:0-1 (2 replicas) and on all 3; prints one JSON line."""

from __future__ import annotations

import json

import numpy as np
import torch

import multidev as md
from multidev import keras

CASES = {"full_16_4": (32, 16, 8, 4), "partial_26_16__7_4": (26, 16, 7, 4)}


def parts(nu, bu, nl, bl):
    unlabeled = md.data.Dataset.from_tensor_slices(
        (np.arange(nu, dtype="float64").reshape(-1, 1), np.arange(nu) * 10)).batch(bu)
    labeled = md.data.Dataset.from_tensor_slices(
        (np.arange(100, 100 + nl, dtype="float64").reshape(-1, 1), np.arange(nl).reshape(-1, 1))).batch(bl)
    return unlabeled, labeled


def zipped(args, off=False):
    ds = md.data.Dataset.zip(parts(*args))
    if off:
        options = md.data.Options()
        options.experimental_distribute.auto_shard_policy = md.data.experimental.AutoShardPolicy.OFF
        ds = ds.with_options(options)
    return ds


def rows(strategy, element):
    return [[int(v) for v in r] for r in strategy.experimental_local_results(
        strategy.run(lambda d: (torch.tensor(d[0][0].shape[0]), torch.tensor(d[1][0].shape[0])), args=(element,)))]


def dict_rows(strategy, element):
    seen = strategy.run(lambda d: {k: torch.tensor(v[0].shape[0]) for k, v in d.items()}, args=(element,))
    return [{k: int(v) for k, v in r.items()} for r in strategy.experimental_local_results(seen)]


def distribute(strategy, args, off=False):
    """Each step: every replica's [[unlabeled x, y], [labeled x, y]] and the rows strategy.run sees."""
    steps = []
    for element in strategy.experimental_distribute_dataset(zipped(args, off)):
        (xu, yu), (xl, yl) = element
        local = [strategy.experimental_local_results(t) for t in (xu, yu, xl, yl)]
        replicas = [[[a.tolist(), b.tolist()], [c.tolist(), d.tolist()]] for a, b, c, d in zip(*local)]
        steps.append({"replicas": replicas, "run_sees_rows": rows(strategy, element)})
    return steps


class TwoLosses(keras.Model):
    """A loss on each part (MeanSquaredError: a per-example mean, divided by the part's global batch)."""

    def __init__(self):
        super().__init__()
        self.w = self.add_weight(shape=(), initializer="ones", dtype="float64", name="w")
        self.v = self.add_weight(shape=(), initializer="ones", dtype="float64", name="v")
        self.mse = keras.losses.MeanSquaredError()
        self.tracker = keras.metrics.Mean(name="ll_mean")
        self.built = True

    def call(self, x):
        return x

    def losses_of(self, data):
        (xu, _), (xl, yl) = data
        lu = self.mse(keras.ops.zeros_like(xu), self.w * xu / 100.0)
        ll = self.mse(keras.ops.cast(yl, "float64"), self.v * xl / 100.0)
        return lu, ll

    def train_step(self, data):
        with md.GradientTape() as tape:
            lu, ll = self.losses_of(data)
            loss = lu + ll
        gradients = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_weights))
        return {"lu": lu, "ll": ll}

    def test_step(self, data):
        _, ll = self.losses_of(data)
        self.tracker.update_state(ll)
        return {"ll_mean": self.tracker.result()}


def fit(strategy, args, epochs=1, distributed=False):
    with strategy.scope():
        model = TwoLosses()
        model.compile(optimizer=keras.optimizers.SGD(0.1))
    data = strategy.experimental_distribute_dataset(zipped(args)) if distributed else zipped(args)
    history = model.fit(data, epochs=epochs, verbose=0)
    evaluated = model.evaluate(zipped(args), verbose=0, return_dict=True)
    return {"w": float(model.w), "v": float(model.v), "history": history.history, "evaluate": evaluated}


def refused(strategy, dataset):
    try:
        for _ in strategy.experimental_distribute_dataset(dataset):
            pass
    except ValueError as e:
        return str(e)
    return None


def main():
    torch.set_default_dtype(torch.float64)
    two = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    three = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2"])
    one = md.distribute.OneDeviceStrategy("/cpu:0")
    u, lab = parts(*CASES["full_16_4"])
    out = {
        "replicas_2": {name: distribute(two, args) for name, args in CASES.items()},
        "replicas_3": {name: distribute(three, args) for name, args in CASES.items()},
        "replicas_2_off_rows": {name: [s["run_sees_rows"] for s in distribute(two, args, off=True)]
                                for name, args in CASES.items()},
        "dict_rows": [dict_rows(two, e) for e in two.experimental_distribute_dataset(
            md.data.Dataset.zip({"unlabeled": u, "labeled": lab}))],
        "repeat_prefetch_rows": [rows(two, e) for e in two.experimental_distribute_dataset(
            md.data.Dataset.zip((u, lab)).repeat(2).prefetch(md.data.AUTOTUNE))],
        "fit_2": {name: fit(two, args) for name, args in CASES.items()},
        "fit_1": {name: fit(one, args) for name, args in CASES.items()},
        "fit_2_two_epochs": fit(two, CASES["partial_26_16__7_4"], epochs=2),
        "fit_1_two_epochs": fit(one, CASES["partial_26_16__7_4"], epochs=2),
        "fit_2_distributed": fit(two, CASES["partial_26_16__7_4"], distributed=True),
        "mapped_refusal": refused(two, md.data.Dataset.zip((u, lab)).map(lambda a, b: (a, b))),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
