"""Batches split over three replicas on one worker as TensorFlow 2.21 splits them (recorded in
three_replica_split_tensorflow.json by record_three_replica_split.py): with AUTO or DATA sharding every batch
in consecutive slices of ``ceil(B / 3)`` rows (16 rows: 6, 6, 4; md gave 6, 5, 5), with OFF the rows re-cut
in order into 6, 5, 5 where the batch size is known (a map leaves it unknown: 6, 6, 4 again)."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import run_fresh

HERE = os.path.dirname(__file__)
PROGRAM = ("import json, sys; sys.path.insert(0, {here!r}); import multidev as md; "
           "from _three_replica_cases import observe; "
           "print(json.dumps(observe(md, md.distribute.MirroredStrategy(['/cpu:0', '/cpu:1', '/cpu:2']))))")


@pytest.fixture(scope="module")
def ours() -> dict:
    proc = run_fresh(PROGRAM.format(here=HERE), timeout=120, env={"MULTIDEV_LOGICAL_CPUS": "3"})
    return json.loads(proc.stdout.strip().splitlines()[-1])


with open(os.path.join(HERE, "three_replica_split_tensorflow.json")) as f:
    RECORDED = json.load(f)["steps"]


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_three_replicas_split_as_tensorflow(ours, case):
    assert ours[case] == RECORDED[case]
