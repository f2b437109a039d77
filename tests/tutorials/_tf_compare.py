"""What the ``test_tf_more*_tutorials.py`` files share: md's observations of a tutorial program from a fresh
interpreter, TensorFlow's recorded ones, and the comparison of one program's observations."""

from __future__ import annotations

import json
import os

from tests.conftest import run_fresh
from tests.keras.test_tf_idioms import _differences

HERE = os.path.dirname(os.path.abspath(__file__))


def without(observations: dict, keys) -> dict:
    return {k: v for k, v in observations.items() if k not in keys}


def expected(json_name: str) -> dict:
    """TensorFlow 2.21's recorded observations (``tests/tutorials/<json_name>``)."""
    with open(os.path.join(HERE, json_name)) as f:
        return json.load(f)


def md_observations(program: str) -> dict:
    """``program``'s observations under md, in a fresh interpreter (it configures logical devices)."""
    proc = run_fresh(f"import runpy, sys; sys.argv = [{program!r}, 'md']; runpy.run_path({program!r}, "
                     "run_name='__main__')", timeout=600)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compared(name: str, want: dict, got: dict, md_differs: dict, random_after: tuple) -> list:
    """The problems of ``name`` (``program/replicas``): md raising where TF did not, a known difference
    (``md_differs``: (program, key) -> (check, why)) that changed, any other observation apart, the ones made
    after random draws (``random_after``) left out."""
    if "raises" in got and "raises" not in want:
        return [f"{name}: {got}"]
    program = name.partition("/")[0]
    problems = []
    for (differs, key), (check, _why) in md_differs.items():
        if differs == program and key in want:
            if not check(got.get(key), want[key]):
                problems.append(f"{name}/{key}: the known difference changed: {got.get(key)!r}")
            want, got = without(want, (key,)), without(got, (key,))
    return problems + _differences(without(want, random_after), without(got, random_after), name)
