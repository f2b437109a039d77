"""Idioms of tensorflow.org's structured_data/time_series tutorial that multidev refused, as TF 2.21 runs them.

``split_window`` calls ``set_shape`` on slices of ``tf.stack([...])`` windows and, in a ``Dataset.map``,
of the dataset's batches; the page plots ``linear.layers[0].kernel[:,0].numpy()`` and builds its
multi-step models with ``kernel_initializer=tf.initializers.zeros()``.
"""

import numpy as np
import pytest

import multidev as md


def split_window(features, input_width=6, label_width=1):
    inputs = features[:, slice(0, input_width), :]
    labels = features[:, slice(input_width + 1 - label_width, None), :]
    labels = md.stack([labels[:, :, 1]], axis=-1)
    inputs.set_shape([None, input_width, None])
    labels.set_shape([None, label_width, None])
    return inputs, labels


def test_split_window_on_a_stack_of_windows():
    data = np.arange(40 * 3, dtype="float32").reshape(40, 3)
    example_window = md.stack([np.array(data[:7]), np.array(data[10:17]), np.array(data[20:27])])
    inputs, labels = split_window(example_window)
    assert tuple(inputs.shape) == (3, 6, 3) and tuple(labels.shape) == (3, 1, 1)
    np.testing.assert_array_equal(labels.numpy()[:, 0, 0], [19.0, 49.0, 79.0])


def test_split_window_in_a_dataset_map():
    data = np.arange(40 * 3, dtype="float32").reshape(40, 3)
    ds = md.keras.utils.timeseries_dataset_from_array(data=data, targets=None, sequence_length=7,
                                                      sequence_stride=1, shuffle=False, batch_size=32)
    inputs, labels = next(iter(ds.map(split_window)))
    assert tuple(inputs.shape) == (32, 6, 3) and tuple(labels.shape) == (32, 1, 1)


@pytest.mark.parametrize("shape", [[None, 5, None], [3, 6], None])
def test_set_shape_is_tensorflows_eager_check(shape):
    window = md.stack([np.zeros((6, 3), "float32")] * 3)
    if shape is None:
        window.set_shape(shape)   # an unknown shape: anything goes
        return
    with pytest.raises(ValueError, match=r"shape \(3, 6, 3\) is not compatible with supplied shape"):
        window.set_shape(shape)
    window.set_shape(md.TensorShape([3, None, 3]))


def test_a_weights_slice_reads_with_numpy_and_keeps_its_gradient():
    linear = md.keras.Sequential([md.keras.layers.Dense(units=1)])
    linear(np.zeros((1, 1, 4), "float32"))
    kernel = linear.layers[0].kernel
    np.testing.assert_array_equal(kernel[:, 0].numpy(), kernel.numpy()[:, 0])
    v = md.Variable([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(v[:, 0].numpy(), [1.0, 3.0])
    with md.GradientTape() as tape:   # a slice still carries the gradient
        loss = md.reduce_sum(v[0] * 3.0)
    np.testing.assert_array_equal(tape.gradient(loss, v).numpy(), [[3.0, 3.0], [0.0, 0.0]])


def test_tf_initializers_zeros_is_keras_initializers():
    layer = md.keras.layers.Dense(3, kernel_initializer=md.initializers.zeros())
    layer.build((None, 2))
    assert not layer.kernel.detach().any()
    assert md.keras.initializers.glorot_uniform is md.keras.initializers.GlorotUniform


def test_tf_signal_is_refused_naming_torch_fft():
    """The page's ``fft = tf.signal.rfft(df['T (degC)'])``: torch.signal has no rfft (window functions only)."""
    with pytest.raises(AttributeError, match=r"torch\.fft's functions \(tf\.signal\.rfft is torch\.fft\.rfft"):
        md.signal.rfft
