"""keras.io/examples/vision/captcha_ocr: a CRNN (Conv2D/MaxPooling2D, Reshape, Dense, Dropout, two
Bidirectional LSTMs with dropout, a softmax over the characters plus the blank) whose ``CTCLayer`` takes the
labels as a second model input and ``self.add_loss``es ``ctc_batch_cost`` of each example; compiled with only an
optimizer, fit on a dict of images and labels with ``EarlyStopping(restore_best_weights=True)``; a prediction
model cut at ``dense2`` (``keras.models.Model(model.input[0], model.get_layer(name="dense2").output)``) and
greedy CTC decoding.

The example's ``ctc_batch_cost`` and ``ctc_decode`` call ``tf.compat.v1.nn.ctc_loss`` and
``tf.nn.ctc_greedy_decoder`` (TensorFlow ops; the blank is the last class, the inputs the log of the softmax);
here they are Keras 3's ``ops.ctc_loss`` (which takes that log as logits, as TensorFlow's op does) and
``ops.ctc_decode(..., mask_index=None)`` (the last class). The loss added is the sum of the batch's per-example
losses (Keras sums an ``add_loss`` tensor): each replica adds its rows' sum, scaled 1/replicas in ``fit`` as on
TensorFlow's MirroredStrategy, so 2 replicas step with half one device's gradient (Adam takes nearly the same
step). Shrunk: 32x16 images of 3 characters from 5, filters 8/16, LSTMs 16/8, 64 training and 16 validation
images, batch 16, 2 epochs; the image files and StringLookup left out (labels are ids 1..5).
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/captcha_ocr/"
IMG_WIDTH, IMG_HEIGHT, MAX_LENGTH, CHARACTERS = 32, 16, 3, 5


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    def ctc_batch_cost(y_true, y_pred, input_length, label_length):
        label_length = ops.cast(ops.squeeze(label_length, axis=-1), dtype="int32")
        input_length = ops.cast(ops.squeeze(input_length, axis=-1), dtype="int32")
        y_pred = ops.log(y_pred + keras.backend.epsilon())
        blank = ops.shape(y_pred)[-1] - 1
        return ops.expand_dims(ops.ctc_loss(y_true, y_pred, label_length, input_length, mask_index=blank), 1)

    class CTCLayer(layers.Layer):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.loss_fn = ctc_batch_cost

        def call(self, y_true, y_pred):
            batch_len = ops.cast(ops.shape(y_true)[0], dtype="int64")
            input_length = ops.cast(ops.shape(y_pred)[1], dtype="int64")
            label_length = ops.cast(ops.shape(y_true)[1], dtype="int64")
            input_length = input_length * ops.ones(shape=(batch_len, 1), dtype="int64")
            label_length = label_length * ops.ones(shape=(batch_len, 1), dtype="int64")
            loss = self.loss_fn(y_true, y_pred, input_length, label_length)
            self.add_loss(loss)
            return y_pred

    def build_model():
        input_img = layers.Input(shape=(IMG_WIDTH, IMG_HEIGHT, 1), name="image", dtype="float32")
        labels = layers.Input(name="label", shape=(None,), dtype="float32")
        x = layers.Conv2D(8, (3, 3), activation="relu", kernel_initializer="he_normal", padding="same",
                          name="Conv1")(input_img)
        x = layers.MaxPooling2D((2, 2), name="pool1")(x)
        x = layers.Conv2D(16, (3, 3), activation="relu", kernel_initializer="he_normal", padding="same",
                          name="Conv2")(x)
        x = layers.MaxPooling2D((2, 2), name="pool2")(x)
        new_shape = ((IMG_WIDTH // 4), (IMG_HEIGHT // 4) * 16)
        x = layers.Reshape(target_shape=new_shape, name="reshape")(x)
        x = layers.Dense(16, activation="relu", name="dense1")(x)
        x = layers.Dropout(0.2)(x)
        x = layers.Bidirectional(layers.LSTM(16, return_sequences=True, dropout=0.25))(x)
        x = layers.Bidirectional(layers.LSTM(8, return_sequences=True, dropout=0.25))(x)
        x = layers.Dense(CHARACTERS + 2, activation="softmax", name="dense2")(x)
        output = CTCLayer(name="ctc_loss")(labels, x)
        model = keras.models.Model(inputs=[input_img, labels], outputs=output, name="ocr_model_v1")
        model.compile(optimizer=keras.optimizers.Adam())
        return model

    def decode_batch_predictions(pred):
        input_len = np.ones(pred.shape[0]) * pred.shape[1]
        results = ops.ctc_decode(pred, sequence_lengths=input_len, strategy="greedy", mask_index=None)[0][0]
        return ops.convert_to_numpy(results)[:, :MAX_LENGTH]

    rng = np.random.RandomState(0)
    n = 80 * scale
    labels = rng.randint(1, CHARACTERS + 1, size=(n, MAX_LENGTH))
    images = rng.rand(n, IMG_WIDTH, IMG_HEIGHT, 1).astype("float32") * 0.2
    for i, text in enumerate(labels):   # character c drawn as a bright column band at its position
        for position, c in enumerate(text):
            images[i, 10 * position + c:10 * position + c + 3, :, 0] += 0.8
    train = {"image": images[:64 * scale], "label": labels[:64 * scale].astype("float32")}
    valid = {"image": images[64 * scale:], "label": labels[64 * scale:].astype("float32")}
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = build_model()
    early_stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=10, restore_best_weights=True)
    history = model.fit({"image": train["image"], "label": train["label"]}, batch_size=16,
                        validation_data=({"image": valid["image"], "label": valid["label"]},), epochs=2,
                        callbacks=[early_stopping], verbose=0)
    prediction_model = keras.models.Model(model.input[0], model.get_layer(name="dense2").output)
    preds = prediction_model.predict(valid["image"], verbose=0)
    return {"_model": model, "history": history.history, "preds": preds[:4],
            "decoded": decode_batch_predictions(preds), "ctc": ops.convert_to_numpy(
                ctc_batch_cost(valid["label"], preds, np.full((16 * scale, 1), preds.shape[1]),
                               np.full((16 * scale, 1), MAX_LENGTH)))}
