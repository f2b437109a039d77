"""``md.keras.ops`` called in a program's own code gives results ``.numpy()`` reads while they carry gradients,
as TensorFlow's eager tensors: keras.io's DDPG ``policy`` does ``ops.squeeze(actor_model(state)).numpy()``
(tests/programs/keras/p43). Inside a layer's call the ops give plain torch tensors (no subclass on the hot path)."""

import numpy as np
import pytest
import torch

import multidev as md

K = md.keras


def _model():
    K.utils.set_random_seed(0)
    inputs = K.Input((3,))
    return K.Model(inputs, K.layers.Dense(2, activation="tanh")(K.layers.Dense(4, activation="relu")(inputs)))


def test_ops_on_a_models_output_read_with_numpy_and_still_train():
    model = _model()
    x = np.random.RandomState(0).random((1, 3)).astype("float32")
    action = K.ops.squeeze(model(x))
    assert action.requires_grad and action.numpy().shape == (2,)        # the DDPG policy's line
    np.testing.assert_allclose(action.numpy() + np.zeros(2), model.predict(x, verbose=0)[0], rtol=1e-6)
    halves = K.ops.split(model(x), 2, axis=1)                            # a list of results: each readable
    assert [h.numpy().shape for h in halves] == [(1, 1), (1, 1)]
    assert float(K.ops.mean(K.ops.square(model(x) - 1.0))) > 0           # a chain of ops, then float()
    with md.GradientTape() as tape:
        loss = -K.ops.mean(K.ops.squeeze(model(x)))
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads) and loss.numpy().shape == ()


def test_inside_a_layer_ops_give_plain_tensors():
    seen = []

    class Probe(K.layers.Layer):
        def call(self, inputs):
            out = K.ops.square(inputs)
            seen.append(type(out))
            return out

    inputs = K.Input((3,))
    model = K.Model(inputs, Probe()(K.layers.Dense(2)(inputs)))
    out = model(np.ones((2, 3), "float32"))
    assert seen[-1] is torch.Tensor and out.numpy().shape == (2, 2)      # the layer's output is readable


def test_results_without_gradients_take_python_lists_and_give_numpy_scalars():
    """keras.io's DQN: rewards (a list) + gamma * ops.amax(target.predict(...)); actions from argmax(...).numpy()."""
    future = np.array([[0.5, 2.0], [1.0, -1.0]], "float32")
    q = [1.0, 0.0] + 0.5 * K.ops.amax(future, axis=1)
    np.testing.assert_allclose(q.numpy(), [2.0, 0.5])
    assert q.dtype == torch.float32 and (q * [2, 2]).numpy().tolist() == [4.0, 1.0]   # ints take the float dtype
    assert (K.ops.amin(future, axis=0) - (0.5, 0.5)).numpy().tolist() == [0.0, -1.5]
    action = K.ops.argmax(K.ops.convert_to_tensor(future)[0]).numpy()
    assert isinstance(action, np.integer) and action == 1                  # a numpy scalar, as TensorFlow's
    assert K.ops.one_hot([np.int64(0), action], 2).numpy().tolist() == [[1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(TypeError):
        [1.0, 2.0] + torch.ones(2)   # a plain torch tensor's own refusal (Keras 3 on torch: p44)


def test_a_symbolic_op_still_builds_a_node():
    inputs = K.Input((3,))
    model = K.Model(inputs, K.ops.squeeze(K.layers.Dense(1)(inputs), axis=-1))
    assert model.predict(np.ones((4, 3), "float32"), verbose=0).shape == (4,)


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
