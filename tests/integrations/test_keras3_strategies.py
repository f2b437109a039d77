"""Keras 3 models on multidev's other strategies and state tools: BackupAndRestore resumes exactly,
md.train.Checkpoint/CheckpointManager move a model and its optimizer between 2 replicas and one device;
CentralStorageStrategy and ParameterServerStrategy (with ClusterCoordinator) are refused, saying why."""

from __future__ import annotations

import pytest
import torch

import multidev as md
from multidev.values.variables import DistributedVariable
from tests.integrations._keras3_env import import_keras3
from tests.parameter_server._cluster import describe, run_cluster

keras = import_keras3()

DEVICES = ["/cpu:0", "/cpu:1"]


def _data(n=21):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, generator=g), torch.randn(n, 1, generator=g)


def _model(strategy=None):
    def build():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse", metrics=["mae"])
        return model

    if strategy is None:
        return build()
    with strategy.scope():
        return build()


def _assert_same_state(reference, model):
    for ref, var in zip(reference.weights + reference.optimizer.variables, model.weights + model.optimizer.variables):
        copies = var._value.values if isinstance(var._value, DistributedVariable) else (var._value,)
        for copy in copies:
            torch.testing.assert_close(copy.detach().double(), ref.value.detach().double(), rtol=1e-5, atol=1e-6)


class _StopAfterEpoch(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            raise KeyboardInterrupt("preempted")


def test_backup_and_restore_resumes_exactly_on_two_replicas(tmp_path):
    x, y = _data()
    fit = dict(batch_size=8, epochs=4, shuffle=False, verbose=0)
    reference = _model()
    expected = reference.fit(x, y, **fit).history
    strategy = md.distribute.MirroredStrategy(DEVICES)
    interrupted = _model(strategy)
    with pytest.raises(KeyboardInterrupt):
        interrupted.fit(x, y, callbacks=[keras.callbacks.BackupAndRestore(tmp_path), _StopAfterEpoch(1)], **fit)
    resumed = _model(strategy)  # a new program run: same model, state from the backup
    history = resumed.fit(x, y, callbacks=[keras.callbacks.BackupAndRestore(tmp_path)], **fit).history
    assert len(history["loss"]) == 2  # epochs 3 and 4 only
    for key in expected:
        torch.testing.assert_close(torch.tensor(history[key]), torch.tensor(expected[key][2:]), rtol=1e-5, atol=1e-6)
    _assert_same_state(reference, resumed)


@pytest.mark.parametrize("save_on,restore_on", [("replicas", "one"), ("one", "replicas")])
def test_md_train_checkpoint_moves_model_and_optimizer_between_replicas_and_one_device(tmp_path, save_on, restore_on):
    x, y = _data(16)
    fit = dict(batch_size=8, epochs=1, shuffle=False, verbose=0)
    reference = _model()
    for _ in range(2):
        reference.fit(x, y, **fit)

    strategies = {"replicas": md.distribute.MirroredStrategy(DEVICES), "one": None}
    first = _model(strategies[save_on])
    first.fit(x, y, **fit)
    manager = md.train.CheckpointManager(md.train.Checkpoint(model=first, optimizer=first.optimizer), tmp_path,
                                         max_to_keep=1)
    manager.save()

    second = _model(strategies[restore_on])
    second.optimizer.build(second.trainable_variables)
    md.train.Checkpoint(model=second, optimizer=second.optimizer).restore(manager.latest_checkpoint).assert_consumed()
    _assert_same_state(first, second)
    second.fit(x, y, **fit)
    _assert_same_state(reference, second)


def test_central_storage_strategy_is_refused_saying_why():
    with pytest.raises(NotImplementedError, match=r"CentralStorageStrategy: its variables are stored once.*"
                                                  r"MirroredStrategy.*md.keras \(which supports CentralStorage"):
        _model(md.distribute.experimental.CentralStorageStrategy(DEVICES))


PARAMETER_SERVER = '''
import json, os
import multidev as md

strategy = md.distribute.ParameterServerStrategy(md.distribute.cluster_resolver.TFConfigClusterResolver())
coordinator = md.distribute.coordinator.ClusterCoordinator(strategy)  # the worker and the ps serve, then exit
os.environ["KERAS_BACKEND"] = "torch"
import keras
try:
    with strategy.scope():
        keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    print("RESULT " + json.dumps({"refused": None}))
except NotImplementedError as e:
    print("RESULT " + json.dumps({"refused": str(e)}))
'''


@pytest.mark.slow
def test_parameter_server_strategy_with_cluster_coordinator_is_refused_saying_why():
    results = run_cluster(PARAMETER_SERVER, workers=1, ps=1, timeout=180)
    assert results["chief:0"].returncode == 0, describe(results)
    line = next(l for l in results["chief:0"].stdout.splitlines() if l.startswith("RESULT "))
    refused = line.split('"refused": ', 1)[1]
    assert "ParameterServerStrategy: its variables live on parameter servers" in refused, describe(results)
    assert "ClusterCoordinator" in refused and "md.keras" in refused
