"""The conformance suite: TensorFlow's own tf.distribute tests, ported, give TensorFlow's answers.

Every case in ``cases/`` runs on multidev in one fresh interpreter (two logical CPUs, as the
recorder configures TensorFlow) and its observation is compared with TensorFlow 2.21's, recorded
in ``tf_2.21.json`` by ``record_tf.py``. A case multidev cannot pass yet is listed in ``KNOWN``
with the reason (and in docs/architecture.md, "Where multidev differs"); it must still fail, so a
fix shows up as an unexpected pass to move out of the table.
"""

from __future__ import annotations

import json
import os

import pytest

from conftest import run_fresh
from harness import all_cases, same

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = os.path.join(HERE, "tf_2.21.json")

#: case id -> why multidev differs (each also in docs/architecture.md).
KNOWN: dict[str, str] = {
}


@pytest.fixture(scope="module")
def observed() -> dict:
    """Every case's multidev observation, from one fresh interpreter."""
    proc = run_fresh(f"import runpy, sys; sys.argv = ['run_md.py']; runpy.run_path({os.path.join(HERE, 'run_md.py')!r}, "
                     "run_name='__main__')", timeout=240, env={"MULTIDEV_COLLECTIVE_TIMEOUT": "10"})
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _recorded() -> dict:
    with open(RECORD) as f:
        return json.load(f)["cases"]


CASE_IDS = [case_id for case_id, _ in all_cases()]


def test_every_case_is_recorded():
    """A case added without recording TensorFlow's side would compare against nothing."""
    assert sorted(set(CASE_IDS) - set(_recorded())) == []


def test_known_differences_are_cases():
    assert sorted(set(KNOWN) - set(CASE_IDS)) == []


@pytest.mark.parametrize("case_id", [pytest.param(c, marks=pytest.mark.xfail(reason=KNOWN[c], strict=True))
                                     if c in KNOWN else c for c in CASE_IDS])
def test_case(case_id, observed):
    expected = _recorded()[case_id]
    got = observed[case_id]
    assert same(got, expected), f"{case_id}: multidev gives {json.dumps(got)}, TensorFlow 2.21 gives {json.dumps(expected)}"
