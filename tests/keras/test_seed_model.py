"""Seed 002's Conv1D text classifier: the exact architecture, summary totals, and a short fit."""

import numpy as np
import torch

from multidev.keras import *  # noqa: F403  (the seed's import style)

MAX_WORDS, MAX_LEN, CAT_NUM = 30982, 300, 46


def create_model(max_len=MAX_LEN):
    model = models.Sequential()  # noqa: F405
    model.add(layers.Embedding(MAX_WORDS, 7, input_length=max_len))  # noqa: F405
    model.add(layers.Conv1D(filters=64, kernel_size=5, activation="relu"))  # noqa: F405
    model.add(layers.MaxPool1D(2))  # noqa: F405
    model.add(layers.Conv1D(filters=32, kernel_size=3, activation="relu"))  # noqa: F405
    model.add(layers.MaxPool1D(2))  # noqa: F405
    model.add(layers.Flatten())  # noqa: F405
    model.add(layers.Dense(CAT_NUM, activation="softmax"))  # noqa: F405
    return model


def compile_model(model):
    model.compile(optimizer=optimizers.Nadam(),  # noqa: F405
                  loss=losses.SparseCategoricalCrossentropy(),  # noqa: F405
                  metrics=[metrics.SparseCategoricalAccuracy(), metrics.SparseTopKCategoricalAccuracy(5)])  # noqa: F405
    return model


def test_summary_matches_seed():
    lines = []
    create_model().summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert 'Model: "sequential"' in text
    for row in ["embedding (Embedding)", "(None, 300, 7)", "216874", "conv1d (Conv1D)", "(None, 296, 64)", "2304",
                "max_pooling1d (MaxPooling1D)", "(None, 148, 64)", "conv1d_1 (Conv1D)", "(None, 146, 32)", "6176",
                "max_pooling1d_1", "(None, 73, 32)", "flatten (Flatten)", "(None, 2336)", "dense (Dense)",
                "(None, 46)", "107502"]:
        assert row in text, row
    assert "Total params: 332,856" in text
    assert "Trainable params: 332,856" in text
    assert "Non-trainable params: 0" in text


def test_weights_are_parameters_with_keras_layouts():
    model = create_model()
    emb, conv = model.layers[0], model.layers[1]
    assert isinstance(emb.embeddings, torch.nn.Parameter) and tuple(emb.embeddings.shape) == (MAX_WORDS, 7)
    assert tuple(conv.kernel.shape) == (5, 7, 64) and tuple(conv.bias.shape) == (64,)
    assert "kernel" in conv._parameters
    assert model.count_params() == 332856
    assert len(model.trainable_variables) == 7


def test_short_fit_learns_a_learnable_signal(capsys):
    # label = which of 4 "keywords" occurs in the sequence: learnable in a few epochs
    rng = np.random.RandomState(0)
    n, length = 256, 40
    x = rng.randint(10, MAX_WORDS, size=(n, length))
    y = rng.randint(0, 4, size=n)
    x[np.arange(n), rng.randint(0, length, size=n)] = y + 1
    model = compile_model(create_model(max_len=length))
    # Keras 3's Nadam (momentum warming up as 1 - 0.5 * 0.96^t) needs ~8 epochs here, as in Keras itself
    history = model.fit(x, y, batch_size=32, epochs=8, validation_data=(x[:64], y[:64]), verbose=2)
    out = capsys.readouterr().out
    assert "Epoch 1/8" in out and "8/8 - " in out and "val_sparse_top_k_categorical_accuracy" in out
    h = history.history
    assert set(h) == {"loss", "sparse_categorical_accuracy", "sparse_top_k_categorical_accuracy", "val_loss",
                      "val_sparse_categorical_accuracy", "val_sparse_top_k_categorical_accuracy"}
    assert h["loss"][-1] < h["loss"][0]
    assert h["sparse_categorical_accuracy"][-1] > 0.5
    loss, acc, top5 = model.evaluate(x, y, verbose=0)
    assert acc > 0.5 and top5 >= acc
    probs = model.predict(x[:10], verbose=0)
    assert probs.shape == (10, CAT_NUM) and np.allclose(probs.sum(-1), 1, atol=1e-5)
