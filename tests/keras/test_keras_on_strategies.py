"""Keras fit/evaluate/predict under strategies: same weights, losses and metrics as one device."""

import contextlib

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import layers

N_EXAMPLES = 70  # batch 32: two full batches and an uneven last batch of 6


def _data():
    rng = np.random.RandomState(0)
    x = rng.randn(N_EXAMPLES, 6).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int64")
    return x, y


def _model(bn=False):
    torch.manual_seed(3)
    stack = [layers.Dense(12, activation="relu", input_shape=(6,))]
    if bn:
        stack.append(layers.BatchNormalization())
    stack.append(layers.Dense(2, activation="softmax"))
    model = md.keras.Sequential(stack)
    model.compile(md.keras.optimizers.SGD(0.1, momentum=0.9), "sparse_categorical_crossentropy",
                  metrics=["accuracy", md.keras.metrics.SparseTopKCategoricalAccuracy(k=1)])
    return model


def _fit(strategy, bn=False, **kwargs):
    x, y = _data()
    if strategy is None:
        model = _model(bn)
    else:
        with strategy.scope():
            model = _model(bn)
    history = model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0, **kwargs)
    return model, history


@pytest.mark.parametrize("n", [2, 3])
def test_fit_on_replicas_equals_one_device(n):
    strategy = md.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(n)])
    model, history = _fit(strategy)
    ref, ref_history = _fit(None)
    assert isinstance(model.layers[0].kernel, md.distribute.MirroredVariable)
    for got, want in zip(model.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for key in ("loss", "accuracy", "sparse_top_k_categorical_accuracy"):
        np.testing.assert_allclose(history.history[key], ref_history.history[key], rtol=1e-5)
    x, y = _data()
    np.testing.assert_allclose(model.evaluate(x, y, batch_size=32, verbose=0),
                               ref.evaluate(x, y, batch_size=32, verbose=0), rtol=1e-5)
    np.testing.assert_allclose(model.predict(x, batch_size=32, verbose=0), ref.predict(x, batch_size=32, verbose=0),
                               rtol=1e-5, atol=1e-6)
    assert int(model.optimizer.iterations) == 2 * 3  # counted once per step, not per replica


def test_fit_with_datasets_and_validation():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x, y = _data()
    ds = md.data.Dataset.from_tensor_slices((x, y)).batch(32)
    with strategy.scope():
        model = _model()
    history = model.fit(ds, validation_data=ds, epochs=1, verbose=0)
    ref = _model()
    ref_history = ref.fit(ds, validation_data=ds, epochs=1, verbose=0)
    for key in ("loss", "val_loss", "val_accuracy"):
        np.testing.assert_allclose(history.history[key], ref_history.history[key], rtol=1e-5)


def test_central_storage_and_one_device_fit():
    for strategy in (md.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"]),
                     md.distribute.OneDeviceStrategy("/cpu:0")):
        model, _ = _fit(strategy)
        ref, _ = _fit(None)
        for got, want in zip(model.get_weights(), ref.get_weights()):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_lazily_built_model_is_mirrored():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x, y = _data()
    with strategy.scope():
        model = md.keras.Sequential([layers.Dense(4, activation="relu"), layers.Dense(2, activation="softmax")])
        model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)  # fit outside the scope also works
    assert isinstance(model.layers[0].kernel, md.distribute.MirroredVariable)
    k = model.layers[0].kernel
    assert torch.equal(k.values[0], k.values[1])


def test_checkpoint_moves_between_strategies(tmp_path):
    two = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    model, _ = _fit(two)
    model.save_weights(str(tmp_path / "ckpt.weights.h5"))
    three = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2"])
    with three.scope():
        other = _model()
    other.load_weights(str(tmp_path / "ckpt.weights.h5"))
    plain = _model()
    plain.load_weights(str(tmp_path / "ckpt.weights.h5"))
    x, _ = _data()
    np.testing.assert_allclose(other.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-6)
    np.testing.assert_allclose(plain.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-6)
    for v in other.layers[0].kernel.values:
        np.testing.assert_allclose(v.detach().numpy(), model.layers[0].kernel.detach().numpy())


def test_custom_training_loop_with_keras_pieces():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x, y = _data()
    with strategy.scope():
        model = _model()
        optimizer = md.keras.optimizers.SGD(0.1, momentum=0.9)
        accuracy = md.keras.metrics.SparseCategoricalAccuracy()
    loss_fn = md.keras.losses.SparseCategoricalCrossentropy(reduction="none")
    dist = strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices((x, y)).batch(32))

    def step(xb, yb):
        with md.GradientTape() as tape:
            probs = model(xb, training=True)
            loss = md.nn.compute_average_loss(loss_fn(yb, probs), global_batch_size=32)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for xb, yb in dist:
        strategy.run(step, args=(xb, yb))
    assert int(optimizer.iterations) == 3
    # In cross-replica context (a custom loop without strategy.run) TensorFlow 2.21 (tf.keras 2 and Keras 3)
    # applies the one set of gradients to every copy: the copies stay equal.
    grads = [torch.ones_like(v) for v in model.trainable_variables]
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    assert int(optimizer.iterations) == 4
    for v in model.trainable_variables:
        first, second = strategy.experimental_local_results(v)
        torch.testing.assert_close(first.detach().cpu(), second.detach().cpu(), rtol=0, atol=0)


def test_synchronized_batch_norm_matches_one_device():
    def build():
        torch.manual_seed(3)
        model = md.keras.Sequential([layers.Dense(8, input_shape=(6,)), layers.BatchNormalization(synchronized=True),
                                     layers.Activation("relu"), layers.Dense(2, activation="softmax")])
        model.compile(md.keras.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
        return model

    x, y = _data()
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = build()
    model.fit(x[:64], y[:64], batch_size=32, epochs=1, shuffle=False, verbose=0)
    ref = build()
    ref.fit(x[:64], y[:64], batch_size=32, epochs=1, shuffle=False, verbose=0)
    for got, want in zip(model.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_fit_evaluate_on_a_distributed_dataset_equals_one_device():
    # seed 004: model.fit(strategy.experimental_distribute_dataset(...), steps_per_epoch=...)
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x, y = _data()
    dist = strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat(2))
    with strategy.scope():
        model = _model()
    history = model.fit(dist, steps_per_epoch=3, epochs=2, verbose=0)
    ref, ref_history = _fit(None)
    for got, want in zip(model.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(history.history["loss"], ref_history.history["loss"], rtol=1e-5)
    dist_eval = strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices((x, y)).batch(32))
    np.testing.assert_allclose(model.evaluate(dist_eval, verbose=0), ref.evaluate(x, y, batch_size=32, verbose=0),
                               rtol=1e-5)


def test_apply_gradients_leaves_the_callers_gradients_unchanged():
    """On logical CPUs the step sums each gradient where it is applied; the tensors handed to
    apply_gradients are never written."""
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = _model()
        optimizer = md.keras.optimizers.SGD(0.1)
    x, _ = _data()

    def step(xb):
        grads = [torch.full_like(v.values[0], 1.0) for v in model.trainable_variables]
        before = [g.clone() for g in grads]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return torch.tensor(all(torch.equal(g, b) for g, b in zip(grads, before)))

    kernel = model.layers[0].kernel.values[0].detach().clone()
    unchanged = strategy.run(step, args=(md.distribute.PerReplica((torch.tensor(x[:3]), torch.tensor(x[3:6]))),))
    assert all(bool(u) for u in strategy.experimental_local_results(unchanged))
    # Summed over 2 replicas: each weight moved by lr * 2.
    torch.testing.assert_close(model.layers[0].kernel.values[1].detach(), kernel - 0.2)


def test_fit_with_global_clipnorm_on_replicas_equals_one_device():
    def fit(strategy):
        with strategy.scope() if strategy else contextlib.nullcontext():
            model = _model()
            model.compile(md.keras.optimizers.SGD(0.1, momentum=0.9, global_clipnorm=0.05),
                          "sparse_categorical_crossentropy")
        x, y = _data()
        model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
        return model.get_weights()

    for got, want in zip(fit(md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])), fit(None)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_apply_gradients_in_cross_replica_context_steps_as_one_device():
    """The custom training walkthrough with the two added lines: no strategy.run, the model and a momentum
    optimizer made in the scope; every copy takes one device's steps (its momentum slots included)."""
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x, y = _data()
    models = []
    for scope in (strategy.scope(), md.distribute.get_strategy().scope()):
        with scope:
            torch.manual_seed(3)
            model = _model()
            optimizer = md.keras.optimizers.SGD(0.1, momentum=0.9, clipnorm=1.0)
        loss_fn = md.keras.losses.SparseCategoricalCrossentropy()

        def step(xb, yb):
            with md.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))

        if not models:   # first a step inside strategy.run (each variable's slots where the update plan keeps them)
            dist = strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices((x[:32], y[:32])).batch(32))
            for xb, yb in dist:
                strategy.run(step, args=(xb, yb))
        else:
            step(x[:32], y[:32])
        for start in range(32, N_EXAMPLES, 32):   # then the walkthrough's loop: no strategy.run
            step(x[start:start + 32], y[start:start + 32])
        models.append(model)
    for distributed, plain in zip(models[0].trainable_variables, models[1].trainable_variables):
        for copy in strategy.experimental_local_results(distributed):
            torch.testing.assert_close(copy.detach().cpu(), plain.detach().cpu(), rtol=1e-6, atol=1e-7)


def test_apply_gradients_inside_merge_call_is_refused_at_once():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = _model()
        optimizer = md.keras.optimizers.SGD(0.1)
        optimizer.build(model.trainable_variables)

    def step():
        grads = [torch.ones_like(v) for v in model.trainable_variables]
        md.distribute.get_replica_context().merge_call(
            lambda strategy, g: optimizer.apply_gradients(zip(g, model.trainable_variables)), args=(grads,))

    with pytest.raises(RuntimeError, match="cannot be called inside merge_call: call it in the replica function"):
        strategy.run(step)
    assert int(optimizer.iterations) == 0

    def good_step():     # the replicas still meet afterwards
        optimizer.apply_gradients(zip([torch.ones_like(v) for v in model.trainable_variables],
                                      model.trainable_variables))

    strategy.run(good_step)
    assert int(optimizer.iterations) == 1
