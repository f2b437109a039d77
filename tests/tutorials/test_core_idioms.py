"""The neighbouring idioms of the core guides' lines (tests/tutorials/test_tf_core_tutorials.py runs the
guides themselves against TensorFlow's numbers): a second tape, a tuple result, a variable copied from
a tensor, a wrong-shape assign, a list operand, a nested layer (a loss that reduced itself on 2 replicas:
basic_training_loops_fit in the guides' test)."""

import numpy as np
import pytest
import torch

import multidev as md


def test_a_constant_one_tape_watched_gets_no_gradient_from_the_next_tape():
    x = md.constant(3.0)
    with md.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    assert float(tape.gradient(y, x)) == 6.0
    with md.GradientTape() as tape:
        y = x * x
    assert tape.gradient(y, x) is None            # TF: a constant is watched only by the tape that watched it


def test_a_tensor_computed_before_the_tape_gets_a_gradient_once_watched():
    v = md.Variable(2.0)
    x = v + 1.0
    with md.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    assert float(tape.gradient(y, x)) == 6.0


def test_watched_variables_before_gradient_says_when_it_can_answer():
    v = md.Variable(2.0)
    with md.GradientTape() as tape:
        y = v * v
    with pytest.raises(RuntimeError, match="after tape.gradient"):
        tape.watched_variables()
    tape.gradient(y, v)
    assert [w.name for w in tape.watched_variables()] == ["Variable:0"]
    with md.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(v)
    assert tape.watched_variables() == (v,)        # only what was watched: answerable at once


def test_stop_gradient_and_stop_recording():
    v = md.Variable(3.0)
    with md.GradientTape(persistent=True) as tape:
        y = v * md.stop_gradient(v)
        with tape.stop_recording():
            z = v * v
    assert float(tape.gradient(y, v)) == 3.0 and tape.gradient(z, v) is None
    assert not md.stop_gradient([1.0, 2.0]).requires_grad


def test_integer_watch_warns_and_gives_none():
    x = md.constant(10)
    with md.GradientTape() as tape:
        with pytest.warns(UserWarning, match="must be floating"):
            tape.watch(x)
        y = x * x
    assert tape.gradient(y, x) is None


def test_a_variable_owns_its_initial_value():
    t = torch.tensor([1.0, 2.0])
    v = md.Variable(t)
    v.assign_add([1.0, 1.0])
    assert t.tolist() == [1.0, 2.0] and v.numpy().tolist() == [2.0, 3.0]
    w = md.Variable(v)
    v.assign([0.0, 0.0])
    assert w.numpy().tolist() == [2.0, 3.0]


def test_assign_of_another_shape_is_a_value_error_naming_both():
    v = md.Variable([2.0, 3.0])
    with pytest.raises(ValueError, match=r"shape \(3,\).*shape \(2,\)"):
        v.assign([1.0, 2.0, 3.0])
    assert v.numpy().tolist() == [2.0, 3.0]


def test_python_lists_on_either_side_of_a_variable():
    w = md.Variable([[1.0], [2.0], [3.0]])
    assert ([[1.0, 2.0, 3.0]] @ w).tolist() == [[14.0]]
    v = md.Variable(2.0)
    assert (v * [3.0, 4.0]).tolist() == [6.0, 8.0] and ([1.0, 1.0] - v).tolist() == [-1.0, -1.0]
    assert (v / (4.0, 8.0)).tolist() == [0.5, 0.25] and (v ** [1, 2]).tolist() == [2.0, 4.0]


def test_a_module_returning_a_tuple_reads_with_numpy():
    class Two(md.Module):
        def __init__(self):
            super().__init__()
            self.w = md.Variable(2.0)

        def __call__(self, x):
            return self.w * x, self.w + x

    a, b = Two()(3.0)
    assert a.numpy() == 6.0 and b.numpy() == 5.0 and a.requires_grad


def test_matmul_of_incompatible_shapes_is_invalid_argument():
    with pytest.raises(md.errors.InvalidArgumentError, match=r"Matrix size-incompatible: In\[0\]: \[1, 4\]"):
        md.matmul(md.ones((1, 4)), md.ones((3, 3)))


def test_submodules_reach_nested_layers_and_variable_attributes_are_weights():
    class Scale(md.keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.s = md.Variable(2.0)
            self.frozen = md.Variable(1.0, trainable=False)

        def call(self, x):
            return x * self.s + self.frozen

    inner = md.keras.Sequential([Scale()])
    outer = md.keras.Sequential([inner, md.keras.layers.Dense(1)])
    outer.build((None, 1))
    assert [type(m).__name__ for m in outer.submodules][:2] == ["Sequential", "Scale"]
    scale = inner.layers[0]
    assert scale.trainable_weights == [scale.s] and scale.non_trainable_weights == [scale.frozen]
    assert np.asarray(scale([[1.0], [2.0]])).tolist() == [[3.0], [5.0]]   # a nested list is one input
    scale.s_again = scale.s                                                  # an alias is no second weight
    assert len(scale.get_weights()) == 2 and len(outer.get_weights()) == 4



def test_a_saved_function_without_signature_takes_the_shapes_it_was_called_with(tmp_path):
    class Scale(md.Module):
        def __init__(self):
            super().__init__()
            self.w = md.Variable(2.0)

        @md.function
        def __call__(self, x):
            return x * self.w

    scale = Scale()
    scale([1.0, 2.0])
    scale(torch.ones(1, 3))
    md.saved_model.save(scale, str(tmp_path / "m"))
    loaded = md.saved_model.load(str(tmp_path / "m"))
    assert loaded.signatures == {}                                    # as TF: concrete functions, no signatures
    assert loaded([3.0, 4.0]).tolist() == [6.0, 8.0] and loaded(torch.ones(1, 3)).tolist() == [[2.0, 2.0, 2.0]]
    with pytest.raises(ValueError, match=r"Got: \['\(3,\) float32'\].*Expected one of"):
        loaded([1.0, 2.0, 3.0])
