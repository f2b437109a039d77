"""TensorFlow's runtime switches and queries that training scripts call before their first step:
``tf.config.run_functions_eagerly``, ``tf.executing_eagerly``, ``tf.config.experimental.enable_op_determinism``,
``tf.test.is_gpu_available`` / ``gpu_device_name`` / ``is_built_with_cuda``."""

import pytest
import torch

import multidev as md
from tests.conftest import run_fresh


def test_run_functions_eagerly_runs_jit_functions_as_written():
    seen = []

    @md.function(jit_compile=True)
    def step(x):
        seen.append(md.executing_eagerly())     # a Python side effect: only an eager run records it each call
        return x * 2

    assert md.config.functions_run_eagerly() is False
    md.config.run_functions_eagerly(True)
    try:
        assert md.config.functions_run_eagerly() is True
        assert step(torch.ones(2)).tolist() == [2.0, 2.0] and step(torch.ones(3)).shape == (3,)
        assert seen == [True, True]
    finally:
        md.config.run_functions_eagerly(False)
    assert md.executing_eagerly() is True
    with pytest.raises(TypeError, match="run_functions_eagerly expects a bool, got 'yes'"):
        md.config.run_functions_eagerly("yes")
    assert md.config.functions_run_eagerly() is False


def test_gpu_queries_agree_with_torch():
    assert md.test.is_built_with_cuda() == (torch.version.cuda is not None)
    assert md.test.is_built_with_gpu_support() == (torch.version.cuda is not None
                                                    or getattr(torch.version, "hip", None) is not None)
    has_gpu = torch.cuda.is_available() and torch.cuda.device_count() > 0
    assert md.test.is_gpu_available() == has_gpu
    assert md.test.gpu_device_name() == ("/device:GPU:0" if has_gpu else "")
    assert md.test.is_gpu_available(min_cuda_compute_capability=(99, 0)) is False


def test_enable_op_determinism_turns_on_torchs_deterministic_algorithms():
    out = run_fresh("""
        import os, torch, multidev as md
        assert not torch.are_deterministic_algorithms_enabled()
        md.config.experimental.enable_op_determinism()
        print(torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
              torch.backends.cudnn.benchmark, os.environ["CUBLAS_WORKSPACE_CONFIG"])
    """)
    assert out.stdout.split() == ["True", "True", "False", ":4096:8"]
