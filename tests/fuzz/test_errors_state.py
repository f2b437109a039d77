"""Bad input to md.Variable, strategies, md.train checkpoints and md.saved_model: TensorFlow 2.21's
exception type, the value received in the message, and no half-applied state after the error.

Expected types were read from TensorFlow 2.21 running the same calls:
  Variable: assign of another shape ValueError, assign_add/assign_sub of another shape
            InvalidArgumentError, a Python float into an int variable or a string into a float one
            TypeError ("Cannot convert [1.5] to EagerTensor of dtype int32"; numpy values are cast),
            shape= incompatible with the initial value ValueError, dtype='foo' TypeError
  experimental_distribute_values_from_function: non-callable TypeError; replicas returning different
            structures AssertionError (md: ReplicaResultsMismatchError, a ValueError and an AssertionError)
  Checkpoint: restore of a missing prefix NotFoundError; shapes that differ ValueError, dtypes that
            differ InvalidArgumentError, nothing restored; assert_* AssertionError; a prefix under a
            file FailedPreconditionError
  CheckpointManager: max_to_keep 0 / -1 ValueError, max_to_keep='3' and directory=None TypeError
  saved_model: load of a missing directory OSError, tags that are not the SavedModel's ValueError,
            an input of another shape or dtype TypeError, signatures=3 ValueError
TensorFlow increments save_counter even when the write fails; md leaves it unchanged (a failed save
is no save, so the next one is not numbered past a gap).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import multidev as md
from multidev.values.distributed import ReplicaResultsMismatchError
from tests.fuzz._checks import check_error


def _raises(fn, error, *shown):
    with pytest.raises(error) as info:
        fn()
    check_error(info.value, *shown)
    return info.value


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy()


# ----- md.Variable -----------------------------------------------------------------------------

VARIABLE_CASES = [
    ("assign shape", lambda f, i: f.assign([1.0, 2.0, 3.0]), ValueError, (3,)),
    ("assign_add shape", lambda f, i: f.assign_add([1.0, 2.0, 3.0]), md.errors.InvalidArgumentError, (3,)),
    ("assign_sub shape", lambda f, i: f.assign_sub([[1.0]]), md.errors.InvalidArgumentError, (1, 1)),
    ("assign str", lambda f, i: f.assign("a"), TypeError, "a"),
    ("assign strs", lambda f, i: f.assign(["a", "b"]), TypeError, ["a", "b"]),
    ("assign complex", lambda f, i: f.assign([1j, 2j]), TypeError, [1j, 2j]),
    ("float into int", lambda f, i: i.assign([1.5, 2.5]), TypeError, [1.5, 2.5]),
    ("integral float into int", lambda f, i: i.assign([1.0, 2.0]), TypeError, [1.0, 2.0]),
    ("float add into int", lambda f, i: i.assign_add([1.5, 1.5]), TypeError, [1.5, 1.5]),
]


@pytest.mark.parametrize("name, call, error, shown", VARIABLE_CASES, ids=[c[0] for c in VARIABLE_CASES])
def test_variable_writes_refused_leave_the_value(strategy, name, call, error, shown):
    for scope in (None, strategy):          # a plain variable, and a mirrored one (every copy unchanged)
        with scope.scope() if scope else md.device("/cpu:0"):
            f, i = md.Variable([1.0, 2.0]), md.Variable(np.array([1, 2], np.int32))
        _raises(lambda: call(f, i), error, shown)
        for var, value in ((f, [1.0, 2.0]), (i, [1, 2])):
            copies = strategy.experimental_local_results(var) if scope else [var]
            for copy in copies:
                np.testing.assert_array_equal(copy.detach().cpu().numpy(), value)


@pytest.mark.parametrize("op, error", [("assign", ValueError), ("assign_add", md.errors.InvalidArgumentError)])
def test_a_write_of_another_shape_inside_run(strategy, op, error):
    with strategy.scope():
        v = md.Variable([1.0, 2.0])
    _raises(lambda: strategy.run(lambda: getattr(v, op)([1.0, 2.0, 3.0])), error, (3,))
    for copy in strategy.experimental_local_results(v):
        assert copy.detach().tolist() == [1.0, 2.0]


def test_what_tensorflow_converts_still_converts():
    i, f = md.Variable(np.array([1, 2], np.int32)), md.Variable([1.0, 2.0])
    assert i.assign(np.array([1.7, 2.2])).numpy().tolist() == [1, 2]           # numpy is cast, as TF does
    assert i.assign([True, False]).numpy().tolist() == [1, 0]
    assert i.assign_add(np.int64(1)).numpy().tolist() == [2, 1]
    assert f.assign(np.array(["1.5", "2"])).numpy().tolist() == [1.5, 2.0]       # TF parses numeric numpy strings
    assert f.assign([3, 4]).numpy().tolist() == [3.0, 4.0]


@pytest.mark.parametrize("kwargs, error, shown", [
    ({"initial_value": [1.0], "shape": (2,)}, ValueError, (2,)),
    ({"initial_value": [1.0], "shape": (1, 1)}, ValueError, (1, 1)),
    ({"initial_value": [1.0], "shape": "x"}, TypeError, "x"),
    ({"initial_value": [1.0], "dtype": "foo"}, TypeError, "foo"),
    ({"initial_value": [1.0], "dtype": object}, TypeError, object),
    ({"initial_value": [1.5], "dtype": md.int32}, TypeError, [1.5]),
    ({"initial_value": "abc"}, TypeError, "abc"),
], ids=["shape", "rank", "shape str", "dtype str", "dtype object", "float into int", "string"])
def test_variable_construction(strategy, kwargs, error, shown):
    _raises(lambda: md.Variable(**kwargs), error, shown)
    with strategy.scope():
        _raises(lambda: md.Variable(**kwargs), error, shown)


def test_variable_construction_takes_what_tensorflow_takes():
    assert md.Variable([1.0], shape=(None,)).shape == (1,)
    assert md.Variable([[1.0]], shape=md.TensorShape(None)).shape == (1, 1)
    assert md.Variable([1.0], shape=md.TensorShape([1])).shape == (1,)
    assert md.Variable([1.0], dtype="float64").dtype == torch.float64
    assert md.Variable([1], dtype=np.int32).dtype == torch.int32
    assert md.Variable([1.0], dtype="double").dtype == torch.float64


# ----- strategies --------------------------------------------------------------------------------

def test_values_from_function_errors(strategy):
    dvff = strategy.experimental_distribute_values_from_function
    _raises(lambda: dvff(3), TypeError, 3)
    _raises(lambda: dvff(None), TypeError, None)
    # a ValueError and TensorFlow's AssertionError (which _checks counts as internal): checked here
    with pytest.raises(ReplicaResultsMismatchError, match=r"replica 0 returned \(None,\) and replica 1 \(None, None\)"):
        dvff(lambda ctx: (1.0,) * (ctx.replica_id_in_sync_group + 1))
    with pytest.raises(ValueError, match="replica 0 returned {'b': None} and replica 1 {'a': None}"):
        dvff(lambda ctx: {("a" if ctx.replica_id_in_sync_group else "b"): 1.0})
    value = dvff(value_fn=lambda ctx: torch.tensor(float(ctx.replica_id_in_sync_group)))
    n = strategy.num_replicas_in_sync
    assert float(strategy.reduce("sum", value, axis=None)) == n * (n - 1) / 2


@pytest.mark.parametrize("op", ["MAX", "min", 3, None, "SUM "])
def test_reduce_ops_that_do_not_exist(strategy, op):
    value = strategy.run(lambda: torch.ones(2))
    _raises(lambda: strategy.reduce(op, value, axis=None), ValueError, op)
    if isinstance(op, str):
        _raises(lambda: md.distribute.ReduceOp(op), ValueError, op)


# ----- md.train.Checkpoint / CheckpointManager ----------------------------------------------------

def _values(*variables):
    return [v.numpy().tolist() for v in variables]


def test_restore_of_a_missing_or_mismatched_checkpoint_restores_nothing(tmp_path):
    path = md.train.Checkpoint(a=md.Variable([1.0, 2.0]), b=md.Variable([[3.0]])).save(str(tmp_path / "ck"))
    cases = [
        (md.Variable([7.0, 7.0, 7.0]), md.Variable([[9.0]]), ValueError, path, (3,)),      # a's shape differs
        (md.Variable(np.array([7, 7], np.int32)), md.Variable([[9.0]]), md.errors.InvalidArgumentError, path, None),
        (md.Variable([7.0, 7.0], dtype=md.float64), md.Variable([[9.0]]), md.errors.InvalidArgumentError, path, None),
        (md.Variable([7.0, 7.0]), md.Variable([[9.0]]), md.errors.NotFoundError, path + "x", path + "x"),
        (md.Variable([7.0, 7.0]), md.Variable([[9.0]]), md.errors.NotFoundError, str(tmp_path / "no" / "ck-1"), None),
    ]
    for a, b, error, prefix, shown in cases:
        before = _values(a, b)
        ckpt = md.train.Checkpoint(a=a, b=b)
        _raises(lambda: ckpt.restore(prefix), error, *([] if shown is None else [shown]))
        assert _values(a, b) == before       # b matched, and was not restored either: all or nothing
    _raises(lambda: md.train.Checkpoint(a=md.Variable(1.0)).restore(3), TypeError, 3)


def test_assert_messages_name_what_did_not_match(tmp_path):
    path = md.train.Checkpoint(a=md.Variable([1.0, 2.0]), b=md.Variable([[3.0]])).save(str(tmp_path / "ck"))
    extra = md.train.Checkpoint(a=md.Variable([0.0, 0.0]), extra_var=md.Variable(1.0)).restore(path)
    for check in (extra.assert_consumed, extra.assert_existing_objects_matched):
        with pytest.raises(AssertionError, match="extra_var"):
            check()
    partial = md.train.Checkpoint(a=md.Variable([0.0, 0.0])).restore(path)
    with pytest.raises(AssertionError, match="'b"):
        partial.assert_consumed()
    partial.assert_existing_objects_matched()
    assert partial.expect_partial() is partial
    nothing = md.train.Checkpoint(z=md.Variable([0.0])).restore(path)
    with pytest.raises(AssertionError, match="'z'"):
        nothing.assert_existing_objects_matched()


def test_another_optimizers_slots_are_not_consumed(tmp_path):
    """TF 2.21: Adam's checkpoint restored into SGD leaves Adam's slots unresolved (assert_consumed fails)."""
    def model(optimizer):
        m = md.keras.Sequential([md.keras.Input((2,)), md.keras.layers.Dense(1)])
        m.compile(optimizer=optimizer, loss="mse")
        m.fit(np.ones((4, 2), np.float32), np.ones((4, 1), np.float32), verbose=0)
        return m
    adam = model("adam")
    path = md.train.Checkpoint(model=adam, optimizer=adam.optimizer).save(str(tmp_path / "ck"))
    sgd = model(md.keras.optimizers.SGD(0.1, momentum=0.9))
    status = md.train.Checkpoint(model=sgd, optimizer=sgd.optimizer).restore(path)
    with pytest.raises(AssertionError, match="unresolved values.*kernel/velocity"):
        status.assert_consumed()
    status.assert_existing_objects_matched()          # every SGD slot got Adam's momentum (the same name)
    np.testing.assert_array_equal(sgd.get_weights()[0], adam.get_weights()[0])
    other_adam = model("adam")
    md.train.Checkpoint(model=other_adam, optimizer=other_adam.optimizer).restore(path).assert_consumed()


@pytest.mark.parametrize("kwargs, error, shown", [
    ({"max_to_keep": 0}, ValueError, 0), ({"max_to_keep": -1}, ValueError, -1),
    ({"max_to_keep": "3"}, TypeError, "3"), ({"max_to_keep": 1.5}, TypeError, 1.5),
    ({"max_to_keep": True}, TypeError, True), ({"max_to_keep": 1, "directory": None}, TypeError, None),
    ({"max_to_keep": 1, "directory": 3}, TypeError, 3), ({"max_to_keep": 1, "directory": ""}, ValueError, ""),
], ids=["0", "-1", "str", "float", "bool", "dir None", "dir int", "dir empty"])
def test_checkpoint_manager_arguments(tmp_path, kwargs, error, shown):
    kwargs.setdefault("directory", str(tmp_path / "m"))
    _raises(lambda: md.train.CheckpointManager(md.train.Checkpoint(v=md.Variable(1.0)), **kwargs), error, shown)


def test_checkpoint_manager_takes_numpy_integers_and_relative_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    manager = md.train.CheckpointManager(md.train.Checkpoint(v=md.Variable(1.0)), "rel", max_to_keep=np.int64(2))
    paths = [manager.save() for _ in range(3)]
    assert paths == [os.path.join("rel", f"ckpt-{n}") for n in (1, 2, 3)]
    assert manager.checkpoints == paths[1:] and md.train.latest_checkpoint("rel") == paths[-1]


def test_a_save_that_cannot_write_changes_nothing(tmp_path):
    (tmp_path / "afile").write_text("x")
    v = md.Variable([1.0, 2.0])
    ckpt = md.train.Checkpoint(v=v)
    for write, shown in ((lambda: ckpt.save(str(tmp_path / "afile" / "ck")), "ck-1"),
                         (lambda: ckpt.write(str(tmp_path / "afile" / "ck")), "ck")):
        err = _raises(write, md.errors.FailedPreconditionError, str(tmp_path / "afile" / shown))
        assert isinstance(err, OSError) and err.errno is not None and "not a directory" in str(err)
    assert int(ckpt.save_counter) == 0
    assert ckpt.save(str(tmp_path / "ok" / "ck")).endswith("ck-1")        # numbered as if no save had failed
    manager = md.train.CheckpointManager(ckpt, str(tmp_path / "m"), max_to_keep=2)
    first = manager.save()
    (tmp_path / "m2").write_text("x")
    manager._directory = str(tmp_path / "m2")    # the directory became a file: as if another program wrote one
    manager._prefix = os.path.join(manager._directory, "ckpt")
    _raises(manager.save, md.errors.FailedPreconditionError)
    assert int(ckpt.save_counter) == 2 and manager.latest_checkpoint == first and manager.checkpoints == [first]
    _raises(lambda: md.train.CheckpointManager(ckpt, str(tmp_path / "afile" / "sub"), max_to_keep=1),
            md.errors.FailedPreconditionError, str(tmp_path / "afile" / "sub"))


# ----- md.saved_model -----------------------------------------------------------------------------

class _Scale(md.Module):
    def __init__(self):
        super().__init__()
        self.v = md.Variable(2.0)

    @md.function(input_signature=[md.TensorSpec([None], md.float32)])
    def __call__(self, x):
        return x * self.v


def test_saved_model_errors(tmp_path):
    module = _Scale()
    _raises(lambda: md.saved_model.save(3, str(tmp_path / "a")), ValueError, 3)
    _raises(lambda: md.saved_model.save(module, str(tmp_path / "b"), signatures=3), ValueError, 3)
    with pytest.raises(OSError, match="does not exist"):
        md.saved_model.load(str(tmp_path / "missing"))
    md.saved_model.save(module, str(tmp_path / "sm"))
    _raises(lambda: md.saved_model.load(str(tmp_path / "sm"), tags=["nope"]), ValueError, ["nope"])
    _raises(lambda: md.saved_model.load(str(tmp_path / "sm"), tags=3), ValueError, 3)
    loaded = md.saved_model.load(str(tmp_path / "sm"), tags="serve")
    assert md.saved_model.load(str(tmp_path / "sm"), tags=["serve"]) is not None
    _raises(lambda: loaded(torch.ones(1, 1)), TypeError, (1, 1))
    ints = torch.ones(1, dtype=torch.int32)
    _raises(lambda: loaded(ints), TypeError, ints)
    _raises(lambda: loaded.signatures["serving_default"](x=torch.ones(2, 2)), TypeError, (2, 2))
    assert loaded([1, 2]).tolist() == [2.0, 4.0]                 # Python and numpy values are converted
    assert loaded(np.array([1.5])).tolist() == [3.0]
    assert loaded(torch.ones(3, dtype=torch.float64)).tolist() == [2.0] * 3
    (tmp_path / "afile").write_text("x")
    err = _raises(lambda: md.saved_model.save(module, str(tmp_path / "afile" / "sm")), md.errors.FailedPreconditionError,
                  str(tmp_path / "afile" / "sm"))
    assert isinstance(err, OSError) and (tmp_path / "afile").read_text() == "x"
