"""Record TensorFlow's side of the conformance cases into tf_<version>.json (run once per TF release,
in TensorFlow's own venv, never in CI):

    /work/tfvenv/bin/python tests/conformance/record_tf.py [case id or file ...]

Keras cases use TensorFlow 2.21's own ``tf.keras`` (Keras 3 on TensorFlow). A failed collective
leaves TensorFlow's collective executor aborted for the rest of the process, so after a case that
raises, the remaining cases run in a fresh interpreter (each case sees a clean TensorFlow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

from harness import all_cases, observe  # noqa: E402


def worker(case_ids: list) -> None:
    """Run cases in order, one JSON line each, and stop after the first that raises or at the
    end of the first case file (TF 2.21's MirroredStrategy keeps a PER_REPLICA input mode it was
    once given for later datasets: a file's cases must not see the state an earlier file left)."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    tf.get_logger().setLevel("ERROR")
    functions = dict(all_cases())
    for case_id in case_ids:
        if case_id.split(".")[0] != case_ids[0].split(".")[0]:
            return
        result = observe(functions[case_id], tf)
        print("CASE " + json.dumps([case_id, result]), flush=True)
        if isinstance(result, dict) and "raises" in result:
            return


def run_all_isolated(case_ids: list, save) -> dict:
    """Every case, in workers restarted after a raise; ``save(observed)`` after each worker."""
    observed: dict = {}
    todo = list(case_ids)
    while todo:
        proc = subprocess.run([sys.executable, __file__, "--worker", *todo], capture_output=True, text=True)
        lines = [json.loads(line[5:]) for line in proc.stdout.splitlines() if line.startswith("CASE ")]
        if not lines:
            raise RuntimeError(f"the TensorFlow worker died at {todo[0]}:\n{proc.stderr[-3000:]}")
        observed.update(dict(lines))
        todo = [c for c in todo if c not in observed]
        save(observed)
    return observed


def save(observed: dict) -> None:
    """Merge ``observed`` into the record (cases that no longer exist are dropped)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"tf_{'.'.join(tf.__version__.split('.')[:2])}.json")
    recorded = {}
    if os.path.exists(path):
        with open(path) as f:
            recorded = json.load(f)["cases"]
    known = {c for c, _ in all_cases()}
    merged = {c: o for c, o in {**recorded, **observed}.items() if c in known}
    with open(path, "w") as f:
        json.dump({"tensorflow": tf.__version__, "cases": merged}, f, indent=1, sort_keys=True)
        f.write("\n")


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2:])
        return
    only = set(sys.argv[1:]) or None   # case ids, or file stems ("reduce") to record again
    if only:
        only |= {c for c, _ in all_cases() if c.split(".")[0] in only}
    observed = run_all_isolated([c for c, _ in all_cases() if only is None or c in only], save)
    print(f"{len(observed)} cases recorded")


if __name__ == "__main__":
    main()
