"""What TF programs read off md.data beyond the conformance cases (tests/conformance/cases/data_*.py):
the machine-dependent default of interleave's cycle_length, TF's spellings that stay plain Python
values (cardinality, element_spec.shape), and the names multidev refuses with a way out."""

from __future__ import annotations

import os

import numpy as np
import pytest

import multidev as md

D = md.data.Dataset


def test_interleave_default_cycle_length_is_the_cpu_count():
    """TF's default (AUTOTUNE) cycles over as many inputs as the process has CPU cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = cores + 1
    got = [int(x) for x in D.range(n).interleave(lambda x: D.from_tensors(x).repeat(2))]
    first_pass = list(range(cores))
    assert got[:2 * cores] == first_pass + first_pass      # `cores` inputs open, one element each in turn
    assert got[2 * cores:] == [cores, cores]


def test_cardinality_is_an_int_with_numpy():
    c = D.range(10).batch(3).cardinality()
    assert c == 4 and c + 1 == 5 and list(range(c)) == [0, 1, 2, 3] and repr(c) == "4"
    assert isinstance(c.numpy(), np.int64) and c.numpy() == 4
    assert D.range(3).repeat().cardinality().numpy() == md.data.INFINITE_CARDINALITY
    assert D.range(3).filter(lambda x: True).repeat().cardinality() == md.data.INFINITE_CARDINALITY
    assert D.range(3).filter(lambda x: True).repeat(2).cardinality() == md.data.UNKNOWN_CARDINALITY
    assert D.range(0).repeat().cardinality() == 0


def test_element_spec_shape_is_a_tuple_with_tensorshape_methods():
    spec = D.from_tensor_slices(np.zeros((4, 3), np.float32)).batch(2).element_spec
    shape = spec.shape
    assert shape == (None, 3) and shape[1:] == (3,) and shape + (1,) == (None, 3, 1) and not isinstance(shape[1:], type(shape))
    assert shape.as_list() == [None, 3] and shape.rank == 2 and not shape.is_fully_defined()
    assert repr(spec) == "TensorSpec(shape=(None, 3), dtype=torch.float32, name=None)"
    assert md.data.TensorSpec(None, md.float32).shape is None   # unknown rank stays None
    with pytest.raises(AttributeError):
        shape.no_such_method


@pytest.mark.parametrize("name, hint", [("TFRecordDataset", "from_tensor_slices"),
                                        ("FixedLengthRecordDataset", "numpy.fromfile")])
def test_reader_datasets_multidev_lacks_say_what_to_use(name, hint):
    with pytest.raises(AttributeError, match=f"tf.data.{name}.*{hint}"):
        getattr(md.data, name)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'$"):
        md.data.NoSuchThing


def test_generator_structure_and_padding_errors_are_both_types():
    """TF 2.21's type (what the conformance cases check) and the type multidev raised before."""
    def pairs():
        yield 1, 2
    ds = D.from_generator(pairs, output_signature=md.data.TensorSpec((), md.int32))
    with pytest.raises(md.errors.InvalidArgumentError, match="expected structure"):
        list(ds)
    with pytest.raises(TypeError):
        list(ds)
    long = D.from_tensor_slices([[1, 2, 3]])
    for error in (md.errors.DataLossError, md.errors.InvalidArgumentError):
        with pytest.raises(error, match="smaller size"):
            list(long.padded_batch(1, padded_shapes=(2,)))


class _Column:
    """What pandas' Series is to numpy: an object with ``__array__`` (pandas is not a dependency)."""

    def __init__(self, values):
        self._values = np.asarray(values)

    def __array__(self, dtype=None, copy=None):
        return self._values if dtype is None else self._values.astype(dtype)


def test_array_like_columns_as_tf_dict_of_dataframe():
    """TF's ``from_tensor_slices((dict(df), target))``: columns convert through ``__array__``."""
    features = {"age": _Column([22, 38]), "sex": _Column(np.array(["m", "f"], dtype=object))}
    ds = D.from_tensor_slices((features, _Column([7.25, 71.3])))
    spec = ds.element_spec
    assert spec[0]["age"].dtype == md.int64 and spec[0]["sex"].dtype is str and spec[1].dtype == md.float64
    (first, fare), = list(ds.take(1))
    assert int(first["age"]) == 22 and first["sex"].numpy() == b"m" and float(fare) == 7.25


def test_string_elements_have_numpy_as_tf_prints_them():
    """The guide prints text with ``line.numpy()``; the values stay str / object arrays of str."""
    ds = D.from_tensor_slices(["ab", "c", "d"])
    line = next(iter(ds))
    assert line == "ab" and isinstance(line, str) and line.numpy() == b"ab" and line.upper() == "AB"
    batch = next(iter(ds.batch(2)))
    assert batch.numpy().tolist() == [b"ab", b"c"] and batch[1].numpy() == b"c"
    assert [s.numpy() for s in batch] == [b"ab", b"c"] and repr(batch) == "array(['ab', 'c'], dtype=object)"
    as_numpy = next(ds.batch(2).as_numpy_iterator())
    assert type(as_numpy) is np.ndarray and as_numpy.tolist() == [b"ab", b"c"]
    assert ds.map(lambda s: s + "!").reduce("", lambda acc, s: acc + s) == "ab!c!d!"
