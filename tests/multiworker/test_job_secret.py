"""The per-job secret of the rendezvous: impostors are refused, forged store values never used."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest
import torch.distributed as dist

from multidev import errors
from multidev.collectives import process_auth
from multidev.collectives.job_secret import SECRET_ENV, job_secret, new_secret
from multidev.collectives.process_auth import JobGate, SignedStore
from multidev.collectives.process_rendezvous import join, open_store
from multidev.collectives.process_world import ProcessMember, ProcessWorld
from tests.multiworker._cluster import ROOT, cluster_configs, free_ports, results_json

pytestmark = pytest.mark.timeout(120)

SECRET = new_secret()


# -- signed values and the gate, in this process ------------------------------------------------


def test_signed_values_read_back_and_forged_or_moved_values_are_refused():
    raw = dist.HashStore()
    store = SignedStore(raw, b"k" * 32)
    store.set("job/a", "hello")
    assert store.get("job/a") == b"hello"
    raw.set("job/b", b"x" * 40)                                    # written without the key
    raw.set("job/c", raw.get("job/a"))                             # a valid record copied to another key
    for key in ("job/b", "job/c"):
        with pytest.raises(errors.UnauthenticatedError, match=rf"key '{key}' .* not signed with this job's secret"):
            store.get(key)
    with pytest.raises(errors.UnauthenticatedError):
        SignedStore(raw, b"other key" * 4).get("job/a")             # another job's key


def test_secret_from_the_environment():
    assert job_secret({}) is None
    assert job_secret({SECRET_ENV: SECRET}) == SECRET.encode()
    for short in ("", "   ", "password"):
        with pytest.raises(ValueError, match=r"has \d+ non-blank characters; a job secret needs at least 16") as info:
            job_secret({SECRET_ENV: short})
        assert "password" not in str(info.value)                   # never echo a secret


def _gate(store, secret, warn_open=None):
    return JobGate(store, "p", secret, "worker 1 (h:2)", "h:1", warn_open=warn_open)


@pytest.mark.parametrize("chief, joiner, message", [
    (SECRET, None, r"worker 1 \(h:2\) was refused by the job at h:1: the job requires a per-job secret \(MULTIDEV_JOB_SECRET"),
    (SECRET, new_secret(), r"this process's MULTIDEV_JOB_SECRET differs from the job's"),
    (None, SECRET, r"refuses the rendezvous at h:1: this process has a job secret .* the process hosting the rendezvous has none"),
])
def test_the_gate_refuses_a_process_without_the_jobs_secret(chief, joiner, message):
    store = dist.HashStore()
    _gate(store, None if chief is None else chief.encode()).post()
    with pytest.raises(errors.UnauthenticatedError, match=message):
        _gate(store, None if joiner is None else joiner.encode()).admit()
    assert store.num_keys() == 1                                    # the refused process wrote nothing


def test_the_gate_admits_the_jobs_processes_and_signs_their_values():
    store = dist.HashStore()
    chief = _gate(store, SECRET.encode())
    chief.post()
    session = _gate(store, SECRET.encode()).admit()
    assert isinstance(session, SignedStore)
    session.set("x", "1")
    assert chief.admit().get("x") == b"1"                          # same key on both sides
    chief.confirm()
    _gate(store, SECRET.encode()).post()                            # someone replaces the gate
    with pytest.raises(errors.UnauthenticatedError, match="gate record .* changed"):
        chief.confirm()


@pytest.mark.parametrize("reach, who", [("network", "any process that can reach h:1 over the network"),
                                         ("loopback", "any process on this machine")])
def test_without_a_secret_a_job_warns_once_naming_who_could_join(monkeypatch, reach, who):
    monkeypatch.setattr(process_auth, "_warned", False)
    store = dist.HashStore()
    _gate(store, None).post()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _gate(store, None).admit() is store                 # no warning asked for (the ps group's gate)
        assert _gate(store, None, warn_open=reach).admit() is store
        assert _gate(store, None, warn_open=reach).admit() is store
    assert len(caught) == 1, [str(w.message) for w in caught]
    message = str(caught[0].message)
    assert message.startswith(f"This multi-worker job runs without a job secret: {who}")
    assert "receive the weights" in message and "MULTIDEV_JOB_SECRET" in message


def test_a_forged_join_record_is_ignored_and_named(monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    port = free_ports(1)[0]
    members = (ProcessMember("worker", 0, f"127.0.0.1:{port}"), ProcessMember("worker", 1, "127.0.0.1:1"))
    world = ProcessWorld(rank=0, members=members, store_host="127.0.0.1", store_port=port, bind_host="127.0.0.1")
    outcome = {}

    def chief():
        try:
            join(open_store(world, 10), world, "t", 4)
        except Exception as err:  # noqa: BLE001 - examined below
            outcome["error"] = err

    thread = threading.Thread(target=chief)
    thread.start()
    attacker = dist.TCPStore("127.0.0.1", port, None, False, __import__("datetime").timedelta(seconds=10))
    attacker.wait(["t/gate"])
    attacker.set("t/join/1", "worker 1 (127.0.0.1:1)")              # an impostor's record for worker 1
    thread.join(30)
    assert isinstance(outcome.get("error"), errors.DeadlineExceededError), outcome
    assert "worker 1 (127.0.0.1:1) did not join" in str(outcome["error"])
    assert "not signed with this job's secret was seen: another process tried to join in its place" in str(outcome["error"])


# -- an impostor process against a real job ------------------------------------------------------

BODY = """
import json, os, sys, torch
from multidev.distribute.cluster_resolver import TFConfigClusterResolver, collective_world
from multidev.collectives.process import ProcessCollective
try:
    with ProcessCollective(collective_world(TFConfigClusterResolver()), timeout_seconds=60) as pc:
        t = torch.full((2,), float(os.environ["VALUE"]))
        pc.all_reduce(t)
        print("RESULT " + json.dumps({"sum": t.tolist()}), flush=True)
except Exception as err:
    print("RESULT " + json.dumps({"error": type(err).__name__, "message": str(err)}), flush=True)
    sys.exit(3)
"""


def _start(tf_config: str, value: float, secret: str | None) -> subprocess.Popen:
    env = dict(os.environ, TF_CONFIG=tf_config, VALUE=str(value), OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop(SECRET_ENV, None)
    if secret is not None:
        env[SECRET_ENV] = secret
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(BODY)], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(proc: subprocess.Popen, timeout: float) -> dict:
    out, err = proc.communicate(timeout=timeout)
    return results_json(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))


@pytest.mark.slow
def test_an_impostor_without_the_secret_is_refused_and_the_job_never_sees_its_values():
    (_, _, chief_cfg), (_, _, worker_cfg) = cluster_configs(2)
    procs = [_start(chief_cfg, 1.0, SECRET)]
    try:
        # Two impostors take worker 1's TF_CONFIG before the real worker 1 starts.
        for secret, message in ((None, "the job requires a per-job secret"), (new_secret(), "differs from the job's")):
            impostor = _start(worker_cfg, 1000.0, secret)
            procs.append(impostor)
            result = _finish(impostor, 90)
            assert result["error"] == "UnauthenticatedError" and message in result["message"], result
            assert "worker 1 (127.0.0.1:" in result["message"]
        procs.append(_start(worker_cfg, 2.0, SECRET))
        assert _finish(procs[-1], 90) == {"sum": [3.0, 3.0]}        # 1 + 2: no 1000 from an impostor
        assert _finish(procs[0], 30) == {"sum": [3.0, 3.0]}
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


# -- the launcher makes one secret per job -------------------------------------------------------

SECRET_PRINTER = """
import hashlib, json, os
task = json.loads(os.environ["TF_CONFIG"])["task"]
secret = os.environ.get("MULTIDEV_JOB_SECRET", "")
print("SECRET", task["index"], len(secret), hashlib.sha256(secret.encode()).hexdigest()[:16])
"""


def _launch_secrets(tmp_path, secret=None) -> dict:
    script = tmp_path / "secret.py"
    script.write_text(textwrap.dedent(SECRET_PRINTER))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TF_CONFIG", None)
    env.pop(SECRET_ENV, None)
    if secret is not None:
        env[SECRET_ENV] = secret
    proc = subprocess.run([sys.executable, "-m", "multidev.cli.main", "launch", "--workers", "2", str(script)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = {}
    for line in proc.stdout.splitlines():
        if "SECRET" in line:
            index, length, digest = line.split("SECRET", 1)[1].split()
            found[int(index)] = (int(length), digest)
    return found


def test_launch_gives_every_task_of_a_job_one_fresh_secret(tmp_path):
    first, second = _launch_secrets(tmp_path), _launch_secrets(tmp_path)
    assert set(first) == set(second) == {0, 1}
    assert first[0] == first[1] and second[0] == second[1]          # one secret per job ...
    assert first[0] != second[0] and first[0][0] == 64               # ... a new random one each time
    kept = _launch_secrets(tmp_path, SECRET)                         # a secret set by the user is kept
    assert kept[0] == kept[1] == (64, hashlib.sha256(SECRET.encode()).hexdigest()[:16])
