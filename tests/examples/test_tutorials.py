"""Every ported TensorFlow tutorial in examples/tutorials/ runs to completion and prints what the tutorial prints.

Data: each run gets an empty temporary KERAS_HOME (the tutorials fall back to synthetic images and say
so), except the tests that put a tiny fake data set in the Keras cache layout to check it is read.
"""

from __future__ import annotations

import gzip
import os
import re
import struct
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

TUTORIALS = os.path.join(ROOT, "examples", "tutorials")
pytestmark = pytest.mark.timeout(300)


def _env(keras_home):
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
                KERAS_HOME=str(keras_home), MULTIDEV_RPC_TIMEOUT="60")


def run_tutorial(name, *args, keras_home, timeout=240):
    proc = subprocess.run([sys.executable, os.path.join(TUTORIALS, name), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=_env(keras_home), cwd=ROOT)
    assert proc.returncode == 0, f"{name} failed (rc={proc.returncode})\nSTDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}"
    return proc.stdout


def launch(name, *launch_args, script_args=(), keras_home, timeout=280, with_stderr=False):
    proc = subprocess.run([sys.executable, "-m", "multidev.cli.main", "launch", *launch_args,
                           os.path.join(TUTORIALS, name), *map(str, script_args)],
                          capture_output=True, text=True, timeout=timeout, env=_env(keras_home), cwd=ROOT)
    assert proc.returncode == 0, f"{name} failed (rc={proc.returncode})\nSTDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}"
    return (proc.stdout, proc.stderr) if with_stderr else proc.stdout


def task_lines(out, task, pattern):
    """The groups of ``pattern`` in the lines that ``task`` (e.g. 'worker 1') printed through the launcher."""
    return re.findall(rf"^\[{task}\] {pattern}$", out, re.M)


# ---- (a) Custom training with tf.distribute.Strategy ------------------------------------------------------


@pytest.fixture(scope="module")
def custom_training(tmp_path_factory):
    home, ckpt = tmp_path_factory.mktemp("keras_home"), tmp_path_factory.mktemp("ckpt")
    return run_tutorial("custom_training.py", "--epochs", 3, "--checkpoint-dir", ckpt, keras_home=home), ckpt


def test_custom_training_trains_with_regularization(custom_training):
    out, _ = custom_training
    assert "Using SYNTHETIC data" in out and "Number of devices: 2" in out
    assert "Regularization losses per replica: 3" in out       # one L2 loss per kernel
    epochs = re.findall(r"^Epoch (\d), Loss: (\S+), Accuracy: (\S+), Test Loss: (\S+), Test Accuracy: (\S+)$", out, re.M)
    assert [e[0] for e in epochs] == ["1", "2", "3"]
    losses = [float(e[1]) for e in epochs]
    assert losses[0] > losses[1] > losses[2], losses
    assert float(epochs[-1][4]) > 50.0                          # learnt (chance is 10%)


def test_custom_training_restored_checkpoint_gives_the_trained_accuracy(custom_training):
    out, ckpt = custom_training
    last_test_accuracy = re.findall(r"Test Accuracy: (\S+)$", out, re.M)[-1]
    restored = re.search(r"^Accuracy after restoring the saved model without strategy: (\S+)$", out, re.M).group(1)
    assert restored == last_test_accuracy                        # exactly the trained model's accuracy
    assert "Latest checkpoint: ckpt-2" in out                   # saved after epochs 1 and 3
    assert {"checkpoint", "ckpt-1.index", "ckpt-2.index"} <= set(os.listdir(ckpt))


def test_custom_training_other_loops_keep_training(custom_training):
    out, _ = custom_training
    iterator_losses = [float(v) for v in re.findall(r"^Iterator: Loss: (\S+),", out, re.M)]
    assert len(iterator_losses) == 2
    assert re.search(r"^Epoch in a function: Loss: \S+, Accuracy: \S+$", out, re.M)


def _idx(path, array, magic):
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype("uint8").tobytes())


def test_custom_training_reads_fashion_mnist_from_the_keras_cache(tmp_path):
    rng = np.random.RandomState(0)
    folder = tmp_path / "home" / "datasets" / "fashion-mnist"
    folder.mkdir(parents=True)
    for prefix, count in (("train", 600), ("t10k", 300)):
        _idx(folder / f"{prefix}-labels-idx1-ubyte.gz", rng.randint(0, 10, size=count), 2049)
        _idx(folder / f"{prefix}-images-idx3-ubyte.gz", rng.randint(0, 256, size=(count, 28, 28)), 2051)
    out = run_tutorial("custom_training.py", "--epochs", 1, "--checkpoint-dir", tmp_path / "ckpt",
                       keras_home=tmp_path / "home")
    assert "Loaded fashion_mnist from the Keras cache: 600 train / 300 test images; using 512 / 256" in out
    assert "SYNTHETIC" not in out and re.search(r"^Epoch 1, Loss: ", out, re.M)


# ---- (b) Distributed training with Keras ------------------------------------------------------------------


def test_keras_distributed_fit_callbacks_and_save_load(tmp_path):
    out = run_tutorial("keras_distributed.py", "--epochs", 4, "--workdir", tmp_path, keras_home=tmp_path / "home")
    rates = re.findall(r"^Learning rate for epoch (\d) is (\S+)$", out, re.M)
    assert rates == [("1", "0.001"), ("2", "0.001"), ("3", "0.0001"), ("4", "1e-05")]   # LearningRateScheduler
    losses = [float(v) for v in re.search(r"^Training losses: (.*)$", out, re.M).group(1).split()]
    assert losses[-1] < losses[0]
    assert sorted(os.listdir(tmp_path / "training_checkpoints")) == [f"ckpt_{i}.weights.h5" for i in (1, 2, 3, 4)]
    assert os.listdir(tmp_path / "logs" / "train")                # TensorBoard event file
    evals = re.findall(r"^Eval loss(?: \(.*\))?: (\S+), Eval [Aa]ccuracy: (\S+)$", out, re.M)
    assert len(evals) == 3                                        # latest weights; no strategy; OneDeviceStrategy
    assert evals[1][1] == evals[0][1] and evals[2][1] == evals[0][1]
    for loss, _ in evals[1:]:
        assert float(loss) == pytest.approx(float(evals[0][0]), rel=1e-5)


# ---- (c) Distributed input --------------------------------------------------------------------------------


def test_distributed_input(tmp_path):
    out = run_tutorial("distributed_input.py", keras_home=tmp_path)
    assert "for loop: 7 steps; last step per replica shapes: [[2, 1], [2, 1]]" in out      # 100 = 6 x 16 + 4
    assert out.count("PerReplica:{") == 2 and "0.7000" in out                           # labels - 0.3 * features
    assert "[[0, 1], [2, 3]]\n[[4], [5]]" in out                                         # a partial batch split
    assert "auto_shard_policy DATA, 1 worker: [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]" in out
    assert "dataset_fn: pipeline 0 of 1, 2 replicas, per-replica batch 8" in out
    assert "first features per replica: [[[0], [1], [2], [3], [4], [5], [6], [7]], " \
           "[[8], [9], [10], [11], [12], [13], [14], [15]]]" in out
    assert "batches: 4" in out
    assert "PerReplicaSpec(TensorSpec(shape=(None, 1)" in out
    assert out.count("features*2 per replica shapes: [[8, 1], [8, 1]] first value: 2.0") == 2
    assert "[[0, 1], [2, 3]]\n[[4, 5], [6, 7]]\n[[8], []]\nno value at step 3: stop" in out   # get_next_as_optional
    assert "fetch_to_device=False, devices: ['cpu', 'cpu']" in out
    assert "PER_REPLICA pipelines: [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]" in out
    assert "values from function: [0, 1]" in out


# ---- (d) Save and load a model using a distribution strategy ---------------------------------------------


def test_save_and_load(tmp_path):
    out = run_tutorial("save_and_load.py", "--workdir", tmp_path, keras_home=tmp_path / "home")
    trained = re.search(r"^Trained \(MirroredStrategy\) eval: loss (\S+), accuracy (\S+)$", out, re.M).groups()
    for label in (r"Restored \(no strategy\) eval:", r"Restored \(OneDeviceStrategy\) eval:",
                  r"Saved ckpt-1 under MirroredStrategy: eval", r"Restored under OneDeviceStrategy: eval"):
        loss, accuracy = re.search(rf"^{label} loss (\S+), accuracy (\S+)$", out, re.M).groups()
        assert accuracy == trained[1], label
        assert float(loss) == pytest.approx(float(trained[0]), rel=1e-5), label
    assert out.count("Epoch 2/2") == 3                           # trained, then each loaded model trained on
    local = re.search(r"^Loaded from /job:localhost \(MirroredStrategy\) eval: loss (\S+), accuracy (\S+)$", out, re.M)
    assert local.group(2) == trained[1] and float(local.group(1)) == pytest.approx(float(trained[0]), rel=1e-5)
    assert "serving_default output 'output_0': shape [64, 10]; equals model(batch): True" in out   # TF 2.21's key
    assert "In strategy.run, per replica: [[32, 10], [32, 10]] equals the direct call: True" in out
    assert "Unbuilt subclassed model saved; signatures: []" in out   # TF 2.21 saves it with none
    assert "md.Module signature output: {'output_0': [[1.0, 1.0, 1.0, 1.0, 1.0]]}" in out


# ---- (e) Multi-worker training with Keras -----------------------------------------------------------------


@pytest.mark.slow
def test_multi_worker_keras_under_the_launcher(tmp_path):
    out = launch("multi_worker_keras.py", "--workers", "2", script_args=("--workdir", tmp_path),
                 keras_home=tmp_path / "home")
    for w in (0, 1):
        assert f"[worker {w}] task worker:{w} of 2 workers; 2 replicas in sync" in out
        assert task_lines(out, f"worker {w}", r"Loaded model trained on alone")
        assert task_lines(out, f"worker {w}", r"Checkpoint dir holds: \['checkpoint', 'ckpt-1.data.safetensors', "
                                              r"'ckpt-1.index'\]")
        assert task_lines(out, f"worker {w}", r"BackupAndRestore fit losses: .* ; backup left: False")
    losses = [task_lines(out, f"worker {w}", r"Training losses: (.*)") for w in (0, 1)]
    assert losses[0] == losses[1] and len(losses[0]) == 1
    first, last = map(float, losses[0][0].split())
    assert last < first
    sums = {kind: [task_lines(out, f"worker {w}", rf"{kind} (\S+)")[0] for w in (0, 1)]
            for kind in ("Weights checksum after fit:", "Loaded model checksum:", r"Restored ckpt-1; checksum:")}
    values = {v for pair in sums.values() for v in pair}
    assert len(values) == 1, sums                                # the same weights everywhere, saved and restored
    assert set(os.listdir(tmp_path)) - {"home"} == {"ckpt", "keras-model.keras", "workertemp_1"}   # backup deleted
    assert os.listdir(tmp_path / "workertemp_1") == []          # the non-chief's writes were deleted


# ---- (f) Custom training loop with Keras and MultiWorkerMirroredStrategy ----------------------------------


@pytest.mark.slow
def test_multi_worker_custom_loop_saves_on_the_chief_and_resumes(tmp_path):
    first = launch("multi_worker_custom_loop.py", "--workers", "2",
                   script_args=("--workdir", tmp_path, "--epochs", 2), keras_home=tmp_path / "home")
    assert "[worker 0] task worker:0, chief: True, 2 replicas in sync" in first
    assert "[worker 1] task worker:1, chief: False, 2 replicas in sync" in first
    losses = [task_lines(first, f"worker {w}", r"Epoch: (\d), accuracy: (\S+), train_loss: (\S+)\.") for w in (0, 1)]
    # The loss is reduced over workers, and the metric's result() reads every worker's state (TF's
    # sync-on-read metric variables), so both workers print the same accuracy and loss.
    assert losses[0] == losses[1] and [e for e, _, _ in losses[0]] == ["0", "1"]
    assert float(losses[0][1][2]) < float(losses[0][0][2])
    sums = [task_lines(first, f"worker {w}", r"Done at epoch 2; weights checksum (\S+)") for w in (0, 1)]
    assert sums[0] == sums[1] and len(sums[0]) == 1
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["checkpoint", "ckpt-2.data.safetensors", "ckpt-2.index"]
    assert os.listdir(tmp_path / "workertemp_1") == []

    second = launch("multi_worker_custom_loop.py", "--workers", "2",
                    script_args=("--workdir", tmp_path, "--epochs", 3), keras_home=tmp_path / "home")
    for w in (0, 1):
        # The chief re-saves the restored state (epoch 1 ends with no steps left) as ckpt-3 before
        # training starts, so a worker that starts later may find that one: the same values.
        assert task_lines(second, f"worker {w}", r"Restored ckpt-[23]: epoch 1, step_in_epoch 6")
        assert [e for e, _ in task_lines(second, f"worker {w}", r"Epoch: (\d), accuracy: \S+, train_loss: (\S+)\.")] \
            == ["2"]                                             # resumed: only the third epoch runs
        assert task_lines(second, f"worker {w}", r"Done at epoch 3; weights checksum \S+")
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["checkpoint", "ckpt-4.data.safetensors", "ckpt-4.index"]


# ---- (g) Parameter server training with ParameterServerStrategy --------------------------------------------


@pytest.mark.slow
def test_parameter_server_tutorial(tmp_path):
    """The tutorial as printed (RMSprop(0.1)): TF 2.21 reads epoch accuracies such as 0.63, 0.58, 1.0, 1.0,
    a final loss of 0.14-0.40 and evaluation accuracies of 1.0 (multidev read 0.81, 0.52, 0.47, 0.43, a
    final loss of 5.8 and 0.0). A clean run's stderr is empty: no torch deprecation warning per task, no
    TensorPipe "pipe closed" lines at shutdown; the fit progress bar reaches 20/20 (it stayed at 0/20)."""
    out, err = launch("parameter_server.py", "--chief", "--workers", "2", "--ps", "2",
                      script_args=("--workdir", tmp_path), keras_home=tmp_path / "home", with_stderr=True)
    losses = [float(v) for v in task_lines(out, "chief 0", r"fit losses: (.*)")[0].split()]
    assert len(losses) == 5 and losses[-1] < losses[0]
    assert len(task_lines(out, "chief 0", r"20/20 - .*loss: .*")) == 5
    assert {"ckpt.keras", "log"} <= set(os.listdir(tmp_path))
    assert "[chief 0] embedding shards: [((4, 16384), '/job:ps/replica:0/task:0/device:CPU:0'), " \
           "((4, 16384), '/job:ps/replica:0/task:1/device:CPU:0')]" in out
    accuracy = [float(v) for v in task_lines(out, "chief 0", r"Finished epoch \d, accuracy is (\S+)\.")]
    # Asynchronous steps: on an idle machine the last epoch reads 0.9-1.0; under heavy load (a CI stand-in beside
    # three other jobs on 2 cores) 0.64, 0.73, 0.74, 0.84 once. The bug this guards against fell: 0.81 to 0.43.
    assert len(accuracy) == 4 and accuracy[-1] >= 0.75 and accuracy[-1] > accuracy[0], accuracy
    # One step's loss of asynchronous training with RMSprop(0.1): 0.12-0.47 in 8 runs on an idle machine,
    # 0.71 once under load (the accuracies above were 1.0); the bug this guards against read 5.8.
    assert float(task_lines(out, "chief 0", r"Final loss is (\S+)")[0]) < 1.5
    assert float(task_lines(out, "chief 0", r"Evaluation accuracy: (\S+)")[0]) >= 0.9
    assert float(task_lines(out, "chief 0", r"Distributed evaluation accuracy: (\S+) \(16 examples\)")[0]) >= 0.9
    assert err == "", err
