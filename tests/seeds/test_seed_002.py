"""Seed 002, "Model Training Using Multiple GPUs": its cells as written (tests/seeds/seed_002_cells.py) in
one kernel with one stand-in GPU split into two logical GPUs (as the notebook does on Colab), on a tiny
Reuters file with the real data's shapes (tests/seeds/fixtures: 30,982 word ids, 46 topics), so the
seed's model summary is printed exactly; each cell checked against what the seed prints.

multidev never unpickles without consent: the seed's ``datasets.reuters.load_data()`` reads the
pickle-free layout (``reuters.save_safe_npz`` converts Keras's file once); on Keras's own file it
says how to consent or convert (``load_data(allow_pickle=True)`` reads it).
"""

from __future__ import annotations

import os
import re

import pytest

from multidev.keras.datasets import reuters
from tests.conftest import ROOT
from tests.devices.fake_gpus import fake_gpus
from tests.seeds._kernel import assert_ran, run_cells
from tests.seeds.seed_002_cells import CELLS

FIXTURE = os.path.join(ROOT, "tests", "seeds", "fixtures", "reuters_npscalars_numpy2.npz")
LOGGING = "import logging\nlogging.basicConfig(level=logging.INFO, format='%(levelname)s:%(name)s:%(message)s')\n"

# What the seed prints for its model (Keras 2's summary), line by line.
SUMMARY = """\
embedding (Embedding)        (None, 300, 7)            216874
conv1d (Conv1D)              (None, 296, 64)           2304
max_pooling1d (MaxPooling1D) (None, 148, 64)           0
conv1d_1 (Conv1D)            (None, 146, 32)           6176
max_pooling1d_1 (MaxPooling1 (None, 73, 32)            0
flatten (Flatten)            (None, 2336)              0
dense (Dense)                (None, 46)                107502
Total params: 332,856
Trainable params: 332,856
Non-trainable params: 0"""


def _home(tmp_path, keras_layout=False):
    home = tmp_path / "home"
    (home / ".keras" / "datasets").mkdir(parents=True)
    target = home / ".keras" / "datasets" / "reuters.npz"
    if keras_layout:
        target.write_bytes(open(FIXTURE, "rb").read())
    else:
        xs, ys = reuters.read_sequences(FIXTURE, allow_pickle=True)
        reuters.save_safe_npz(xs, ys, str(target))
    return str(home)


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seed_002")
    return run_cells(CELLS, cwd=tmp, preamble=fake_gpus(1, LOGGING), env={"HOME": _home(tmp)})


def test_setup_two_logical_gpus(notebook):
    assert_ran(notebook["setup"])
    assert notebook["setup"][0] == "1 Physical GPU, 2 Logical GPUs\n"


def test_data_preparation_and_model_defining(notebook):
    assert_ran(notebook["data_preparation"])
    assert_ran(notebook["model_defining"])


def test_model_training_summary_and_fit(notebook):
    assert_ran(notebook["model_training"])
    out, err = notebook["model_training"]
    assert "WARNING:multidev.distribute:NCCL is not supported when using virtual GPUs, falling back to reduction to " \
           "one device" in err
    devices = "('/job:localhost/replica:0/task:0/device:GPU:0', '/job:localhost/replica:0/task:0/device:GPU:1')"
    assert f"INFO:multidev.distribute:Using MirroredStrategy with devices {devices}" in err
    lines = [" ".join(line.split()) for line in out.splitlines()]
    for expected in SUMMARY.splitlines():
        name = expected.split()[0]
        row = " ".join(expected.replace("(MaxPooling1 ", "(MaxPooling1D) ").split())   # Keras 2 cut the name
        assert row in lines, (name, out)
    epochs = re.findall(r"^2/2 \[=+\] - .* - loss: (\d+\.\d+) - sparse_categorical_accuracy: \d\.\d{4} - "
                        r"sparse_top_k_categorical_accuracy: \d\.\d{4} - val_loss: \d+\.\d+ - "
                        r"val_sparse_categorical_accuracy: \d\.\d{4} - val_sparse_top_k_categorical_accuracy: \d\.\d{4}$",
                        out, re.M)
    assert [f"Epoch {i}/10" in out for i in range(1, 11)] == [True] * 10 and len(epochs) == 10
    assert float(epochs[-1]) < float(epochs[0])          # it learns (48 newswires: 2 steps of 32 per epoch)


def test_keras_own_file_asks_for_consent_and_reads_with_it(tmp_path, monkeypatch):
    """The data cell, in this process, on Keras's own (pickled) reuters.npz."""
    monkeypatch.setenv("HOME", _home(tmp_path, keras_layout=True))
    monkeypatch.delenv("KERAS_HOME", raising=False)
    namespace = {}
    exec("import multidev as md\nfrom multidev.keras import *", namespace)
    with pytest.raises(ValueError, match=r"allow_pickle=True.*save_safe_npz"):
        exec(compile(dict(CELLS)["data_preparation"], "<seed cell>", "exec"), namespace)
    (x_train, y_train), _ = reuters.load_data(allow_pickle=True)
    assert len(x_train) == 48 and int(y_train.max()) == 45
