"""CommunicationOptions and the collective defaults read from the environment."""

import pytest

from multidev.collectives import fingerprint
from multidev.collectives.process_config import fingerprints_enabled
from multidev.distribute.communication import CommunicationImplementation, CommunicationOptions


def test_defaults_are_bounded(monkeypatch):
    monkeypatch.delenv("MULTIDEV_COLLECTIVE_TIMEOUT", raising=False)
    options = CommunicationOptions()
    assert (options.bytes_per_pack, options.timeout_seconds, options.implementation) == (0, None, CommunicationImplementation.AUTO)
    assert options.resolved_timeout() == 30.0
    monkeypatch.setenv("MULTIDEV_COLLECTIVE_TIMEOUT", "7.5")
    assert options.resolved_timeout() == 7.5
    assert CommunicationOptions(timeout_seconds=3).resolved_timeout() == 3.0


def test_backend_choice():
    assert CommunicationOptions().backend(cuda=False) == "gloo"
    assert CommunicationOptions().backend(cuda=True) == "auto"   # NCCL unless processes share a GPU
    assert CommunicationOptions(implementation="ring").backend(cuda=True) == "gloo"
    assert CommunicationOptions(implementation=CommunicationImplementation.NCCL).backend(cuda=True) == "nccl"
    with pytest.raises(ValueError, match="NCCL needs CUDA GPUs"):
        CommunicationOptions(implementation="NCCL").backend(cuda=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"bytes_per_pack": -1}, "bytes_per_pack"),
    ({"timeout_seconds": 0}, "timeout_seconds"),
    ({"implementation": "MPI"}, r"Invalid communication implementation 'MPI'.*AUTO"),
])
def test_invalid_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CommunicationOptions(**kwargs)


def test_bad_timeout_env(monkeypatch):
    monkeypatch.setenv("MULTIDEV_COLLECTIVE_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="MULTIDEV_COLLECTIVE_TIMEOUT='soon'"):
        CommunicationOptions().resolved_timeout()


def test_fingerprint_switch(monkeypatch):
    monkeypatch.delenv("MULTIDEV_COLLECTIVE_FINGERPRINTS", raising=False)
    assert fingerprints_enabled()
    monkeypatch.setenv("MULTIDEV_COLLECTIVE_FINGERPRINTS", "0")
    assert not fingerprints_enabled()
    monkeypatch.setenv("MULTIDEV_COLLECTIVE_FINGERPRINTS", "maybe")
    with pytest.raises(ValueError, match="MULTIDEV_COLLECTIVE_FINGERPRINTS='maybe'"):
        fingerprints_enabled()


def test_fingerprint_rows_compare_what_must_agree():
    import torch

    a = fingerprint.encode(4, "all_reduce", torch.zeros(3, 2), extra=1)
    assert fingerprint.describe(a) == "all_reduce #4 (shape=(3, 2), dtype=float32, op=MEAN)"
    assert not fingerprint.mismatch([a, list(a)])
    assert fingerprint.mismatch([a, fingerprint.encode(4, "all_reduce", torch.zeros(3, 2), extra=0)])
    g0, g1 = fingerprint.encode(5, "all_gather", torch.zeros(2, 3)), fingerprint.encode(5, "all_gather", torch.zeros(7, 3))
    assert not fingerprint.mismatch([g0, g1]) and fingerprint.first_dims([g0, g1]) == [2, 7]
    assert fingerprint.mismatch([g0, fingerprint.encode(5, "all_gather", torch.zeros(2, 4))])
    assert fingerprint.mismatch([g0, [0] * fingerprint.FIELDS])
    deep = fingerprint.describe(fingerprint.encode(1, "broadcast", torch.zeros(1, 2, 3, 4, 5, 6), extra=1))
    assert "2 more dims of 30 elements" in deep and "src=1" in deep


def test_batch_fingerprints_cover_every_shape_and_dtype():
    import torch

    a = fingerprint.encode_batch(2, "batch_all_reduce", [torch.zeros(3), torch.zeros(2, 2)])
    assert fingerprint.describe(a) == "batch_all_reduce #2 (2 tensors, 7 elements, dtype=float32, op=SUM)"
    assert not fingerprint.mismatch([a, fingerprint.encode_batch(2, "batch_all_reduce", [torch.ones(3), torch.ones(2, 2)])])
    swapped = fingerprint.encode_batch(2, "batch_all_reduce", [torch.zeros(2, 2), torch.zeros(3)])
    assert fingerprint.mismatch([a, swapped])
    mixed = fingerprint.encode_batch(2, "batch_all_reduce", [torch.zeros(3), torch.zeros(2, 2, dtype=torch.float64)])
    assert fingerprint.mismatch([a, mixed]) and "mixed dtypes" in fingerprint.describe(mixed)
