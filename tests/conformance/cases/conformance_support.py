"""Helpers shared by the conformance cases: turn what a case sees into JSON on either side.

A case is ``case_<name>(tf)``: ``tf`` is TensorFlow when the recorder runs it (tests/conformance/
record_tf.py, in TensorFlow's own venv) and multidev when CI runs it (``tf`` -> ``md`` is the whole
port). Nothing here imports TensorFlow, multidev or torch: values are read through the methods both
expose (``numpy()``, ``values``, ``dtype``).
"""

from __future__ import annotations

_DISTRIBUTED = {"PerReplica", "Mirrored", "MirroredVariable", "SyncOnReadVariable", "AggregatingVariable"}


def val(x):
    """A JSON-able picture of ``x``: numbers and nested lists for tensors, a type name and the
    components for distributed values."""
    name = type(x).__name__
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if name in _DISTRIBUTED:
        return {"type": name, "values": [val(v) for v in x.values]}
    if isinstance(x, dict):
        return {str(k): val(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [val(v) for v in x]
    if hasattr(x, "detach") and hasattr(x, "requires_grad"):   # a torch tensor (or md.Variable)
        x = x.detach().cpu()
    if hasattr(x, "numpy"):
        x = x.numpy()
    if hasattr(x, "tolist"):
        return x.tolist()
    return repr(x)


def dtype_name(x) -> str:
    """``float32`` for a TensorFlow or a torch dtype (or a value that has one)."""
    dtype = getattr(x, "dtype", x)
    return getattr(dtype, "name", None) or str(dtype).replace("torch.", "")


def raises(fn, *args, **kwargs):
    """The name of the exception ``fn(*args, **kwargs)`` raises, or None."""
    try:
        fn(*args, **kwargs)
    except Exception as exc:  # the observation is the type's name
        return type(exc).__name__
    return None


def local(strategy, value):
    """``strategy.experimental_local_results(value)`` as plain numbers."""
    return [val(v) for v in strategy.experimental_local_results(value)]


_STRATEGIES: dict = {}


def two_cpus(tf):
    """The two-replica MirroredStrategy the cases share (both sides configure 2 logical CPUs).

    One per process, as a program has: TensorFlow's strategies in one process share collective
    instance keys, so a second strategy's collective of another shape fails with
    "Shape mismatch in the collective instance"."""
    if tf.__name__ not in _STRATEGIES:
        _STRATEGIES[tf.__name__] = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    return _STRATEGIES[tf.__name__]


def replica_id(tf):
    """The calling replica's id in its sync group, as a Python int."""
    return int(val(tf.distribute.get_replica_context().replica_id_in_sync_group))
