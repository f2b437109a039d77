"""keras.io/examples/nlp/addition_rnn as printed (Keras 3): ``CharacterTable`` one-hot encoding of reversed
"a+b" questions into BOOL arrays (``x`` and the targets ``y`` both ``dtype=bool``: Keras casts them), a
``Sequential`` built by ``model.add`` (``Input``, ``LSTM``, ``RepeatVector(DIGITS + 1)``, ``LSTM(return_sequences=
True)``, ``Dense(softmax)``) compiled with the strings ``"categorical_crossentropy"``/``"adam"``/``"accuracy"``;
``fit(epochs=1)`` called again and again in a Python loop with ``validation_data``, each followed by ``predict`` of
single validation rows (``x_val[np.array([ind])]``) decoded with ``argmax``.

The example draws its questions and the rows it shows with the global ``np.random`` (seeded here). Shrunk: 2-digit
numbers (3), 400 questions (50000), LSTMs of 16 units (128), batch 32, 3 rounds of one epoch (29), 3 shown rows (10).
"""

import numpy as np

SOURCE = "https://keras.io/examples/nlp/addition_rnn/"


class CharacterTable:
    """Given a set of characters:
    + Encode them to a one-hot integer representation
    + Decode the one-hot or integer representation to their character output
    + Decode a vector of probabilities to their character output
    """

    def __init__(self, chars):
        self.chars = sorted(set(chars))
        self.char_indices = dict((c, i) for i, c in enumerate(self.chars))
        self.indices_char = dict((i, c) for i, c in enumerate(self.chars))

    def encode(self, C, num_rows):
        x = np.zeros((num_rows, len(self.chars)))
        for i, c in enumerate(C):
            x[i, self.char_indices[c]] = 1
        return x

    def decode(self, x, calc_argmax=True):
        if calc_argmax:
            x = x.argmax(axis=-1)
        return "".join(self.indices_char[x] for x in x)


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    TRAINING_SIZE, DIGITS, REVERSE = 400 * scale, 2, True
    MAXLEN = DIGITS + 1 + DIGITS
    chars = "0123456789+ "
    ctable = CharacterTable(chars)

    np.random.seed(0)
    questions, expected, seen = [], [], set()
    while len(questions) < TRAINING_SIZE:
        f = lambda: int("".join(np.random.choice(list("0123456789"))   # noqa: E731 - as printed
                                for i in range(np.random.randint(1, DIGITS + 1))))
        a, b = f(), f()
        key = tuple(sorted((a, b)))
        if key in seen:
            continue
        seen.add(key)
        q = "{}+{}".format(a, b)
        query = q + " " * (MAXLEN - len(q))
        ans = str(a + b)
        ans += " " * (DIGITS + 1 - len(ans))
        if REVERSE:
            query = query[::-1]
        questions.append(query)
        expected.append(ans)

    x = np.zeros((len(questions), MAXLEN, len(chars)), dtype=bool)
    y = np.zeros((len(questions), DIGITS + 1, len(chars)), dtype=bool)
    for i, sentence in enumerate(questions):
        x[i] = ctable.encode(sentence, MAXLEN)
    for i, sentence in enumerate(expected):
        y[i] = ctable.encode(sentence, DIGITS + 1)
    indices = np.arange(len(y))
    np.random.shuffle(indices)
    x, y = x[indices], y[indices]
    split_at = len(x) - len(x) // 10
    (x_train, x_val), (y_train, y_val) = (x[:split_at], x[split_at:]), (y[:split_at], y[split_at:])

    keras.utils.set_random_seed(0)
    num_layers = 1
    with strategy.scope():
        model = keras.Sequential()
        model.add(layers.Input((MAXLEN, len(chars))))
        model.add(layers.LSTM(16))
        model.add(layers.RepeatVector(DIGITS + 1))
        for _ in range(num_layers):
            model.add(layers.LSTM(16, return_sequences=True))
        model.add(layers.Dense(len(chars), activation="softmax"))
        model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])

    epochs, batch_size = 4, 32
    histories, shown = [], []
    np.random.seed(1)
    for epoch in range(1, epochs):
        history = model.fit(x_train, y_train, batch_size=batch_size, epochs=1, validation_data=(x_val, y_val),
                            verbose=0)
        histories.append(history.history)
        for i in range(3):
            ind = np.random.randint(0, len(x_val))
            rowx, rowy = x_val[np.array([ind])], y_val[np.array([ind])]
            preds = np.argmax(model.predict(rowx, verbose=0), axis=-1)
            q = ctable.decode(rowx[0])
            correct = ctable.decode(rowy[0])
            guess = ctable.decode(preds[0], calc_argmax=False)
            shown.append([ctable.char_indices[c] for c in q + correct + guess])
    return {"_model": model, "history": histories, "shown": shown, "predict": model.predict(x_val[:8], verbose=0)}
