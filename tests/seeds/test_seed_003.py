"""Seed 003, the Q&A on ``tf.device('/gpu:0')``: its three examples as written (tests/seeds/seed_003_cells.py),
on two stand-in GPUs, checked against what the answer says of them.

Examples 1 and 2 multiply 10000 x 10000 and 5000 x 5000 matrices: they run on stand-in GPUs whose
tensors are torch ``meta`` tensors (shapes only, nothing computed: tests/devices/fake_gpus.py), which
is enough to check where each op runs; example 3 trains for real (stand-in GPUs in CPU memory).
"""

from __future__ import annotations

import re

import pytest

from tests.devices.fake_gpus import fake_gpus
from tests.seeds._kernel import assert_ran, run_cells
from tests.seeds.seed_003_cells import CELLS, DATA

LOG = "import multidev as md\nmd.debugging.set_log_device_placement(True)\n"
LOGGING = "import logging\nlogging.basicConfig(level=logging.INFO, format='%(levelname)s:%(name)s:%(message)s')\n"


def _placements(err):
    return [(op, dev) for op, dev in re.findall(r"Executing op (\w+) in device \S+device:(\w+:\d+)", err)
            if op != "device"]           # torch.device(...) constructions inside md.device, not ops on data


@pytest.fixture(scope="module")
def placed(tmp_path_factory):
    return run_cells(CELLS[:2], cwd=tmp_path_factory.mktemp("seed_003"), preamble=fake_gpus(2, LOG, "meta"))


def test_example_1_uses_only_gpu_0(placed):
    assert_ran(placed["example_1_single_gpu"])
    assert _placements(placed["example_1_single_gpu"][1]) == [("randn", "GPU:0"), ("matmul", "GPU:0")]


def test_example_2_uses_both_gpus_then_adds_across_them(placed):
    assert_ran(placed["example_2_inefficient_multi_gpu"])
    ops = _placements(placed["example_2_inefficient_multi_gpu"][1])
    assert ops[:4] == [("randn", "GPU:0"), ("matmul", "GPU:0"), ("randn", "GPU:1"), ("matmul", "GPU:1")]
    assert ops[4] == ("add", "GPU:0")       # "will likely run on CPU or GPU 0": the first input's device


def test_example_3_strategy_trains_on_every_gpu(tmp_path):
    outputs = run_cells([DATA, *CELLS[2:]], cwd=tmp_path, preamble=fake_gpus(2, LOGGING))
    assert_ran(outputs["example_3_strategy"])
    out, err = outputs["example_3_strategy"]
    assert "Using MirroredStrategy with devices ('/job:localhost/replica:0/task:0/device:GPU:0', " \
           "'/job:localhost/replica:0/task:0/device:GPU:1')" in err
    losses = [float(v) for v in re.findall(r"^2/2 \[=+\] - .* - loss: (\d+\.\d{4}) - mae: \d+\.\d{4}$", out, re.M)]
    assert len(losses) == 10 and losses[-1] < 0.7 * losses[0]
