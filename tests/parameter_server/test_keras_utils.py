"""DatasetCreator without parameter servers, and SidecarEvaluator on weights files."""

from __future__ import annotations

import numpy as np
import pytest

import multidev as md
import multidev.keras  # noqa: F401


def _model():
    model = md.keras.Sequential([md.keras.layers.Dense(1)])
    model.build((None, 3))
    model.compile(optimizer=md.keras.optimizers.SGD(0.1), loss="mse")
    return model


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype("float32")
    return x, x @ np.array([[1.0], [-1.0], [2.0]], dtype="float32")


def test_dataset_creator_gets_an_input_context_and_fits_locally():
    x, y = _data()
    seen = []

    def dataset_fn(input_context):
        seen.append((input_context.num_input_pipelines, input_context.input_pipeline_id))
        return md.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)

    model = _model()
    history = model.fit(md.keras.utils.experimental.DatasetCreator(dataset_fn), epochs=3, steps_per_epoch=8, verbose=0)
    assert seen == [(1, 0)]
    assert history.history["loss"][-1] < history.history["loss"][0]


def test_dataset_creator_rejects_non_callables():
    with pytest.raises(TypeError, match="dataset_fn"):
        md.keras.utils.experimental.DatasetCreator([1, 2, 3])


def test_sidecar_evaluator_evaluates_each_new_weights_file(tmp_path):
    x, y = _data()
    trained = _model()
    trained.save_weights(str(tmp_path / "weights-1.weights.h5"))
    trained.fit(x, y, epochs=20, batch_size=16, verbose=0)
    trained.save_weights(str(tmp_path / "weights-2.weights.h5"))
    evaluator = md.keras.utils.SidecarEvaluator(_model(), (x, y), str(tmp_path), max_evaluations=2, timeout=5,
                                                poll_interval=0.05)
    results = evaluator.start()
    assert [p.rsplit("/", 1)[-1] for p, _ in results] == ["weights-1.weights.h5", "weights-2.weights.h5"]
    assert results[1][1]["loss"] < results[0][1]["loss"]


def test_sidecar_evaluator_stops_when_nothing_new_arrives(tmp_path):
    x, y = _data()
    evaluator = md.keras.utils.SidecarEvaluator(_model(), (x, y), str(tmp_path / "none"), timeout=0.2,
                                                poll_interval=0.05)
    assert evaluator.start() == []
    with pytest.raises(ValueError, match="max_evaluations"):
        md.keras.utils.SidecarEvaluator(_model(), (x, y), str(tmp_path), max_evaluations=0)
