"""md.print and md.TensorShape beyond the conformance cases (tests/conformance/cases/input_guide.py
compares their output with TensorFlow's): the default stream and the refused ones."""

import sys

import numpy as np
import pytest
import torch

import multidev as md


def test_print_goes_to_stderr_by_default(capsys):
    md.print(torch.tensor([[1, 2], [3, 4]]), "x", np.array([0.5]))
    captured = capsys.readouterr()
    assert captured.err == "[[1 2]\n [3 4]] x [0.5]\n" and captured.out == ""
    md.print(torch.arange(3.0), output_stream=sys.stdout)
    assert capsys.readouterr().out == "[0 1 2]\n"


def test_print_refuses_unknown_streams():
    with pytest.raises(ValueError, match="sys.stdout, sys.stderr or 'file://<path>'"):
        md.print(1, output_stream="stdout")
    with pytest.raises(ValueError, match="not supported"):
        md.print(1, output_stream=42)


def test_tensor_shape_in_specs_and_generators():
    assert md.TensorSpec(md.TensorShape([None, 3]), md.float32).shape == (None, 3)
    assert md.TensorSpec(md.TensorShape(None), md.float32).shape is None
    ds = md.data.Dataset.from_generator(lambda: iter([[1.0, 2.0]]), output_types=md.float32,
                                        output_shapes=md.TensorShape([2]))
    assert ds.element_spec.shape == (2,) and md.TensorShape([2, 3])[1:] == md.TensorShape([3])
    with pytest.raises(TypeError, match="integer or None"):
        md.TensorShape([1.5])
