"""``md.<op>`` (TensorFlow's array/math ops as thin torch aliases) gives what TensorFlow gives on the
same inputs: values, dtypes and shapes recorded from TensorFlow in ``tf_array_ops.json``
(``record_tf_array_ops.py``, run in a TensorFlow venv, never in CI)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import multidev as md

from tests.api.tf_array_ops_cases import CASES

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDED = json.load(open(os.path.join(HERE, "tf_array_ops.json")))


def _arg(value):
    if isinstance(value, dict) and "t" in value:
        return torch.tensor(value["t"], dtype=getattr(torch, value["dtype"]))
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [_arg(v) for v in value]
    if isinstance(value, str):
        return getattr(md, value)
    return value


def _kwargs(kwargs):
    return {k: (getattr(md, v) if k in ("dtype", "dtype_hint") else v) for k, v in kwargs.items()}


def _observe(result):
    if isinstance(result, (list, tuple)):
        return [_observe(r) for r in result]
    array = result.numpy()
    return {"value": array.tolist(), "dtype": str(result.dtype).removeprefix("torch."), "shape": list(array.shape)}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_matches_tensorflow(case):
    case_id, op, args, kwargs = case
    module, name = (md.math, op.split(".", 1)[1]) if op.startswith("math.") else (md, op)
    got = _observe(getattr(module, name)(*[_arg(a) for a in args], **_kwargs(kwargs)))
    want = RECORDED["cases"][case_id]
    flat_got, flat_want = (got, want) if isinstance(want, list) else ([got], [want])
    assert len(flat_got) == len(flat_want)
    for g, w in zip(flat_got, flat_want):
        assert (g["dtype"], g["shape"]) == (w["dtype"], w["shape"]), (g, w)
        np.testing.assert_allclose(np.asarray(g["value"], dtype=float), np.asarray(w["value"], dtype=float),
                                   rtol=1e-6, atol=1e-7)


def test_every_recorded_case_is_run_and_every_alias_has_a_case():
    assert sorted(RECORDED["cases"]) == sorted(c[0] for c in CASES)
    covered = {c[1].removeprefix("math.") for c in CASES}
    assert set(md.array_ops.__all__) <= covered, set(md.array_ops.__all__) - covered


def test_unknown_tf_names_name_the_torch_function():
    with pytest.raises(AttributeError, match=r"tf\.einsum is not part of multidev.*call torch\.einsum"):
        md.einsum
    with pytest.raises(AttributeError, match=r"call torch\.special\.erfinv|call torch\.erfinv"):
        md.math.erfinv
    with pytest.raises(AttributeError, match="tf.no_such_op is not part of multidev.*torch's equivalent"):
        md.no_such_op
    assert not hasattr(md, "__wrapped__")           # dunder probes stay plain AttributeErrors


def test_unknown_tf_names_in_submodules_name_the_torch_function():
    """tf.random.normal, tf.nn.relu, tf.linalg: the names TF tutorials reach for, with torch's own names."""
    with pytest.raises(AttributeError, match=r"tf\.random\.normal is not part of multidev.*call torch\.randn"):
        md.random.normal
    with pytest.raises(AttributeError, match=r"tf\.random\.uniform .*call torch\.rand "):
        md.random.uniform
    with pytest.raises(AttributeError, match=r"tf\.nn\.relu .*call torch\.relu \(or the tensor method\)"):
        md.nn.relu
    with pytest.raises(AttributeError, match=r"sparse_softmax_cross_entropy_with_logits .*functional\.cross_entropy"):
        md.nn.sparse_softmax_cross_entropy_with_logits
    with pytest.raises(AttributeError, match=r"tf\.linalg is not part of multidev.*call torch\.linalg's functions"):
        md.linalg
    assert callable(md.random.set_seed) and callable(md.nn.compute_average_loss)   # what they do have
    assert not hasattr(md.nn, "__path__") and not hasattr(md.random, "__wrapped__")


def test_tf_train_io_and_summary_names_outside_the_system_say_what_to_use():
    """md.train, md.io and md.summary hold TensorFlow's multi-device names (checkpoints, gfile, summaries); the
    rest of tf.train / tf.io / tf.summary that tutorials type gets a way out, not a bare AttributeError."""
    with pytest.raises(AttributeError, match=r"tf\.train\.ExponentialMovingAverage is not part.*AveragedModel"):
        md.train.ExponentialMovingAverage
    with pytest.raises(AttributeError, match=r"tf\.io\.parse_single_example .*parses no protobufs.*from_tensor_slices"):
        md.io.parse_single_example
    with pytest.raises(AttributeError, match=r"tf\.train\.Example .*parses no protobufs"):
        md.train.Example
    with pytest.raises(AttributeError, match=r"tf\.io\.read_file .*open\(path, 'rb'\)\.read\(\)"):
        md.io.read_file
    with pytest.raises(AttributeError, match=r"tf\.io\.decode_jpeg .*torchvision\.io\.decode_jpeg"):
        md.io.decode_jpeg
    with pytest.raises(AttributeError, match=r"tf\.summary\.trace_on .*add_graph"):
        md.summary.trace_on
    with pytest.raises(AttributeError, match=r"tf\.train\.no_such_name is not part of multidev"):
        md.train.no_such_name
    assert md.train.Checkpoint and md.io.gfile and md.summary.scalar   # what they do have
    assert not hasattr(md.train, "__wrapped__") and not hasattr(md.io, "__wrapped__")


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="cannot be split into 4 equal parts"):
        md.split(md.range(6), 4)
    with pytest.raises(md.errors.InvalidArgumentError, match=r"Can not squeeze dim\[0\]"):
        md.squeeze(md.ones((2, 1)), axis=0)
    with pytest.raises(AttributeError, match=r"tf\.log is not part of multidev.*torch\.log"):
        md.log                                       # TensorFlow has it only as tf.math.log
