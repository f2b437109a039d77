"""Fuzzed device names and DeviceSpec fields: a spec that round-trips, or a clear ValueError/TypeError."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

import multidev as md  # noqa: E402
from tests.fuzz._checks import FAILED, outcome  # noqa: E402

pytestmark = pytest.mark.timeout(300 if settings().max_examples < 1000 else 3600)  # the long profile runs for minutes

_DIGITS = st.sampled_from(["0", "1", "7", "12", "*", "-1", "١", "²", "٣", "1.5", "", " 1", "1\n", "00", "9" * 25])
_WORDS = st.sampled_from(["job", "replica", "task", "device", "cpu", "CPU", "gpu", "GPU", "TPU", "Cpu", "XLA_GPU",
                          "localhost", "worker", "w-1.a", "ЦПУ", "a b", "", "*", "device:", "job:"])
_PART = st.one_of(
    st.tuples(_WORDS, _DIGITS).map(lambda p: f"{p[0]}:{p[1]}"),
    st.tuples(_WORDS, _WORDS, _DIGITS).map(lambda p: f"{p[0]}:{p[1]}:{p[2]}"),
    _WORDS,
)
DEVICE_NAMES = st.one_of(
    st.lists(_PART, max_size=5).map(lambda parts: "/" + "/".join(parts)),
    st.lists(_PART, min_size=1, max_size=3).map("/".join),
    st.text(max_size=30),
)
FIELD_VALUES = st.one_of(st.none(), st.integers(-3, 10**20), st.booleans(), st.floats(allow_nan=True),
                         st.text(max_size=8), _DIGITS, _WORDS, st.just(b"0"), st.just([0]))


@given(DEVICE_NAMES)
def test_device_names_parse_to_a_round_tripping_spec_or_raise_clearly(text):
    spec = outcome(lambda: md.DeviceSpec.from_string(text), text)
    if spec is FAILED:
        return
    assert all(c.isascii() for c in text if c.isdigit()), f"non-ASCII digits accepted in {text!r}"
    assert not any(c.isspace() for c in text.strip()), f"whitespace accepted in {text!r}"
    name = spec.to_string()
    assert name.isascii() and md.DeviceSpec.from_string(name) == spec
    for value in (spec.replica, spec.task, spec.device_index):
        assert value is None or (type(value) is int and value >= 0)


@given(st.one_of(st.integers(), st.none(), st.binary(max_size=5), st.lists(st.text(max_size=3), max_size=2)))
def test_non_string_device_names_are_type_errors(value):
    with pytest.raises(TypeError, match="must be a str"):
        md.DeviceSpec.from_string(value)


@given(job=FIELD_VALUES, replica=FIELD_VALUES, task=FIELD_VALUES, device_type=FIELD_VALUES, device_index=FIELD_VALUES)
def test_device_spec_fields_are_valid_or_rejected_clearly(job, replica, task, device_type, device_index):
    fields = dict(job=job, replica=replica, task=task, device_type=device_type, device_index=device_index)
    spec = outcome(lambda: md.DeviceSpec(**fields), *fields.values())
    if spec is FAILED:
        return
    assert md.DeviceSpec.from_string(spec.to_string()) == spec
    merged = outcome(lambda: md.DeviceSpec.from_string("/job:a/device:CPU:0").make_merged_spec(spec))
    assert merged is not FAILED


@given(DEVICE_NAMES)
def test_device_scopes_place_or_raise_clearly(text):
    def place():
        with md.device(text):
            return torch.ones(1) + 1

    result = outcome(place, text)
    assert result is FAILED or result.tolist() == [2.0]
