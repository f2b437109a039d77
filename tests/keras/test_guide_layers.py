"""The layers the keras.io guides added to md.keras: their refusals (TF's types, what and why) and configs.

Their numbers are compared with TensorFlow 2.21's in ``test_tf_guides.py``.
"""

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import layers


@pytest.mark.parametrize("make, error, words", [
    (lambda: layers.Hashing(num_bins=0), ValueError, "num_bins=0"),
    (lambda: layers.Hashing(num_bins=3, output_mode="tf_idf"), ValueError, "output_mode='tf_idf'"),
    (lambda: layers.Hashing(num_bins=3, salt="x"), ValueError, "salt='x'"),
    (lambda: layers.Discretization(), ValueError, "either `num_bins` or `bin_boundaries`"),
    (lambda: layers.Discretization(bin_boundaries=[0.0], num_bins=2), ValueError, "Both `num_bins` and"),
    (lambda: layers.Discretization(num_bins=2, output_mode="tf_idf"), ValueError, "output_mode='tf_idf'"),
    (lambda: layers.TextVectorization(output_mode="one_hot"), ValueError, "output_mode"),
    (lambda: layers.TextVectorization(ngrams=[1, 2]), ValueError, "ngrams=[1, 2]"),
    (lambda: layers.TextVectorization(output_mode="count", output_sequence_length=4), ValueError,
     "output_sequence_length"),
    (lambda: layers.Input((2,), dtype="string"), ValueError, "ds.map"),
    (lambda: layers.RNN(object()), ValueError, "`state_size`"),
    (lambda: layers.RNN([layers.LSTMCell(2), layers.LSTMCell(2)]), ValueError, "Stack RNN layers"),
])
def test_bad_arguments_raise_with_the_value_and_the_fix(make, error, words):
    with pytest.raises(error, match=pytest.importorskip("re").escape(words)):
        make()


def test_discretization_needs_boundaries_or_adapt_before_a_call():
    layer = layers.Discretization(num_bins=3)
    with pytest.raises(ValueError, match="call `adapt"):
        layer(np.array([1.0]))
    with pytest.raises(ValueError, match="use `num_bins` instead"):
        layers.Discretization(bin_boundaries=[0.0]).adapt(np.array([1.0]))


def test_adapted_discretization_round_trips_its_config():
    layer = layers.Discretization(num_bins=4, epsilon=0.01)
    layer.adapt(np.array([[-1.5, 1.0, 3.4, 0.5], [0.0, 3.0, 1.3, 0.0]]))
    again = layers.Discretization.from_config(layer.get_config())
    x = np.array([[-2.0, 0.2, 0.9, 5.0]])
    assert again(x).tolist() == layer(x).tolist() == [[0, 1, 2, 3]]   # boundaries [0, 0.5, 1.3] (TF 2.21)


def test_hashing_takes_tensors_and_numpy_scalars_and_keeps_the_shape():
    ids = layers.Hashing(num_bins=3)(torch.tensor([[1], [2], [3]]))
    assert ids.tolist() == [[0], [1], [0]]                       # TF 2.21: "1" -> 0, "2" -> 1, "3" -> 0
    assert layers.Hashing(num_bins=3)(np.array([np.int64(1)])).tolist() == [0]
    again = layers.Hashing.from_config(layers.Hashing(num_bins=3, salt=133).get_config())
    assert again(np.array(["A", "B", "C"])).tolist() == [0, 0, 2]  # TF 2.21 (SipHash keyed [133, 133])


def test_text_vectorization_config_keeps_ngrams_mode_and_vocabulary():
    layer = layers.TextVectorization(output_mode="count", ngrams=2)
    layer.adapt(["a b a", "b c"])
    again = layers.TextVectorization.from_config(layer.get_config())
    assert again.get_vocabulary() == layer.get_vocabulary()
    assert again(["a b"]).tolist() == layer(["a b"]).tolist()


def test_stateful_rnn_refuses_another_batch_size_and_resets_to_zeros():
    lstm = layers.LSTM(2, stateful=True)
    first = lstm(torch.ones(2, 3, 1))
    assert not torch.equal(lstm(torch.ones(2, 3, 1)), first)          # the second call starts from the states
    with pytest.raises(ValueError, match="Expected batch size: 2\n- Received batch size: 3"):
        lstm(torch.ones(3, 3, 1))
    lstm.reset_states()
    assert all(float(s.abs().sum()) == 0.0 for s in lstm.states)
    assert torch.allclose(lstm(torch.ones(2, 3, 1)), first)


def test_rnn_of_a_cell_round_trips_through_a_saved_model(tmp_path):
    model = md.keras.Sequential([md.keras.Input((4, 3)), layers.SimpleRNN(2, return_sequences=True),
                                 layers.RNN(layers.GRUCell(3)), layers.Dense(1)])
    x = np.random.RandomState(0).randn(2, 4, 3).astype("float32")
    model.save(str(tmp_path / "m.keras"))
    loaded = md.keras.models.load_model(str(tmp_path / "m.keras"))
    assert np.allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_non_trainable_weight_supports_the_variable_api():
    class Counter(layers.Layer):
        def __init__(self):
            super().__init__()
            self.total = self.add_weight(shape=(2,), initializer="zeros", trainable=False)

        def call(self, inputs):
            self.total.assign_add(md.keras.ops.sum(inputs, axis=0))
            return inputs

    layer = Counter()
    layer(torch.ones(3, 2))
    assert layer.total.numpy().tolist() == [3.0, 3.0] and layer.non_trainable_weights[0] is layer.total
    with pytest.raises(ValueError, match=r"shape \(3,\) to a weight of shape \(2,\)"):
        layer.total.assign(np.zeros(3))
    assert type(layer.total * 2) is torch.Tensor                    # ops give plain tensors
