"""keras.io/examples/vision/mnist_convnet: a small convnet on (synthetic) MNIST-shaped digits.

Shrunk: 12x12 images, 96 examples, 8/16 filters, 2 epochs; Dropout rate 0 so two replicas can be
compared with one device (the layer stays in the model).
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/mnist_convnet/"


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    num_classes, input_shape = 10, (12, 12, 1)
    rng = np.random.RandomState(0)
    x_train = rng.rand(96 * scale, 12, 12).astype("float32")
    y_train = rng.randint(0, num_classes, 96 * scale)
    x_train = np.expand_dims(x_train, -1)
    y_train = keras.utils.to_categorical(y_train, num_classes)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([
            keras.Input(shape=input_shape),
            layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Flatten(),
            layers.Dropout(0.0),
            layers.Dense(num_classes, activation="softmax"),
        ])
        model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    history = model.fit(x_train, y_train, batch_size=16, epochs=2, validation_split=0.1, verbose=0)
    score = model.evaluate(x_train[:32], y_train[:32], verbose=0)
    return {"_model": model, "history": history.history, "score": score, "predict": model.predict(x_train[:8], verbose=0)}
