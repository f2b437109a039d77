"""keras.io/examples/generative/lstm_character_level_text_generation: one-hot (bool) character windows, an
``LSTM`` with a softmax ``Dense``, ``RMSprop(0.01)``, and the example's ``sample(preds, temperature)`` loop
generating text with ``model.predict`` one character at a time.

Shrunk: a 300-character synthetic text (a few repeated words), maxlen 8, step 3, LSTM(16), 1 epoch of
batch 16, 6 generated characters at diversity 0.5 and 1.0 (keras.io: Nietzsche, maxlen 40, LSTM(128), 40 epochs).
"""

import numpy as np

SOURCE = "https://keras.io/examples/generative/lstm_character_level_text_generation/"


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    rng = np.random.RandomState(0)
    words = ["the ", "will ", "to ", "power ", "of ", "truth ", "and ", "man "]
    text = "".join(words[i] for i in rng.randint(0, len(words), 80 * scale))[:300 * scale]
    chars = sorted(list(set(text)))
    char_indices = dict((c, i) for i, c in enumerate(chars))
    indices_char = dict((i, c) for i, c in enumerate(chars))

    maxlen, step = 8, 3
    sentences, next_chars = [], []
    for i in range(0, len(text) - maxlen, step):
        sentences.append(text[i: i + maxlen])
        next_chars.append(text[i + maxlen])
    x = np.zeros((len(sentences), maxlen, len(chars)), dtype="bool")
    y = np.zeros((len(sentences), len(chars)), dtype="bool")
    for i, sentence in enumerate(sentences):
        for t, char in enumerate(sentence):
            x[i, t, char_indices[char]] = 1
        y[i, char_indices[next_chars[i]]] = 1

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([keras.Input(shape=(maxlen, len(chars))), layers.LSTM(16),
                                  layers.Dense(len(chars), activation="softmax")])
        optimizer = keras.optimizers.RMSprop(learning_rate=0.01)
        model.compile(loss="categorical_crossentropy", optimizer=optimizer)

    def sample(preds, temperature=1.0):
        # helper function to sample an index from a probability array
        preds = np.asarray(preds).astype("float64")
        preds = np.log(preds) / temperature
        exp_preds = np.exp(preds)
        preds = exp_preds / np.sum(exp_preds)
        probas = np.random.multinomial(1, preds, 1)
        return np.argmax(probas)

    history = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    np.random.seed(1)
    start_index = np.random.randint(0, len(text) - maxlen - 1)
    generated_ids, last_preds = [], []
    for diversity in [0.5, 1.0]:
        sentence = text[start_index: start_index + maxlen]
        for i in range(6):
            x_pred = np.zeros((1, maxlen, len(chars)))
            for t, char in enumerate(sentence):
                x_pred[0, t, char_indices[char]] = 1.0
            preds = model.predict(x_pred, verbose=0)[0]
            next_index = sample(preds, diversity)
            next_char = indices_char[next_index]
            sentence = sentence[1:] + next_char
            generated_ids.append(next_index)
        last_preds.append(preds)
    return {"_model": model, "history": history.history, "generated": generated_ids, "last_preds": last_preds}
