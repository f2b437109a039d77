"""Seeds 000/001, TensorFlow's "Use a GPU" guide, every code cell as written (ported mechanically:
tests/seeds/seed_001_cells.py), run in order in one kernel on the guide's machine: four GPUs (stand-in
GPUs, tests/devices/fake_gpus.py, so it runs anywhere), each cell checked against what the guide prints.

Where multidev differs (docs/architecture.md): an op outside any ``md.device`` scope runs where torch
puts it (the CPU, or its inputs' device), where TensorFlow prefers GPU:0; the cells that place ops
explicitly log the guide's devices exactly.
"""

from __future__ import annotations

import re

import pytest

from tests.devices.fake_gpus import fake_gpus
from tests.seeds._kernel import assert_ran, run_cells
from tests.seeds.seed_001_cells import CELLS

PREFIX = "/job:localhost/replica:0/task:0/device:"
MATMUL = "tensor([[22., 28.],\n        [49., 64.]])"
LOGGING = "import logging\nlogging.basicConfig(level=logging.INFO, format='%(levelname)s:%(name)s:%(message)s')\n"


@pytest.fixture(scope="module")
def guide(tmp_path_factory):
    return run_cells(CELLS, cwd=tmp_path_factory.mktemp("seed_001"), preamble=fake_gpus(4, LOGGING))


def _cell(guide, name):
    assert_ran(guide[name])
    return guide[name]


def _placements(err):
    return re.findall(r"Executing op (\w+) in device " + re.escape(PREFIX) + r"(\w+:\d+)", err)


def test_setup(guide):
    assert _cell(guide, "setup")[0] == "Num GPUs Available:  4\n"


def test_logging_device_placement(guide):
    out, err = _cell(guide, "logging_device_placement")
    assert out.strip() == MATMUL
    assert [op for op, _ in _placements(err)] == ["as_tensor", "as_tensor", "matmul"]   # every op is logged


def test_manual_device_placement(guide):
    out, err = _cell(guide, "manual_device_placement")
    assert out.strip() == MATMUL
    assert _placements(err)[:2] == [("as_tensor", "CPU:0"), ("as_tensor", "CPU:0")]     # a and b on the CPU


@pytest.mark.parametrize("cell, message", [
    ("visible_devices", "Visible devices cannot be modified after being initialized"),
    ("memory_growth", "Physical devices cannot be modified after being initialized"),
    ("memory_limit", "Virtual devices cannot be modified after being initialized"),
    ("virtual_gpus", "Virtual devices cannot be modified after being initialized"),
])
def test_configuration_after_initialization_prints_the_guides_errors(guide, cell, message):
    assert _cell(guide, cell)[0].strip() == message


def test_single_gpu_on_multi_gpu_system(guide):
    out, err = _cell(guide, "single_gpu_on_multi_gpu_system")
    assert out == ""                                               # GPU:2 exists here: no error
    assert _placements(err) == [("as_tensor", "GPU:2"), ("as_tensor", "GPU:2"), ("matmul", "GPU:2")]


def test_soft_device_placement(guide):
    out, err = _cell(guide, "soft_device_placement")
    assert out.strip() == MATMUL and [op for op, _ in _placements(err)] == ["as_tensor", "as_tensor", "matmul"]


def test_with_strategy(guide):
    out, err = _cell(guide, "with_strategy")
    devices = ", ".join(f"'{PREFIX}GPU:{i}'" for i in range(4))
    assert f"INFO:multidev.distribute:Using MirroredStrategy with devices ({devices})" in err


def test_manual_placement(guide):
    out, err = _cell(guide, "manual_placement")
    assert out.strip() == "tensor([[ 88., 112.],\n        [196., 256.]])"
    matmuls = [device for op, device in _placements(err) if op == "matmul"]
    assert matmuls == ["GPU:0", "GPU:1", "GPU:2", "GPU:3"]
    assert {device for op, device in _placements(err) if op == "add"} == {"CPU:0"}       # add_n on the CPU


def test_an_unknown_device_is_caught_by_the_guides_except_runtime_error(capsys):
    """'If the device you have specified does not exist, you will get a RuntimeError: .../device:GPU:2
    unknown device.' (TF 2.21 raises InvalidArgumentError: multidev's error is both.) In this process:
    no GPU, soft placement off."""
    import multidev as md
    code = dict(CELLS)["single_gpu_on_multi_gpu_system"]
    md.config.set_soft_device_placement(False)
    try:
        exec(compile(code, "<seed cell>", "exec"), {"md": md, "torch": __import__("torch")})
    finally:
        md.config.set_soft_device_placement(True)
        md.debugging.set_log_device_placement(False)
    out = capsys.readouterr().out
    assert out.startswith(f"{PREFIX}GPU:2 unknown device."), out
    assert issubclass(md.errors.UnknownDeviceError, md.errors.InvalidArgumentError)
    assert issubclass(md.errors.UnknownDeviceError, RuntimeError)
