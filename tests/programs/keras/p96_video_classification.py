"""keras.io/examples/vision/video_classification as printed (the sequence model): a functional model of two inputs,
frame features and a boolean ``mask_input = keras.Input((MAX_SEQ_LENGTH,), dtype="bool")`` handed to
``GRU(16, return_sequences=True)(frame_features_input, mask=mask_input)``, a second ``GRU``, ``Dropout(0.4)``,
softmax; compiled inside ``get_sequence_model`` with string loss/optimizer/metric; ``fit([features, masks], labels,
validation_split=0.3, callbacks=[ModelCheckpoint(filepath .weights.h5, save_weights_only=True,
save_best_only=True)])``, ``load_weights`` of the best epoch, ``evaluate``, and ``predict([features, mask])[0]`` of one
video. Labels are ``(N, 1)`` ids, as ``label_processor(...)[..., None]`` gives.

UCF101 features are made up (InceptionV3's 2048 per frame, here 16): 5 classes, 40 training and 10 test videos of
2..6 frames (masked after their length). Shrunk: MAX_SEQ_LENGTH 6 (20), 3 epochs (10).
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/vision/video_classification/"
MAX_SEQ_LENGTH, NUM_FEATURES, EPOCHS, NUM_CLASSES = 6, 16, 3, 5


def videos(rng, n):
    labels = rng.randint(0, NUM_CLASSES, n)
    centres = np.random.RandomState(42).normal(0, 1, (NUM_CLASSES, NUM_FEATURES))
    frame_features = np.zeros((n, MAX_SEQ_LENGTH, NUM_FEATURES), dtype="float32")
    frame_masks = np.zeros((n, MAX_SEQ_LENGTH), dtype="bool")
    for idx in range(n):
        length = rng.randint(2, MAX_SEQ_LENGTH + 1)
        frame_features[idx, :length] = centres[labels[idx]] + rng.normal(0, 1, (length, NUM_FEATURES))
        frame_masks[idx, :length] = 1
    return (frame_features, frame_masks), labels[..., None].astype("int64")


def run(keras, strategy, workdir, scale=1):
    rng = np.random.RandomState(0)
    train_data, train_labels = videos(rng, 40 * scale)
    test_data, test_labels = videos(rng, 10)

    def get_sequence_model():
        frame_features_input = keras.Input((MAX_SEQ_LENGTH, NUM_FEATURES))
        mask_input = keras.Input((MAX_SEQ_LENGTH,), dtype="bool")
        x = keras.layers.GRU(16, return_sequences=True)(frame_features_input, mask=mask_input)
        x = keras.layers.GRU(8)(x)
        x = keras.layers.Dropout(0.4)(x)
        x = keras.layers.Dense(8, activation="relu")(x)
        output = keras.layers.Dense(NUM_CLASSES, activation="softmax")(x)
        rnn_model = keras.Model([frame_features_input, mask_input], output)
        rnn_model.compile(loss="sparse_categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
        return rnn_model

    def run_experiment():
        filepath = os.path.join(workdir, "video_classifier", "ckpt.weights.h5")
        os.makedirs(os.path.dirname(filepath), exist_ok=True)
        checkpoint = keras.callbacks.ModelCheckpoint(filepath, save_weights_only=True, save_best_only=True,
                                                     verbose=0)
        with strategy.scope():
            seq_model = get_sequence_model()
        history = seq_model.fit([train_data[0], train_data[1]], train_labels, validation_split=0.3, epochs=EPOCHS,
                                callbacks=[checkpoint], verbose=0)
        seq_model.load_weights(filepath)
        _, accuracy = seq_model.evaluate([test_data[0], test_data[1]], test_labels, verbose=0)
        return history, accuracy, seq_model

    keras.utils.set_random_seed(0)
    history, accuracy, sequence_model = run_experiment()
    probabilities = sequence_model.predict([test_data[0][:1], test_data[1][:1]], verbose=0)[0]
    return {"_model": sequence_model, "history": history.history, "accuracy": accuracy,
            "probabilities": probabilities, "ranking": np.argsort(probabilities)[::-1].copy()}
