"""md.function's part of tf.function's tracing rules beyond the guide's cells (those are in
tests/conformance/cases/function_guide.py against TensorFlow's numbers): per-instance traces of a
method, variables made on a first call only, and what the errors say."""

from __future__ import annotations

import gc

import pytest
import torch

import multidev as md


class Count(md.Module):
    """The tf.function guide's counter (no super().__init__(), as the guide writes it)."""

    def __init__(self):
        self.count = None

    @md.function
    def __call__(self):
        if self.count is None:
            self.count = md.Variable(0)
        return self.count.assign_add(1)


def test_each_instance_makes_its_variable_on_its_own_first_call():
    """TF traces a method per instance: a second Count makes its variable on its first call too, also
    when it lives at the address of a collected one."""
    for _ in range(3):
        c = Count()
        assert [int(c()), int(c())] == [1, 2]
        del c
        gc.collect()


def test_a_variable_made_on_a_later_call_is_refused_with_the_fix():
    made = []

    @md.function
    def step(x):
        if made:                       # a second call makes a new variable: TF refuses it
            made.append(md.Variable(x))
        made.append(None)
        return x * 2

    assert float(step(md.constant(1.0))) == 2.0
    with pytest.raises(ValueError, match=r"'step'.*first call.*outside the function"):
        step(md.constant(2.0))


def test_keras_layer_built_on_the_first_call_is_allowed():
    layer = md.keras.layers.Dense(2)

    @md.function
    def forward(x):
        return layer(x)

    for _ in range(2):
        assert tuple(forward(torch.ones(3, 4)).shape) == (3, 2)


def test_input_signature_errors_name_the_argument_and_the_fix():
    @md.function(input_signature=[md.TensorSpec([None], md.int32)])
    def f(x):
        return x + 1

    with pytest.raises(TypeError, match=r"argument 0 \(dtype md.float32, shape \[2\]\).*drop input_signature"):
        f(torch.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="takes 1 positional argument"):
        f()
    assert f([1, 2]).tolist() == [2, 3]          # a Python list is converted to the signature's dtype
    assert f.experimental_get_tracing_count() == 1


def test_many_python_values_keep_a_bounded_record():
    """A function called with ever new Python numbers: TensorFlow retraces each time; the record stops
    growing (and its scan with it) at 64."""
    @md.function
    def f(x):
        return x

    for i in range(200):
        f(i)
    assert f.experimental_get_tracing_count() == 64


def test_custom_gradient_through_torch_autograd_and_its_errors():
    @md.custom_gradient
    def clip(y):
        return y, lambda dy: md.clip_by_norm(dy, 0.5)

    v = torch.tensor([3.0, 4.0], requires_grad=True)
    (g,) = torch.autograd.grad(clip(v * v).sum(), [v])
    # upstream [1, 1] clipped to norm 0.5, times d(v*v)/dv = 2v (the conformance case's numbers on TF)
    assert g.tolist() == pytest.approx([2.12132, 2.82843], rel=1e-5)
    with pytest.raises(TypeError, match=r"must return \(outputs, grad_fn\)"):
        md.custom_gradient(lambda y: y)(torch.tensor(1.0))
    with pytest.raises(TypeError, match="expects a floating tensor"):
        md.clip_by_norm(torch.tensor([3, 4]), 1.0)
