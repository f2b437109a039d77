"""TensorFlow's "Save and load a model using a distribution strategy" tutorial, ported to multidev.

A Keras model trained under ``MirroredStrategy`` (2 logical CPUs) is saved and loaded three ways:
``model.save``/``md.keras.models.load_model`` (loaded with no strategy and under ``OneDeviceStrategy``
and trained on), ``md.saved_model.save``/``md.saved_model.load`` (its ``serving_default`` signature
called directly and inside ``strategy.run`` under another ``MirroredStrategy``), and an object-based
``md.train.Checkpoint`` restored under another strategy; saved and loaded "from a local device"
(``SaveOptions``/``LoadOptions(experimental_io_device='/job:localhost')``). Last, the tutorial's caveat: a subclassed
model with no defined inputs, and an ``md.Module`` whose ``md.function`` has an input signature.

    python examples/tutorials/save_and_load.py [--epochs 2] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import torch

import _common
import multidev as md

_common.use_logical_cpus(2)


def compile_model(model) -> None:
    model.compile(loss=md.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=md.keras.optimizers.Adam(), metrics=[md.keras.metrics.SparseCategoricalAccuracy()])


def keras_api(model, path, train_dataset, eval_dataset, epochs) -> None:
    print("== Keras API: model.save / load_model")
    model.save(path)
    restored_keras_model = md.keras.models.load_model(path)
    print("Restored (no strategy) eval:", fmt(restored_keras_model.evaluate(eval_dataset, verbose=0)))
    restored_keras_model.fit(train_dataset, epochs=epochs, verbose=2)
    another_strategy = md.distribute.OneDeviceStrategy("/cpu:0")
    with another_strategy.scope():
        restored_keras_model_ds = md.keras.models.load_model(path)
        print("Restored (OneDeviceStrategy) eval:", fmt(restored_keras_model_ds.evaluate(eval_dataset, verbose=0)))
        restored_keras_model_ds.fit(train_dataset, epochs=epochs, verbose=2)


def saved_model_api(model, path, eval_dataset) -> None:
    print("== md.saved_model API")
    md.saved_model.save(model, path)
    default_function_key = "serving_default"
    loaded = md.saved_model.load(path)
    inference_func = loaded.signatures[default_function_key]
    predict_dataset = eval_dataset.map(lambda image, label: image)
    batch = next(iter(predict_dataset.take(1)))
    outputs = inference_func(batch)
    (name, logits), = outputs.items()
    with torch.no_grad():
        direct = model(batch)
    print(f"serving_default output {name!r}: shape {list(logits.shape)}; equals model(batch): "
          f"{bool(torch.allclose(logits, direct, atol=1e-5))}")

    another_strategy = md.distribute.MirroredStrategy()
    with another_strategy.scope():
        loaded = md.saved_model.load(path)
        inference_func = loaded.signatures[default_function_key]
        dist_predict_dataset = another_strategy.experimental_distribute_dataset(predict_dataset)
        for dist_batch in dist_predict_dataset:
            result = another_strategy.run(inference_func, args=(dist_batch,))
            parts = [r[name] for r in another_strategy.experimental_local_results(result)]
            print("In strategy.run, per replica:", [list(p.shape) for p in parts],
                  "equals the direct call:", bool(torch.allclose(torch.cat(parts), logits, atol=1e-5)))
            break


def local_device(model, workdir, eval_dataset) -> None:
    """The tutorial's "Saving/Loading from a local device": the files go through this process's own
    filesystem ('/job:localhost'), which is where multidev always reads and writes."""
    print("== Saving/Loading from a local device")
    saved_model_path = os.path.join(workdir, "tf_save_local.keras")
    save_options = md.saved_model.SaveOptions(experimental_io_device="/job:localhost")
    model.save(saved_model_path, options=save_options)
    another_strategy = md.distribute.MirroredStrategy()
    with another_strategy.scope():
        load_options = md.saved_model.LoadOptions(experimental_io_device="/job:localhost")
        loaded = md.keras.models.load_model(saved_model_path, options=load_options)
        print("Loaded from /job:localhost (MirroredStrategy) eval:", fmt(loaded.evaluate(eval_dataset, verbose=0)))


def checkpoint_api(model, directory, eval_dataset) -> None:
    print("== md.train.Checkpoint across strategies")
    before = model.evaluate(eval_dataset, verbose=0)
    path = md.train.Checkpoint(model=model).save(os.path.join(directory, "ckpt"))
    with md.distribute.OneDeviceStrategy("/cpu:0").scope():
        fresh = _common.conv_model()
        compile_model(fresh)
        status = md.train.Checkpoint(model=fresh).restore(path)
        status.assert_existing_objects_matched()
        after = fresh.evaluate(eval_dataset, verbose=0)
    print(f"Saved {os.path.basename(path)} under MirroredStrategy: eval {fmt(before)}")
    print(f"Restored under OneDeviceStrategy: eval {fmt(after)}")


def caveats(workdir) -> None:
    print("== caveats: models without defined inputs")

    class SubclassedModel(md.keras.Model):
        output_name = "output_layer"

        def __init__(self):
            super().__init__()
            self._dense_layer = md.keras.layers.Dense(5, dtype="float32", name=self.output_name)

        def call(self, inputs):
            return self._dense_layer(inputs)

    my_model = SubclassedModel()
    unbuilt_path = os.path.join(workdir, "unbuilt")
    md.saved_model.save(my_model, unbuilt_path)   # as TF 2.21: saved, but nothing to serve
    print("Unbuilt subclassed model saved; signatures:", sorted(md.saved_model.load(unbuilt_path).signatures))

    class Adder(md.Module):
        @md.function(input_signature=[md.TensorSpec(shape=[None, 5], dtype=md.float32)])
        def add_one(self, x):
            return x + 1.0

    module_path = os.path.join(workdir, "module")
    adder = Adder()
    md.saved_model.save(adder, module_path, signatures={"serving_default": adder.add_one})
    loaded = md.saved_model.load(module_path)
    print("md.Module signature output:", {k: v.tolist() for k, v in
                                           loaded.signatures["serving_default"](torch.zeros(1, 5)).items()})


def fmt(values) -> str:
    return "loss {:.6f}, accuracy {:.6f}".format(*values)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workdir", default=None, help="where to save (default: a temporary directory)")
    args = parser.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="save_and_load_")
    md.random.set_seed(0)

    mirrored_strategy = md.distribute.MirroredStrategy()
    (x_train, y_train), (x_test, y_test) = _common.load_images("mnist", 256, 128)
    batch_size = 32 * mirrored_strategy.num_replicas_in_sync
    train_dataset = md.data.Dataset.from_tensor_slices((x_train, y_train)).cache().shuffle(
        10000, seed=0).batch(batch_size)
    eval_dataset = md.data.Dataset.from_tensor_slices((x_test, y_test)).batch(batch_size)
    with mirrored_strategy.scope():
        model = _common.conv_model()
        compile_model(model)
    model.fit(train_dataset, epochs=args.epochs, verbose=2)
    print("Trained (MirroredStrategy) eval:", fmt(model.evaluate(eval_dataset, verbose=0)))

    keras_api(model, os.path.join(workdir, "keras_save.keras"), train_dataset, eval_dataset, args.epochs)
    saved_model_api(model, os.path.join(workdir, "tf_save"), eval_dataset)
    local_device(model, workdir, eval_dataset)
    checkpoint_api(model, os.path.join(workdir, "checkpoints"), eval_dataset)
    caveats(workdir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
