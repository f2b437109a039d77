"""guide/migrate/multi_worker_cpu_gpu_training's MultiWorkerMirroredStrategy, typed as printed, on 2 workers.

``_mw_program.py`` runs in 2 worker processes (TF_CONFIG on loopback, ``tests/multiworker/_cluster.py``);
``_expected_mw_tf.json`` holds what 2 TensorFlow 2.21 workers computed (``record_mw.py``). Keras ``fit``
on the guide's ``DatasetCreator(dataset_fn)`` and a custom loop on the same ``dataset_fn`` must give TF's
losses and weights on every worker; the custom loop's global batch (each worker's 32 rows of its shard)
must also train as one device on the 64 rows together.
"""

import json
import os

import numpy as np
import pytest

from tests.conftest import run_fresh
from tests.multiworker._cluster import run_cluster

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "_mw_program.py")
pytestmark = pytest.mark.timeout(200)


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("mw_migrate"))
    procs = run_cluster(f"import runpy, sys; sys.argv = [{PROGRAM!r}, 'md', {out!r}]; "
                        f"runpy.run_path({PROGRAM!r}, run_name='__main__')", workers=2, timeout=150)
    for p in procs:
        assert p.returncode == 0, f"rc={p.returncode}\nSTDOUT:\n{p.stdout}\nSTDERR:\n{p.stderr}"
    got = []
    for i in range(2):
        with open(os.path.join(out, f"worker{i}.json")) as f:
            got.append(json.load(f))
    with open(os.path.join(HERE, "_expected_mw_tf.json")) as f:
        return got, json.load(f)["workers"]


def _close(got, want):
    np.testing.assert_allclose(np.concatenate([np.ravel(g) for g in got]), np.concatenate([np.ravel(w) for w in want]),
                               rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("worker", [0, 1])
@pytest.mark.parametrize("part", ["fit", "ctl"])
def test_workers_give_tensorflows_losses_and_weights(workers, worker, part):
    got, want = workers
    assert got[worker]["replicas"] == want[worker]["replicas"] == 2
    _close([got[worker][part]["loss"]], [want[worker][part]["loss"]])
    _close(got[worker][part]["weights"], want[worker][part]["weights"])


def test_custom_loop_equals_one_device_on_the_global_batches(workers):
    """The guide shards the repeated stream 0, 1, 2, 0, 1, 2, ...: worker 0 reads 0, 2, 1, 0, ..., worker 1
    1, 0, 2, 1, ..., 32 rows a step each; one device on those 64 rows with the mean squared error (the
    loop's compute_average_loss over 64) and Adagrad steps alike."""
    got, _ = workers
    feats = np.array([[1., 1.5], [2., 2.5], [3., 3.5]])
    labs = np.array([[0.3], [0.5], [0.7]])
    stream = [0, 1, 2] * 64
    w, b = np.array([[0.3], [-0.2]]), np.array([0.1])
    acc_w, acc_b = np.full_like(w, 0.1), np.full_like(b, 0.1)     # Adagrad's initial accumulator
    for step in range(3):
        rows = stream[0::2][32 * step:32 * (step + 1)] + stream[1::2][32 * step:32 * (step + 1)]
        x, y = feats[rows], labs[rows]
        err = x @ w + b - y
        gw, gb = 2 * x.T @ err / len(x), 2 * err.sum(0) / len(x)
        acc_w, acc_b = acc_w + gw ** 2, acc_b + gb ** 2
        w, b = w - 0.05 * gw / np.sqrt(acc_w + 1e-7), b - 0.05 * gb / np.sqrt(acc_b + 1e-7)
    for worker in (0, 1):
        _close(got[worker]["ctl"]["weights"], [w.ravel(), b])


def test_in_process_parameter_server_cluster_is_refused_at_once_saying_why():
    """The guide's ParameterServerStrategy part starts 3 worker and 2 ps ``tf.distribute.Server``s in the
    coordinator's process; multidev's tasks are processes, so the first Server refuses (it waited 60 s
    for a rendezvous and then named no cause)."""
    program = os.path.join(HERE, "_ps_inprocess.py")
    proc = run_fresh(f"import runpy, sys; sys.argv = [{program!r}, 'md']; runpy.run_path({program!r}, "
                     "run_name='__main__')", timeout=60, check=False)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: md.distribute.Server for worker 0 in a process that is chief 0"), proc.stderr
    assert "in-process cluster" in last and "multidev launch --chief --workers N --ps P" in last
