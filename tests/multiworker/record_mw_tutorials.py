"""Record TensorFlow 2.21's numbers for ``_mw_tutorials_program.py`` (CI has no TensorFlow).

    /work/tfvenv/bin/python tests/multiworker/record_mw_tutorials.py

starts 2 local TF worker processes with TF_CONFIG on loopback ports (MultiWorkerMirroredStrategy on
CPU), waits for both, and writes ``mw_tutorials_tf.json``: per worker, the program's JSON, plus the
files left in the checkpoint directory (the chief's only: the others delete their temporary dirs).
"""

import json
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "_mw_tutorials_program.py")


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def backups_left(out):
    """What each BackupAndRestore directory holds after the job (a completed fit deletes its backup)."""
    return {name: sorted(os.path.relpath(os.path.join(d, f), os.path.join(out, name))
                         for d, _, files in os.walk(os.path.join(out, name)) for f in files)
            for name in sorted(os.listdir(out)) if name.startswith("backup_")}


def run_tf_workers(program, out, workers=2):
    """Run ``program tf out`` as ``workers`` TF worker processes (TF_CONFIG on loopback, tf-keras 2);
    returns each worker's ``out/worker<i>.json``."""
    cluster = {"worker": [f"localhost:{p}" for p in free_ports(workers)]}
    procs = []
    for i in range(workers):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
                   CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2", TF_USE_LEGACY_KERAS="1")
        procs.append(subprocess.Popen([sys.executable, program, "tf", out], env=env))
    codes = [p.wait(timeout=600) for p in procs]
    if any(codes):
        raise SystemExit(f"TF workers exited with {codes}")
    return [json.load(open(os.path.join(out, f"worker{i}.json"))) for i in range(workers)]


def write_record(result, name):
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(json.dumps(result)[:2000])


def main():
    out = tempfile.mkdtemp(prefix="mw_tutorials_tf_")
    workers = run_tf_workers(PROGRAM, out)
    write_record({"tensorflow": __import__("tensorflow").__version__, "workers": workers,
                  "ckpt_files": sorted(os.listdir(os.path.join(out, "ckpt"))), "backups_left": backups_left(out)},
                 "mw_tutorials_tf.json")


if __name__ == "__main__":
    main()
