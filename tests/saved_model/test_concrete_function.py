"""``md.function(...).get_concrete_function``: what ``signatures=`` of the SavedModel migration guide takes."""

import numpy as np
import pytest
import torch

import multidev as md


def test_concrete_function_exports_as_a_signature(tmp_path):
    @md.function
    def serving_default(x):
        return {"output": x * 3.0}

    concrete = serving_default.get_concrete_function(md.TensorSpec(shape=[None], dtype=md.float32))
    np.testing.assert_allclose(concrete(torch.tensor([1.0, 2.0])).get("output").numpy(), [3.0, 6.0])
    md.saved_model.save(md.Module(), str(tmp_path / "m"), signatures={"serving_default": concrete})
    loaded = md.saved_model.load(str(tmp_path / "m"))
    np.testing.assert_allclose(loaded.signatures["serving_default"](md.constant([2.0]))["output"].numpy(), [6.0])
    from_tensor = serving_default.get_concrete_function(torch.zeros(4))      # a tensor stands for its spec
    assert [tuple(s.shape) for s in from_tensor.input_signature] == [(4,)]


def test_concrete_function_arguments_must_be_specs():
    @md.function
    def f(x):
        return x

    with pytest.raises(ValueError, match="needs a TensorSpec per argument"):
        f.get_concrete_function()
    with pytest.raises(TypeError, match="not an md.TensorSpec or a tensor"):
        f.get_concrete_function(3)
    with pytest.raises(TypeError, match="by position"):
        f.get_concrete_function(x=md.TensorSpec([2]))
