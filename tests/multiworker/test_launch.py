"""`multidev launch`: local TF_CONFIG jobs (prefixes, failures, Ctrl-C) and the torchrun delegation."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from multidev.cli import launch
from tests.multiworker._cluster import ROOT, free_ports

pytestmark = pytest.mark.timeout(180)

ALL_REDUCE_SCRIPT = """
import os, sys, torch
from multidev.distribute.cluster_resolver import collective_world, default_cluster_resolver
from multidev.collectives.process import ProcessCollective
world = collective_world(default_cluster_resolver())
with ProcessCollective(world, timeout_seconds=30) as pc:
    t = torch.tensor([float(world.rank + 1)])
    pc.all_reduce(t)
print(f"rank={world.rank} size={world.world_size} sum={t.item()} args={sys.argv[1:]} "
      f"devices={os.environ.get('MULTIDEV_DEVICES_PER_WORKER')}")
print(f"stderr of rank {world.rank}", file=sys.stderr)
"""

SLEEPER_SCRIPT = """
import json, os, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
print(f"started pid={os.getpid()}", flush=True)
if (task["type"], task["index"]) == ("worker", 1) and "--fail" in sys.argv:
    time.sleep(0.5)
    sys.exit(3)
time.sleep(120)
print("not stopped")
"""


def write(tmp_path, name, code):
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return str(path)


def launch_cmd(*args):
    return [sys.executable, "-m", "multidev.cli.main", "launch", *args]


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    e["OMP_NUM_THREADS"] = "1"
    e.pop("TF_CONFIG", None)
    return e


def run(args, timeout=120):
    return subprocess.run(launch_cmd(*args), capture_output=True, text=True, timeout=timeout, env=env(), cwd=ROOT)


@pytest.mark.slow
def test_two_local_workers_with_prefixed_output(tmp_path):
    script = write(tmp_path, "train.py", ALL_REDUCE_SCRIPT)
    proc = run(["--workers", "2", "--devices-per-worker", "2", script, "--lr", "0.1"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in (0, 1):
        assert f"[worker {rank}] rank={rank} size=2 sum=3.0 args=['--lr', '0.1'] devices=2" in proc.stdout
        assert f"[worker {rank}] stderr of rank {rank}" in proc.stderr


def test_a_failing_worker_stops_the_others_and_sets_the_exit_code(tmp_path):
    script = write(tmp_path, "fail.py", SLEEPER_SCRIPT)
    start = time.monotonic()
    proc = run(["--workers", "2", "--chief", "--ps", "1", "--stop-grace", "2", script, "--fail"], timeout=90)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "multidev launch: worker 1 failed with exit code 3; stopping chief 0, worker 0, ps 0." in proc.stderr
    assert "[worker 1] started" in proc.stdout  # the others may be stopped before they print
    assert "not stopped" not in proc.stdout
    assert time.monotonic() - start < 60  # the sleepers (120 s) were stopped, not waited for


def test_parameter_servers_are_stopped_once_the_others_succeed(tmp_path):
    script = write(tmp_path, "ps.py", """
import json, os, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
print("task", task["type"], task["index"], flush=True)
if task["type"] == "ps":
    time.sleep(120)   # a parameter server serves until stopped, as in TensorFlow
""")
    start = time.monotonic()
    proc = run(["--workers", "2", "--ps", "1", "--stop-grace", "2", script], timeout=90)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[worker 0] task worker 0" in proc.stdout and "[worker 1] task worker 1" in proc.stdout
    assert time.monotonic() - start < 60  # the ps (sleeping 120 s) was stopped; it may not even have printed yet


def test_ctrl_c_stops_every_task(tmp_path):
    script = write(tmp_path, "sleep.py", SLEEPER_SCRIPT)
    proc = subprocess.Popen(launch_cmd("--workers", "2", "--stop-grace", "2", script), env=env(), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = []
    try:
        deadline = time.monotonic() + 60
        while len(pids) < 2 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if "started pid=" in line:
                pids.append(int(line.rsplit("=", 1)[1]))
        assert len(pids) == 2
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=90)  # generous: a loaded 2-core machine can be slow to reap children
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert rc == 130
    assert "interrupted; stopping all tasks" in proc.stderr.read()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.slow
def test_multi_host_flags_delegate_to_torchrun(tmp_path):
    script = write(tmp_path, "train.py", ALL_REDUCE_SCRIPT)
    (port,) = free_ports(1)
    proc = run(["--nnodes", "1", "--node-rank", "0", "--rdzv-endpoint", f"127.0.0.1:{port}", "--workers", "2", script])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    for rank in (0, 1):
        assert f"[worker {rank}] rank={rank} size=2 sum=3.0" in out


def parse(*argv):
    parser = argparse.ArgumentParser()
    launch.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("argv, message", [
    (["train.py"], "--workers N is required"),
    (["--workers", "0", "train.py"], "--workers must be >= 1"),
    (["--workers", "1", "--ps", "-1", "train.py"], "--ps must be >= 0"),
    (["--nnodes", "2", "train.py"], "--nnodes needs --rdzv-endpoint"),
    (["--nnodes", "2", "--rdzv-endpoint", "h:1", "--ps", "1", "train.py"], "--chief/--ps are local-launch options"),
    (["--workers", "2", "--max-restarts", "1", "train.py"], "--max-restarts needs the elastic launcher"),
    (["--nnodes", "1", "--rdzv-endpoint", "h:1", "--max-restarts", "-1", "train.py"], "--max-restarts must be >= 0"),
    (["--workers", "2", "no_such_train.py"], r"script 'no_such_train.py' not found \(relative to .*-m NAME"),
    (["--nnodes", "1", "--rdzv-endpoint", "h:1", "no_such_train.py"], "script 'no_such_train.py' not found"),
])
def test_bad_arguments_are_refused_before_starting_anything(argv, message):
    with pytest.raises(SystemExit, match=message):
        launch.run(parse(*argv))


def test_elastic_command_and_local_cluster():
    cmd = launch.elastic_command(parse("--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "host0:29400",
                                       "--workers", "4", "train.py", "--epochs", "3"))
    assert cmd[1:3] == ["-m", "multidev.cli.elastic"]   # torch.distributed.run, with the worker's exit code
    text = " ".join(cmd)
    assert "--nnodes 2 --nproc-per-node 4 --rdzv-backend static --rdzv-endpoint host0:29400" in text
    assert "--node-rank 1" in text and text.endswith("train.py --epochs 3")
    cluster, tasks = launch.local_cluster(2, chief=True, ps=1)
    assert tasks == [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)]
    addresses = [a for job in cluster.values() for a in job]
    assert len(set(addresses)) == 4 and all(a.startswith("127.0.0.1:") for a in addresses)
    json.dumps(cluster)


def test_elastic_rendezvous_flags_fill_in_what_torchrun_guesses_from_the_hostname():
    cmd = launch.elastic_command(parse("--nnodes", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:29400",
                                       "--max-restarts", "3", "--node-rank", "0", "--rdzv-conf", "join_timeout=60",
                                       "train.py"))
    text = " ".join(cmd)
    assert "--max-restarts 3" in text
    assert "--rdzv-conf join_timeout=60,is_host=true" in text       # the endpoint is an address of this host
    assert "--local-addr 127.0.0.1" in text                         # the address that reaches the endpoint
    assert "--node-rank" not in text                                # c10d ranks hosts by arrival
    cmd = launch.elastic_command(parse("--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "192.0.2.7:1",
                                       "--rdzv-conf", "is_host=false", "--local-addr", "198.51.100.3", "train.py"))
    text = " ".join(cmd)
    assert "--rdzv-conf is_host=false " in text and "--local-addr 198.51.100.3" in text   # given: kept


def test_elastic_exit_code_is_the_workers():
    from multidev.cli import elastic

    assert elastic.exit_code_of(3) == 3 and elastic.exit_code_of(-9) == 137
    assert elastic.is_local_address("127.0.0.1") and not elastic.is_local_address("192.0.2.7")
    assert elastic.route_source_address("no-such-host.invalid") is None


def test_the_restart_code_of_a_preemption_checkpoint_is_explained(tmp_path):
    script = write(tmp_path, "preempted.py", "import json, os, sys\n"
                   "sys.exit(42 if json.loads(os.environ['TF_CONFIG'])['task']['index'] == 1 else 0)\n")
    proc = run(["--workers", "2", script], timeout=60)
    assert proc.returncode == 42, proc.stdout + proc.stderr
    assert ("worker 1 failed with exit code 42 (TensorFlow's restart code: a PreemptionCheckpointHandler saved a "
            "checkpoint; launch the job again to resume from it)") in proc.stderr
