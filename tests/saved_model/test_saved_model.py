"""md.saved_model: export signatures (torch.export JSON + safetensors), load and call them without the class."""

import json
import os

import pytest
import torch
from safetensors import safe_open

import multidev as md
from multidev.keras import layers, models
from tests.conftest import run_fresh


class Doubler(layers.Layer):   # a custom layer: loading the export must not need this class
    def call(self, x):
        return x * 2.0


def _model():
    torch.manual_seed(0)
    return models.Sequential([md.keras.Input((4,)), Doubler(), layers.Dense(3, name="logits")])


def test_keras_model_loads_and_runs_without_its_classes(tmp_path):
    model = _model()
    x = torch.randn(5, 4)
    md.saved_model.save(model, str(tmp_path / "export"))
    torch.save  # noqa: B018 (nothing here may pickle: checked below by reading the files as JSON/safetensors)
    meta = json.loads((tmp_path / "export" / "saved_model.json").read_text())
    assert meta["signatures"]["serving_default"]["outputs"] == ["output_0"]   # TF 2.21's key (Keras 3)
    with safe_open(str(tmp_path / "export" / "variables" / "serving_default.safetensors"), "pt") as f:
        assert len(list(f.keys())) >= 2
    expected = model(x).detach()
    torch.save(expected, tmp_path / "expected.pt")
    torch.save(x, tmp_path / "x.pt")
    run_fresh(f"""
        import torch, multidev as md
        loaded = md.saved_model.load({str(tmp_path / 'export')!r})
        x = torch.load({str(tmp_path / 'x.pt')!r})
        out = loaded.signatures["serving_default"](x)
        assert list(out) == ["output_0"], out
        torch.testing.assert_close(out["output_0"], torch.load({str(tmp_path / 'expected.pt')!r}))
        assert loaded(torch.zeros(7, 4)).shape == (7, 3)      # the batch dimension is dynamic
        assert "Doubler" not in dir(__import__("__main__"))
    """)


def test_md_module_with_input_signature(tmp_path):
    class Affine(md.Module):
        def __init__(self):
            super().__init__()
            self.w = md.Variable(torch.tensor([2.0, 3.0]))
            self.b = md.Variable(1.0)

        @md.function(input_signature=[md.TensorSpec([None, 2], md.float32)])
        def __call__(self, x):
            return x * self.w + self.b

    module = Affine()
    md.saved_model.save(module, tmp_path / "affine")
    loaded = md.saved_model.load(tmp_path / "affine")
    x = torch.tensor([[1.0, 1.0], [2.0, 0.0]])
    torch.testing.assert_close(loaded(x), torch.tensor([[3.0, 4.0], [5.0, 1.0]]))
    assert list(loaded.signatures["serving_default"](x=x)) == ["output_0"]
    assert isinstance(module.w, md.Variable), "the module's own variables are left as they were"
    with pytest.raises(TypeError, match="unexpected keyword argument 'y'"):
        loaded.signatures["serving_default"](y=x)


def test_named_signatures_and_refusals(tmp_path):
    class Two(md.Module):
        @md.function(input_signature=[md.TensorSpec([None], md.float32)])
        def square(self, x):
            return x * x

        @md.function(input_signature=[md.TensorSpec([None], md.float32)])
        def cube(self, x):
            return x * x * x

    two = Two()
    with pytest.raises(ValueError, match=r"several md.function methods.*\['cube', 'square'\]"):
        md.saved_model.save(two, tmp_path / "two")
    md.saved_model.save(two, tmp_path / "two", signatures={"square": two.square, "cube": two.cube})
    loaded = md.saved_model.load(tmp_path / "two")
    assert float(loaded.signatures["cube"](torch.tensor([2.0]))["output_0"]) == 8.0
    with pytest.raises(TypeError, match="no 'serving_default'"):
        loaded(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="Nothing to export"):
        md.saved_model.save(md.Module(), tmp_path / "empty")
    with pytest.raises(OSError, match="no saved_model.json"):
        md.saved_model.load(tmp_path / "missing")


def test_a_damaged_export_is_refused_and_a_failed_save_keeps_the_old_one(tmp_path):
    model = _model()
    md.saved_model.save(model, tmp_path / "m")
    weights = tmp_path / "m" / "variables" / "serving_default.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x10
    weights.write_bytes(bytes(data))
    with pytest.raises(md.errors.DataLossError, match="Checksum mismatch"):
        md.saved_model.load(tmp_path / "m")
    md.saved_model.save(model, tmp_path / "m")

    class Broken(md.Module):
        @md.function(input_signature=[md.TensorSpec([None], md.float32)])
        def __call__(self, x):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        md.saved_model.save(Broken(), tmp_path / "m")
    assert md.saved_model.load(tmp_path / "m")(torch.zeros(1, 4)).shape == (1, 3)
    assert sorted(os.listdir(tmp_path)) == ["m"], "no temporary directories left behind"


def test_loaded_signature_runs_in_every_replica_of_another_strategy(tmp_path):
    model = _model()
    md.saved_model.save(model, tmp_path / "m")
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        loaded = md.saved_model.load(tmp_path / "m")
        serve = loaded.signatures["serving_default"]
    x = torch.randn(6, 4)
    dataset = md.data.Dataset.from_tensor_slices(x).batch(6)
    batch = next(iter(strategy.experimental_distribute_dataset(dataset)))
    result = strategy.run(serve, args=(batch,))
    local = [r["output_0"] for r in strategy.experimental_local_results(result)]
    torch.testing.assert_close(torch.cat(local), model(x).detach())


def test_a_model_built_under_mirrored_strategy_exports_its_weights(tmp_path):
    """TF's save-and-load tutorial: md.saved_model.save of a model whose weights are MirroredVariables."""
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = _model()
    md.saved_model.save(model, tmp_path / "m")
    x = torch.randn(5, 4)
    out = md.saved_model.load(tmp_path / "m").signatures["serving_default"](x)["output_0"]
    torch.testing.assert_close(out, model(x).detach())
