"""Record TensorFlow 2.21's numbers for ``_mw_evaluate_program.py`` (CI has no TensorFlow).

    /work/tfvenv/bin/python tests/multiworker/record_mw_evaluate.py

starts 2 local TF worker processes with TF_CONFIG on loopback ports (MultiWorkerMirroredStrategy on
CPU; tf-keras 2, as for the tutorials), waits for both, and writes ``mw_evaluate_tf.json``: per
worker, the program's JSON.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "_mw_evaluate_program.py")


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def main():
    out = tempfile.mkdtemp(prefix="mw_evaluate_tf_")
    cluster = {"worker": [f"localhost:{p}" for p in free_ports(2)]}
    procs = []
    for i in range(2):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
                   CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2", TF_USE_LEGACY_KERAS="1")
        procs.append(subprocess.Popen([sys.executable, PROGRAM, "tf", out], env=env))
    codes = [p.wait(timeout=600) for p in procs]
    if any(codes):
        raise SystemExit(f"TF workers exited with {codes}")
    result = {"tensorflow": __import__("tensorflow").__version__,
              "workers": [json.load(open(os.path.join(out, f"worker{i}.json"))) for i in range(2)]}
    with open(os.path.join(HERE, "mw_evaluate_tf.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(json.dumps(result)[:2000])


if __name__ == "__main__":
    main()
