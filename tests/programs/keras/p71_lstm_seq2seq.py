"""keras.io/examples/nlp/lstm_seq2seq as printed (Keras 3): character-level one-hot ``encoder_input_data``,
``decoder_input_data`` and the one-step-ahead ``decoder_target_data`` (padding with the " " token); an encoder
``LSTM(return_state=True)`` whose states ``[state_h, state_c]`` are the decoder ``LSTM``'s ``initial_state``;
``Model([encoder_inputs, decoder_inputs], ...)`` fit on a list of two arrays with ``validation_split=0.2``,
saved as ``.keras``; then the inference models rebuilt from the LOADED model (``model.input[0]``,
``model.layers[2].output`` unpacked into the encoder's states, ``model.layers[3]`` called again on new
``Input``s with ``initial_state=``, ``model.layers[4]``), and ``decode_sequence``'s greedy loop of
``predict([target_seq] + states_value)`` with ``np.argmax``.

The ``fra.txt`` pairs are generated: "translations" are the input words reversed. Shrunk: 48 pairs (10000),
latent_dim 16 (256), batch 16 (64), 2 epochs (100), 3 sentences decoded.
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/nlp/lstm_seq2seq/"


def _lines(n):
    rng = np.random.RandomState(0)
    words = ["go", "run", "hi", "wait", "stop", "hello", "see", "we", "try", "win"]
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(words, rng.randint(1, 3)))
        out.append(f"{text}\t{text[::-1]}\tCC-BY 2.0")
    return out


def run(keras, strategy, workdir, scale=1):
    batch_size, epochs, latent_dim, num_samples = 16, 2, 16, 48 * scale
    lines = _lines(num_samples + 1)
    input_texts, target_texts = [], []
    input_characters, target_characters = set(), set()
    for line in lines[: min(num_samples, len(lines) - 1)]:
        input_text, target_text, _ = line.split("\t")
        target_text = "\t" + target_text + "\n"
        input_texts.append(input_text)
        target_texts.append(target_text)
        for char in input_text:
            if char not in input_characters:
                input_characters.add(char)
        for char in target_text:
            if char not in target_characters:
                target_characters.add(char)
    input_characters.add(" ")
    target_characters.add(" ")

    input_characters = sorted(list(input_characters))
    target_characters = sorted(list(target_characters))
    num_encoder_tokens = len(input_characters)
    num_decoder_tokens = len(target_characters)
    max_encoder_seq_length = max([len(txt) for txt in input_texts])
    max_decoder_seq_length = max([len(txt) for txt in target_texts])

    input_token_index = dict([(char, i) for i, char in enumerate(input_characters)])
    target_token_index = dict([(char, i) for i, char in enumerate(target_characters)])

    encoder_input_data = np.zeros((len(input_texts), max_encoder_seq_length, num_encoder_tokens), dtype="float32")
    decoder_input_data = np.zeros((len(input_texts), max_decoder_seq_length, num_decoder_tokens), dtype="float32")
    decoder_target_data = np.zeros((len(input_texts), max_decoder_seq_length, num_decoder_tokens), dtype="float32")

    for i, (input_text, target_text) in enumerate(zip(input_texts, target_texts)):
        for t, char in enumerate(input_text):
            encoder_input_data[i, t, input_token_index[char]] = 1.0
        encoder_input_data[i, t + 1:, input_token_index[" "]] = 1.0
        for t, char in enumerate(target_text):
            decoder_input_data[i, t, target_token_index[char]] = 1.0
            if t > 0:
                decoder_target_data[i, t - 1, target_token_index[char]] = 1.0
        decoder_input_data[i, t + 1:, target_token_index[" "]] = 1.0
        decoder_target_data[i, t:, target_token_index[" "]] = 1.0

    keras.utils.set_random_seed(0)
    with strategy.scope():
        encoder_inputs = keras.Input(shape=(None, num_encoder_tokens))
        encoder = keras.layers.LSTM(latent_dim, return_state=True)
        encoder_outputs, state_h, state_c = encoder(encoder_inputs)
        encoder_states = [state_h, state_c]

        decoder_inputs = keras.Input(shape=(None, num_decoder_tokens))
        decoder_lstm = keras.layers.LSTM(latent_dim, return_sequences=True, return_state=True)
        decoder_outputs, _, _ = decoder_lstm(decoder_inputs, initial_state=encoder_states)
        decoder_dense = keras.layers.Dense(num_decoder_tokens, activation="softmax")
        decoder_outputs = decoder_dense(decoder_outputs)

        model = keras.Model([encoder_inputs, decoder_inputs], decoder_outputs)
        model.compile(optimizer="rmsprop", loss="categorical_crossentropy", metrics=["accuracy"])
    history = model.fit([encoder_input_data, decoder_input_data], decoder_target_data, batch_size=batch_size,
                        epochs=epochs, validation_split=0.2, verbose=0)
    path = os.path.join(workdir, "s2s_model.keras")
    model.save(path)

    with strategy.scope():
        model = keras.models.load_model(path)
        encoder_inputs = model.input[0]  # input_1
        encoder_outputs, state_h_enc, state_c_enc = model.layers[2].output  # lstm_1
        encoder_states = [state_h_enc, state_c_enc]
        encoder_model = keras.Model(encoder_inputs, encoder_states)

        decoder_inputs = model.input[1]  # input_2
        decoder_state_input_h = keras.Input(shape=(latent_dim,))
        decoder_state_input_c = keras.Input(shape=(latent_dim,))
        decoder_states_inputs = [decoder_state_input_h, decoder_state_input_c]
        decoder_lstm = model.layers[3]
        decoder_outputs, state_h_dec, state_c_dec = decoder_lstm(decoder_inputs, initial_state=decoder_states_inputs)
        decoder_states = [state_h_dec, state_c_dec]
        decoder_dense = model.layers[4]
        decoder_outputs = decoder_dense(decoder_outputs)
        decoder_model = keras.Model([decoder_inputs] + decoder_states_inputs, [decoder_outputs] + decoder_states)

    reverse_target_char_index = dict((i, char) for char, i in target_token_index.items())

    def decode_sequence(input_seq):
        states_value = encoder_model.predict(input_seq, verbose=0)
        target_seq = np.zeros((1, 1, num_decoder_tokens))
        target_seq[0, 0, target_token_index["\t"]] = 1.0
        stop_condition = False
        decoded_sentence = ""
        while not stop_condition:
            output_tokens, h, c = decoder_model.predict([target_seq] + states_value, verbose=0)
            sampled_token_index = np.argmax(output_tokens[0, -1, :])
            sampled_char = reverse_target_char_index[sampled_token_index]
            decoded_sentence += sampled_char
            if sampled_char == "\n" or len(decoded_sentence) > max_decoder_seq_length:
                stop_condition = True
            target_seq = np.zeros((1, 1, num_decoder_tokens))
            target_seq[0, 0, sampled_token_index] = 1.0
            states_value = [h, c]
        return decoded_sentence

    decoded = [[target_token_index[c] for c in decode_sequence(encoder_input_data[i:i + 1])] for i in range(3)]
    return {"_model": model, "history": history.history, "decoded": decoded,
            "states": encoder_model.predict(encoder_input_data[:4], verbose=0),
            "predict": model.predict([encoder_input_data[:4], decoder_input_data[:4]], verbose=0)}
