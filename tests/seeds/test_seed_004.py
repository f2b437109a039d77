"""Seed 004, the "Distributed training in TensorFlow" notebook, cell by cell as written (ported
mechanically: tests/seeds/seed_004_cells.py), each checked against what the notebook prints.

The notebook pairs Colab's CPU with its one GPU (``MirroredStrategy(devices=["/CPU:0", "/GPU:0"])``);
here the kernel runs with one stand-in GPU (tests/devices/fake_gpus.py: a "GPU:0" whose tensors live
in CPU memory), so every cell runs as written on any machine. Its TPU section (a TPUClusterResolver,
``tf.tpu.experimental.initialize_tpu_system``, ``TPUStrategy``) is not ported: multidev has no TPU.
"""

from __future__ import annotations

import re

import pytest

from tests.devices.fake_gpus import fake_gpus
from tests.seeds._kernel import TQDM_STAND_IN, assert_ran, run_cells
from tests.seeds.seed_004_cells import CELLS


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("seed_004")          # save_weights("ckpt") writes into the working directory
    outputs = run_cells(CELLS, cwd=cwd, preamble=fake_gpus(1, TQDM_STAND_IN), timeout=400)
    return {name: out for name, (out, _err) in outputs.items()} | {"cwd": cwd}


def _cell(notebook, name):
    out = notebook[name]
    assert_ran((out, ""))
    return out


def test_in_1_imports(notebook):
    import multidev as md
    assert _cell(notebook, "In[1]").strip() == f"TensorFlow version: {md.__version__}"


def test_in_2_3_strategy_over_the_cpu_and_the_gpu(notebook):
    _cell(notebook, "In[2]")
    assert _cell(notebook, "In[3]").strip() == "Number of replicas in strategy: 2"


def test_in_4_variable_placement(notebook):
    out = _cell(notebook, "In[4]")
    # nonrep.weight: <tf.Variable 'Variable:0' shape=() dtype=float32, numpy=3.14>
    assert re.match(r"nonrep\.weight: <md\.Variable 'Variable:0' shape=\(\) dtype=float32, numpy=.*3\.14", out)
    # rep.weight: MirroredVariable:{ 0: <... 'Variable:0' ... 3.14>, 1: <... 'Variable/replica_1:0' ... 3.14> }
    assert re.search(r"rep\.weight: MirroredVariable:\{\n"
                     r"  0: <md\.Variable 'Variable:0' shape=\(\) dtype=float32, numpy=.*3\.14.*>,\n"
                     r"  1: <md\.Variable 'Variable/replica_1:0' shape=\(\) dtype=float32, numpy=.*3\.14.*>\n\}", out)


def test_in_5_run(notebook):
    # PerReplica:{ 0: tf.Tensor([[4 6]], ..., dtype=int32), 1: tf.Tensor([[4 6]], ..., dtype=int32) }
    assert re.match(r"PerReplica:\{\n  0: tensor\(\[\[4, 6\]\], dtype=torch\.int32\),\n"
                    r"  1: tensor\(\[\[4, 6\]\], dtype=torch\.int32\)\n\}", _cell(notebook, "In[5]"))


def test_in_6_local_results_gather_reduce(notebook):
    out = _cell(notebook, "In[6]")
    assert "(tensor([[4, 6]], dtype=torch.int32), tensor([[4, 6]], dtype=torch.int32))" in out
    assert "strategy.gather:\ntensor([[4, 6],\n        [4, 6]], dtype=torch.int32)" in out
    assert re.search(r"strategy\.reduce:\ntensor\(\[ 8, 12\]", out)


def _results(text):
    """[(replica ids, batches)] per global batch from the cell's 'Results:' lines."""
    rows = []
    for line in re.findall(r"^Results: (.*)$", text, re.M):
        replicas = [int(r) for r in re.findall(r"'replica': array\((\d+)", line)]
        batches = [[int(v) for v in b.split(",")] for b in re.findall(r"'batch': array\(\[([\d, ]+)\]", line)]
        rows.append((replicas, batches))
    return rows


def test_in_7_data_sharding(notebook):
    original, distributed = _cell(notebook, "In[7]").split("Distributed dataset:")
    # not sharded: both replicas get each whole batch [0 1 2 3], [4 5 6 7], ...
    assert _results(original) == [([0, 1], [list(range(i, i + 4))] * 2) for i in range(0, 16, 4)]
    # sharded: [0 1] and [2 3], [4 5] and [6 7], ...
    assert _results(distributed) == [([0, 1], [[i, i + 1], [i + 2, i + 3]]) for i in range(0, 16, 4)]


def test_in_8_aggregation_none_diverges_sum_keeps_in_sync(notebook):
    values = [int(v) for v in re.findall(r"numpy=array\((\d+), dtype=int32\)", _cell(notebook, "In[8]"))]
    assert values == [52, 68, 120, 120]


def test_in_9_to_11_fit_and_one_set_of_weights(notebook):
    loss = float(re.search(r"Training complete, final loss (\d+\.\d{6})\.", _cell(notebook, "In[9]")).group(1))
    assert loss < 0.1                     # y = 2x + 3 after 100 epochs (starts near 500)
    kernels = re.findall(r"'Dense\.kernel(?:/replica_1)?:0' shape=\(1, 1\) dtype=float32, numpy=array\(\[\[(.*?)\]\]",
                         _cell(notebook, "In[10]"))
    assert len(kernels) == 2 and abs(float(kernels[0]) - 2.0) < 0.05
    weights = re.match(r"\[array\(\[\[(.*?)\]\], dtype=float32\), array\(\[(.*?)\], dtype=float32\)\]",
                       _cell(notebook, "In[11]"))
    assert weights.group(1) == kernels[0] and abs(float(weights.group(2)) - 3.0) < 0.5


def test_in_12_save_weights_to_a_prefix_and_load_into_an_unreplicated_model(notebook):
    out = _cell(notebook, "In[12]")
    loaded = float(re.search(r"Loaded model loss: (\d+\.\d{6})", out).group(1))
    trained = float(re.search(r"Training complete, final loss (\d+\.\d{6})\.", notebook["In[9]"]).group(1))
    assert loaded < 0.1 and loaded == pytest.approx(trained, abs=0.02)
    assert {"checkpoint", "ckpt.index", "ckpt.data.safetensors"} <= {p.name for p in notebook["cwd"].iterdir()}


def test_in_13_custom_training_loop(notebook):
    assert float(re.search(r"Model trained, loss: (\d+\.\d{6})", _cell(notebook, "In[13]")).group(1)) < 0.1
