"""Keras 3 custom loop on MultiWorkerMirroredStrategy, 2 worker processes: every worker equals one device."""

from __future__ import annotations

import pytest
import torch

from tests.integrations._keras3_env import import_keras3
from tests.multiworker._cluster import results_json, run_cluster

import_keras3()  # skip without Keras 3

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

JOB = """
import json, os
os.environ["KERAS_BACKEND"] = "torch"
import torch
import multidev as md
import keras

strategy = md.distribute.MultiWorkerMirroredStrategy()
g = torch.Generator().manual_seed(1)
x, y = torch.randn(16, 3, generator=g), torch.randn(16, 1, generator=g)
data = md.data.Dataset.from_tensor_slices((x, y)).batch(8)

def build(kind):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])
    if kind == "torch":
        return model, torch.optim.Adam(model.parameters(), lr=0.05)
    optimizer = keras.optimizers.Adam(learning_rate=0.05)
    optimizer.build(model.trainable_variables)
    return model, optimizer

def step(model, optimizer, xb, yb):
    if isinstance(optimizer, torch.optim.Optimizer):
        optimizer.zero_grad()
    else:
        for v in model.trainable_variables:
            v.value.grad = None
    (((model(xb) - yb) ** 2).sum() / 8).backward()
    if isinstance(optimizer, torch.optim.Optimizer):
        optimizer.step()
    else:
        optimizer.apply([v.value.grad for v in model.trainable_variables], model.trainable_variables)

result = {}
for kind in ("torch", "keras"):
    reference, ref_opt = build(kind)
    for xb, yb in data:
        step(reference, ref_opt, xb, yb)
    with strategy.scope():
        model, optimizer = build(kind)
    for xb, yb in strategy.experimental_distribute_dataset(data):
        strategy.run(step, (model, optimizer, xb, yb))
    result[kind] = max(float((r.value.detach() - c.detach()).abs().max())
                       for r, v in zip(reference.weights, model.weights) for c in v._value.values)
    result[kind + "_weights"] = [v._value.values[0].detach().flatten().tolist() for v in model.weights]
print("RESULT " + json.dumps(result), flush=True)
"""


def test_two_workers_equal_one_device():
    procs = run_cluster(JOB, workers=2, timeout=180)
    results = [results_json(p) for p in procs]
    for kind in ("torch", "keras"):
        for r in results:
            assert r[kind] < 1e-5, (kind, r[kind])
        assert results[0][kind + "_weights"] == results[1][kind + "_weights"], kind


FIT_JOB = """
import json, os, sys
os.environ["KERAS_BACKEND"] = "torch"
import torch
import multidev as md
import keras

strategy = md.distribute.MultiWorkerMirroredStrategy()
worker = int(os.environ["TASK_INDEX"])
g = torch.Generator().manual_seed(1)
x, y = torch.randn(21, 3, generator=g), torch.randint(0, 2, (21,), generator=g)  # uneven last batch (5)

def compiled():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model

def max_diff(reference, model):
    return max(float((r.value.detach() - c.detach()).abs().max())
               for r, v in zip(reference.weights, model.weights) for c in v._value.values)

reference = compiled()
expected = reference.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
shuffled_reference = compiled()
torch.manual_seed(7)  # after compiled(): keras.utils.set_random_seed seeds torch too
expected_shuffled = shuffled_reference.fit(x, y, batch_size=8, epochs=3, verbose=0).history  # shuffle=True

with strategy.scope():
    model = compiled()
history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
with strategy.scope():
    shuffled = compiled()
torch.manual_seed(7 if worker == 0 else 100 + worker)  # the chief's RNG decides every worker's shuffle
shuffled_history = shuffled.fit(x, y, 8, 3, 0, []).history  # positional: callbacks list, shuffle by default
from tests.integrations.test_keras3_custom_step import WithComputeLoss as Custom  # the guide's first form

def custom():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    model = Custom(inputs, keras.layers.Dense(2)(keras.layers.Dense(4, activation="relu")(inputs)))
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model

custom_reference = custom()
expected_custom = custom_reference.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
with strategy.scope():
    custom_model = custom()
custom_history = custom_model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
result = {
    "custom_history": custom_history, "expected_custom": expected_custom,
    "custom_max_diff": max_diff(custom_reference, custom_model),
    "history": history, "expected": expected,
    "shuffled_history": shuffled_history, "expected_shuffled": expected_shuffled,
    "evaluate": model.evaluate(x, y, batch_size=8, verbose=0),
    "expected_evaluate": reference.evaluate(x, y, batch_size=8, verbose=0),
    "max_diff": max_diff(reference, model), "shuffled_max_diff": max_diff(shuffled_reference, shuffled),
}
print("PROGRESS BAR FOLLOWS", flush=True)
custom_model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=1)   # only the chief may print it
sys.stdout.flush()
print("RESULT " + json.dumps(result), flush=True)
"""


def test_keras_fit_two_workers_equal_one_device():
    procs = run_cluster(FIT_JOB, workers=2, timeout=180)
    bars = [p.stdout.split("PROGRESS BAR FOLLOWS", 1)[1].split("RESULT", 1)[0] for p in procs]
    assert "loss:" in bars[0] and bars[1].strip() == "", bars     # the chief prints Keras's bar, worker 1 nothing
    for r in (results_json(p) for p in procs):
        assert r["max_diff"] < 1e-5 and r["shuffled_max_diff"] < 1e-5 and r["custom_max_diff"] < 1e-5
        for got, want in (("history", "expected"), ("shuffled_history", "expected_shuffled"),
                          ("custom_history", "expected_custom")):
            for key, values in r[want].items():
                assert r[got][key] == pytest.approx(values, rel=1e-5, abs=1e-6), (got, key)
        assert r["evaluate"] == pytest.approx(r["expected_evaluate"], rel=1e-5, abs=1e-6)


PREDICT_JOB = """
import json, os
os.environ["KERAS_BACKEND"] = "torch"
import torch
import multidev as md
import keras

strategy = md.distribute.MultiWorkerMirroredStrategy()
g = torch.Generator().manual_seed(2)
x = torch.randn(17, 3, generator=g)  # batches 8, 8, 1: the last leaves worker 1 an empty slice

def build():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4, activation="relu")(inputs)
    return keras.Model(inputs, {"logits": keras.layers.Dense(2)(hidden), "score": keras.layers.Dense(1)(hidden)})

expected = build().predict(x, batch_size=8, verbose=0)
with strategy.scope():
    model = build()
got = model.predict(x, batch_size=8, verbose=0)
print("RESULT " + json.dumps({k: [got[k].tolist(), expected[k].tolist()] for k in expected}), flush=True)
"""


def test_keras_predict_two_workers_returns_every_output_in_order():
    procs = run_cluster(PREDICT_JOB, workers=2, timeout=180)
    results = [results_json(p) for p in procs]
    for r in results:
        for key, (got, want) in r.items():
            assert len(got) == 17, key
            torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-5, atol=1e-6, msg=key)
    assert results[0] == results[1]
