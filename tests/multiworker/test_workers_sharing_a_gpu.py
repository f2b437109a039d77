"""More workers than GPUs: each worker gets one GPU (dealt round robin by ``multidev launch``, the
``LOCAL_RANK``-th under torchrun, as a DDP program takes it), and workers that share a GPU reduce with
Gloo, since NCCL refuses two processes on one GPU (first seen on an H200: ``multidev bench scaling``'s
MultiWorkerMirroredStrategy with 2 processes on the one GPU failed). An explicit NCCL request on a
shared GPU fails at once on every worker, saying why.

The GPUs are stand-ins (``tests.devices.fake_gpus``: CUDA device count faked, tensors on the CPU), the
workers real processes on loopback with torchrun's variables."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest

from multidev import errors
from multidev.cli.launch import gpu_slices
from multidev.collectives.process_gpus import choose_backend
from multidev.collectives.process_world import ProcessMember, ProcessWorld, free_loopback_ports
from tests.devices.fake_gpus import fake_gpus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("count, tasks, per_worker, visible, expected", [
    (1, 4, None, None, ["0", "0", "0", "0"]),            # one GPU, four workers: all on it
    (2, 4, None, None, ["0", "1", "0", "1"]),            # dealt round robin, one each
    (2, 3, None, "5,7", ["5", "7", "5"]),                # the launcher's own CUDA_VISIBLE_DEVICES names them
    (4, 2, None, None, ["0,1", "2,3"]),                  # enough GPUs: an even share, as before
    (4, 2, None, "3, 2,1,0", ["3,2", "1,0"]),
    (2, 4, 1, None, None),                               # --devices-per-worker 1 needs 4: nothing sliced
    (0, 2, None, None, None),                            # no GPU
])
def test_launch_gives_every_worker_a_gpu(count, tasks, per_worker, visible, expected):
    assert gpu_slices(count, tasks, per_worker, visible) == expected


def _world(size: int) -> ProcessWorld:
    members = tuple(ProcessMember("worker", r, f"10.0.0.{r + 1}:2222") for r in range(size))
    return ProcessWorld(rank=0, members=members, store_host="10.0.0.1", store_port=2222, bind_host=None)


def test_backend_choice(caplog):
    world = _world(3)
    assert choose_backend("auto", {}, world) == "nccl"
    assert choose_backend("nccl", {}, world) == "nccl"
    with caplog.at_level(logging.WARNING, logger="multidev.distribute"):
        assert choose_backend("auto", {"GPU-a": [1, 2]}, world) == "gloo"
    assert "worker 1 (10.0.0.2:2222) and worker 2 (10.0.0.3:2222) compute on the same GPU (GPU-a)" in caplog.text
    with pytest.raises(errors.FailedPreconditionError, match=r"needs one GPU per process, but worker 1 .* and "
                       r"worker 2 .* same GPU \(GPU-a\).*use CommunicationImplementation.AUTO or RING"):
        choose_backend("nccl", {"GPU-a": [1, 2]}, world)


def test_torchrun_processes_take_their_local_rank_gpu():
    code = fake_gpus(3, """
        import multidev as md
        from multidev.distribute.cluster_resolver import TorchrunClusterResolver
        from multidev.distribute.multi_worker_mirrored_strategy import _local_devices
        gpu = md.config.list_physical_devices("GPU")[1]   # the second GPU split in two
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(100)] * 2)
        def names(local_rank, local_world):
            env = dict(RANK=str(local_rank), WORLD_SIZE="8", LOCAL_RANK=str(local_rank),
                       LOCAL_WORLD_SIZE=str(local_world), MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
            return [d.name.rsplit("/", 1)[1] for d in _local_devices(TorchrunClusterResolver(env))]
        print([names(0, 4), names(1, 4), names(2, 4), names(3, 4), names(0, 1)])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str([
        ["device:GPU:0"], ["device:GPU:1", "device:GPU:2"], ["device:GPU:3"], ["device:GPU:0"],   # 4th: modulo 3
        ["device:GPU:0", "device:GPU:1", "device:GPU:2", "device:GPU:3"]])                      # one per host: all


_STAND_IN = """
    from multidev.distribute import multi_worker_mirrored_strategy as strategy_module
    strategy_module.gpu_identity = lambda index: f"GPU-stand-in-{index}"   # no CUDA here to ask for a UUID
"""
_WORKER = """
    import json, logging, os, torch
    import multidev as md
    logging.basicConfig()
    options = md.distribute.experimental.CommunicationOptions(implementation=os.environ["IMPLEMENTATION"])
    try:
        strategy = md.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    except md.errors.OpError as err:
        print("RESULT " + json.dumps({"error": type(err).__name__, "message": str(err)}), flush=True)
        raise SystemExit(0)
    rank = int(os.environ["RANK"])
    with strategy.scope():
        net = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
    def step(x):
        opt.zero_grad()
        net(x).sum().backward()
        opt.step()
        return md.distribute.get_replica_context().all_reduce("SUM", x)
    before = net.weight.detach().clone().tolist()   # worker 0's is the one broadcast at the first run
    total = strategy.run(step, args=(torch.full((1, 2), float(rank + 1)),))
    print("RESULT " + json.dumps({"backend": strategy.extended._process.backend_name,
                                  "devices": list(strategy.extended.worker_devices),
                                  "sum": strategy.experimental_local_results(total)[0].tolist(),
                                  "before": before, "weight": net.weight.detach().tolist()}), flush=True)
"""


def _two_workers_on_one_gpu(implementation: str, real_gpu: bool = False) -> list[tuple[dict, str]]:
    code = fake_gpus(1, _STAND_IN + _WORKER) if not real_gpu else textwrap.dedent(_WORKER)
    port = free_loopback_ports(1)[0]
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", IMPLEMENTATION=implementation, RANK=str(rank),
                   WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), MULTIDEV_JOB_SECRET="stand-in-gpus-" + str(port))
        env.pop("TF_CONFIG", None)
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
            assert p.returncode == 0 and lines, f"rc={p.returncode}\n{out}\n{err}"
            results.append((json.loads(lines[-1][len("RESULT "):]), err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return results


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_two_workers_on_one_gpu_train_with_gloo():
    results = _two_workers_on_one_gpu("AUTO")
    for rank, (result, stderr) in enumerate(results):
        assert result["backend"] == "gloo"
        assert result["devices"] == [f"/job:worker/replica:0/task:{rank}/device:GPU:0"]
        assert result["sum"] == [[3.0, 3.0]]
        # mean gradient over the workers' inputs (1, 1) and (2, 2): 1.5 each, lr 0.1
        assert result["weight"][0] == pytest.approx([w - 0.15 for w in results[0][0]["before"][0]], abs=1e-6)
        assert "compute on the same GPU (GPU-stand-in-0)" in stderr


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_nccl_on_a_shared_gpu_is_refused_on_every_worker():
    for result, _ in _two_workers_on_one_gpu("NCCL"):
        assert result["error"] == "FailedPreconditionError"
        assert "NCCL needs one GPU per process" in result["message"]
        assert "same GPU (GPU-stand-in-0)" in result["message"]


@pytest.mark.gpu
@pytest.mark.timeout(180)
def test_two_workers_on_one_real_gpu_train_with_gloo():
    """The same on the real GPU (CUDA tensors through Gloo), where NCCL's refusal was first seen."""
    results = _two_workers_on_one_gpu("AUTO", real_gpu=True)
    for rank, (result, stderr) in enumerate(results):
        assert result["backend"] == "gloo", stderr
        assert result["devices"] == [f"/job:worker/replica:0/task:{rank}/device:GPU:0"]
        assert result["sum"] == [[3.0, 3.0]]
        assert result["weight"][0] == pytest.approx([w - 0.15 for w in results[0][0]["before"][0]], abs=1e-6)
        assert "compute on the same GPU (GPU-" in stderr
