"""Every ported seed program runs as ``python examples/<name>.py`` on logical CPUs and prints the seed's results."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT


def run_example(name, *args, timeout=300, home=None):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    if home is not None:        # an empty home: no ~/.keras/datasets/reuters.npz
        env["HOME"] = str(home)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)
    assert proc.returncode == 0, f"{name} failed (rc={proc.returncode})\nSTDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}"
    return proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def notebook():
    return run_example("distributed_training_notebook.py", "--epochs", 10)[0]


def test_notebook_strategy_run_gather_reduce(notebook):
    assert "Number of replicas in strategy: 2" in notebook
    assert re.search(r"rep\.weight: MirroredVariable:\{\n  0: .*numpy=array\(3\.14.*\n  1: .*replica_1", notebook)
    assert "PerReplica:{\n  0: tensor([[4, 6]]),\n  1: tensor([[4, 6]])\n}" in notebook
    assert "tensor([[4, 6],\n        [4, 6]])" in notebook          # gather
    assert "tensor([ 8, 12])" in notebook                            # reduce SUM


def test_notebook_sharding_splits_each_global_batch(notebook):
    original, distributed = notebook.split("Distributed dataset:")
    # the notebook's own print: {k: v.numpy() ...} (replica ids are int32 tensors, as in TF)
    assert ("Results: [{'replica': array(0, dtype=int32), 'batch': array([0, 1, 2, 3])}, "
            "{'replica': array(1, dtype=int32), 'batch': array([0, 1, 2, 3])}]") in original
    assert ("Results: [{'replica': array(0, dtype=int32), 'batch': array([0, 1])}, "
            "{'replica': array(1, dtype=int32), 'batch': array([2, 3])}]") in distributed
    assert ("Results: [{'replica': array(0, dtype=int32), 'batch': array([12, 13])}, "
            "{'replica': array(1, dtype=int32), 'batch': array([14, 15])}]") in distributed


def test_notebook_aggregation_none_vs_sum(notebook):
    values = [int(v) for v in re.findall(r"dtype=int32, numpy=array\((\d+), dtype=int32\)", notebook)]
    assert values == [52, 68, 120, 120]


def test_notebook_keras_fit_save_load_and_custom_loop(notebook):
    fit_loss = float(re.search(r"Training complete, final loss (\d+\.\d+)\.", notebook).group(1))
    loaded_loss = float(re.search(r"Loaded model loss: (\d+\.\d+)", notebook).group(1))
    custom_loss = float(re.search(r"Model trained, loss: (\d+\.\d+)", notebook).group(1))
    assert fit_loss < 50 and custom_loss < 50    # y = 2x + 3 on x in [0, 20): starts near 500
    kernels = re.findall(r"Dense\.kernel(?:/replica_1)?:0' shape=\(1, 1\) dtype=float32, "
                         r"numpy=array\(\[\[(.*?)\]\]", notebook)
    assert len(kernels) == 2 and kernels[0] == kernels[1]           # replicas in sync
    weights = re.search(r"\[array\(\[\[(.*?)\]\], dtype=float32\), array\(\[(.*?)\], dtype=float32\)\]", notebook)
    assert weights.group(1) == kernels[0]                           # get_weights: one copy
    assert loaded_loss == pytest.approx(fit_loss, rel=0.5, abs=1e-3)  # evaluated after loading into a plain model


def test_gpu_guide():
    out, err = run_example("gpu_guide.py")
    assert "Num GPUs Available:  0" in out and "No GPU here" in out
    assert "1 Physical CPU, 2 Logical CPUs" in out
    assert out.count("tensor([[22., 28.],\n        [49., 64.]])") == 3
    assert "Executing op matmul in device /job:localhost/replica:0/task:0/device:CPU:0" in err
    assert "Executing op matmul in device /job:localhost/replica:0/task:0/device:CPU:1" in err   # md.device('/CPU:1')
    assert "ValueError: Cannot set memory growth on non-GPU device" in out
    assert "\n/job:localhost/replica:0/task:0/device:CPU:7 unknown device." in out     # the guide's except RuntimeError
    assert "soft device placement runs its ops on /job:localhost/replica:0/task:0/device:CPU:0" in err
    assert "Replicas: 2" in out and "loss after 5 epochs:" in out
    assert "tensor([[ 44.,  56.],\n        [ 98., 128.]])" in out        # 2 devices' matmuls added on the CPU


def test_device_placement_qa():
    out, err = run_example("device_placement_qa.py", "--size", 64, "--epochs", 1, "--examples", 64)
    example1 = err.split("Executing op randn")[1]
    assert "device:CPU:0" in example1
    matmuls = re.findall(r"Executing op matmul in device \S+device:(CPU:\d)", err)
    assert matmuls == ["CPU:0", "CPU:0", "CPU:1"]                   # example 1 on one device, example 2 on both
    assert "replicas: 2" in out and "Epoch 1/1" in out
    assert re.search(r"^2/2 - \d+s - loss: \d\.\d{4} - mae: \d\.\d{4}", out, re.M), out


def test_reuters_falls_back_to_synthetic_data(tmp_path):
    out, _ = run_example("reuters_mirrored.py", "--epochs", 1, "--limit", 64, home=tmp_path)
    assert "No GPU: 1 Physical CPU, 2 Logical CPUs" in out
    assert "Reuters data not found" in out and "Using SYNTHETIC data of the same shapes" in out
    assert "Total params: 332,856" in out and "(None, 46)" in out   # the seed's model, even on a subset
    assert "Epoch 1/1" in out and re.search(r"^2/2 \[=+\] - .* - val_sparse_categorical_accuracy: ", out, re.M)


def test_reuters_reads_a_pickle_free_npz(tmp_path):
    from multidev.keras.datasets import reuters

    rng = np.random.RandomState(0)
    seqs = [rng.randint(1, 500, size=rng.randint(5, 60)).tolist() for _ in range(50)]
    path = tmp_path / "tiny_reuters.npz"
    reuters.save_safe_npz(seqs, rng.randint(0, 3, size=50), str(path))
    out, _ = run_example("reuters_mirrored.py", "--data", path, "--epochs", 1, home=tmp_path)
    assert "SYNTHETIC" not in out
    # 40 training examples after test_split=0.2: two batches of 32; 3 classes
    assert "(None, 3)" in out and re.search(r"^2/2 \[=+\] - ", out, re.M)


def test_reuters_missing_file_is_an_error(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "reuters_mirrored.py"), "--data",
                           str(tmp_path / "nope.npz")], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "nope.npz" in proc.stderr and "never downloads" in proc.stderr


def test_multi_worker_example_under_the_launcher():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "multidev.cli.main", "launch", "--workers", "2",
                           os.path.join(ROOT, "examples", "multi_worker.py"), "--epochs", "2"],
                          capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for w in (0, 1):
        assert f"[worker {w}] task worker:{w}: 2 replicas in sync" in proc.stdout
    checksums = re.findall(r"^\[worker \d\] final loss \S+; weight checksum (\S+)$", proc.stdout, re.M)
    assert len(checksums) == 2 and checksums[0] == checksums[1]     # both workers end with the same weights


def test_torch_optimizer_loop_equals_one_device():
    out, err = run_example("torch_optimizer_loop.py")
    assert "replicas: 2" in out and "Warning" not in err
    first, last = map(float, re.search(r"loss: first ([\d.]+), last ([\d.]+)", out).groups())
    assert last < 0.6 * first, out
    assert float(re.search(r"loss difference to one device: (\S+)", out).group(1)) < 1e-5, out
    assert float(re.search(r"every replica's copy\): (\S+)", out).group(1)) < 1e-5, out
