"""tensorflow.org's tutorials/quickstart/beginner, quickstart/advanced, keras/classification and
customization/custom_training_walkthrough, typed as printed with ``tf.`` -> ``md.``.

Data: synthetic arrays of MNIST's / Fashion MNIST's / the penguins' shapes and dtypes (never
downloaded), 32 training examples so each epoch is one batch of 32 (a shuffle then only reorders
a sum). Weights are set from a fixed pattern after the model is built (``deterministic``), so both
frameworks start equal. Substitutions: ``tf.nn.softmax`` past the beginner quickstart and ``tf.nn.relu``
(torch's on md). ``print``
lines became observations; the f-strings are kept ("printed").
"""

import numpy as np

from _tf_core_common import copies_agree, deterministic, history, images, ints, relu, rnd, scope, softmax, tf


def quickstart_beginner(replicas, rate=0.2):
    """``rate``: the Dropout rate (the tutorial's 0.2; 0.0 gives numbers TF and md can both repeat)."""
    (x_train, y_train), (x_test, y_test) = images(32, 1), images(16, 2)
    x_train, x_test = x_train / 255.0, x_test / 255.0
    out = {}
    with scope(replicas):
        model = tf.keras.models.Sequential([
            tf.keras.layers.Flatten(input_shape=(28, 28)),
            tf.keras.layers.Dense(128, activation='relu'),
            tf.keras.layers.Dropout(rate),
            tf.keras.layers.Dense(10)
        ])
        deterministic(model)
    predictions = model(x_train[:1]).numpy()
    out["predictions"] = rnd(predictions)
    out["softmax"] = rnd(tf.nn.softmax(predictions).numpy())
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    out["loss"] = rnd(loss_fn(y_train[:1], predictions).numpy())
    with scope(replicas):
        model.compile(optimizer='adam', loss=loss_fn, metrics=['accuracy'])
    tf.keras.utils.set_random_seed(1)
    out["fit"] = history(model.fit(x_train, y_train, epochs=5, verbose=0))
    out["evaluate"] = rnd(model.evaluate(x_test, y_test, verbose=2))
    probability_model = tf.keras.Sequential([model, tf.keras.layers.Softmax()])
    out["probabilities"] = rnd(probability_model(x_test[:5]))
    out["copies_agree"] = copies_agree(model.trainable_variables)
    return out


def quickstart_beginner_no_dropout(replicas):
    return quickstart_beginner(replicas, rate=0.0)


def keras_classification(replicas):
    (train_images, train_labels), (test_images, test_labels) = images(32, 3), images(16, 4)
    out = {"shape": list(train_images.shape), "len": len(train_labels), "dtype": str(train_labels.dtype)}
    train_images = train_images / 255.0
    test_images = test_images / 255.0
    with scope(replicas):
        model = tf.keras.Sequential([
            tf.keras.layers.Flatten(input_shape=(28, 28)),
            tf.keras.layers.Dense(128, activation='relu'),
            tf.keras.layers.Dense(10)
        ])
        deterministic(model)
        model.compile(optimizer='adam',
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=['accuracy'])
    out["fit"] = history(model.fit(train_images, train_labels, epochs=10, verbose=0))
    test_loss, test_acc = model.evaluate(test_images, test_labels, verbose=2)
    out["evaluate"] = rnd([test_loss, test_acc])
    probability_model = tf.keras.Sequential([model, tf.keras.layers.Softmax()])
    predictions = probability_model.predict(test_images, verbose=0)
    out["predictions0"] = [rnd(predictions[0]), int(np.argmax(predictions[0])), int(test_labels[0])]
    img = test_images[1]
    img = (np.expand_dims(img, 0))
    predictions_single = probability_model.predict(img, verbose=0)
    out["single"] = [list(img.shape), rnd(predictions_single), int(np.argmax(predictions_single[0]))]
    out["copies_agree"] = copies_agree(model.trainable_variables)
    return out


def quickstart_advanced(replicas):
    """On 2 replicas: model, optimizer and metrics made in the strategy's scope, the loop as printed
    (no strategy.run: its steps run in cross-replica context, on the mirrored variables)."""
    Dense, Flatten, Conv2D = tf.keras.layers.Dense, tf.keras.layers.Flatten, tf.keras.layers.Conv2D
    Model = tf.keras.Model   # from tensorflow.keras.layers import ...; from tensorflow.keras import Model
    (x_train, y_train), (x_test, y_test) = images(32, 5), images(16, 6)
    x_train, x_test = x_train / 255.0, x_test / 255.0
    x_train = x_train[..., tf.newaxis].astype("float32")
    x_test = x_test[..., tf.newaxis].astype("float32")
    train_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(10000).batch(32)
    test_ds = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(32)

    class MyModel(Model):
        def __init__(self):
            super().__init__()
            self.conv1 = Conv2D(32, 3, activation='relu')
            self.flatten = Flatten()
            self.d1 = Dense(128, activation='relu')
            self.d2 = Dense(10)

        def call(self, x):
            x = self.conv1(x)
            x = self.flatten(x)
            x = self.d1(x)
            return self.d2(x)

    with scope(replicas):
        model = MyModel()
        model(x_train[:1])                   # not in the tutorial: build the model, then set its weights
        deterministic(model, scale=0.05)
        loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        optimizer = tf.keras.optimizers.Adam()
        train_loss = tf.keras.metrics.Mean(name='train_loss')
        train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='train_accuracy')
        test_loss = tf.keras.metrics.Mean(name='test_loss')
        test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='test_accuracy')

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            predictions = model(images, training=True)
            loss = loss_object(labels, predictions)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        train_loss(loss)
        train_accuracy(labels, predictions)

    @tf.function
    def test_step(images, labels):
        predictions = model(images, training=False)
        t_loss = loss_object(labels, predictions)
        test_loss(t_loss)
        test_accuracy(labels, predictions)

    out = {"epochs": [], "printed": []}
    EPOCHS = 3
    for epoch in range(EPOCHS):
        train_loss.reset_state()
        train_accuracy.reset_state()
        test_loss.reset_state()
        test_accuracy.reset_state()
        for images_, labels in train_ds:
            train_step(images_, labels)
        for test_images, test_labels in test_ds:
            test_step(test_images, test_labels)
        out["printed"].append(
            f'Epoch {epoch + 1}, '
            f'Loss: {train_loss.result():0.2f}, '
            f'Accuracy: {train_accuracy.result() * 100:0.2f}, '
            f'Test Loss: {test_loss.result():0.2f}, '
            f'Test Accuracy: {test_accuracy.result() * 100:0.2f}'
        )
        out["epochs"].append(rnd([train_loss.result(), train_accuracy.result() * 100,
                                  test_loss.result(), test_accuracy.result() * 100], 4))
    out["copies_agree"] = copies_agree(model.trainable_variables)
    return out


def _penguins(n, seed):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 3, size=n).astype("int64")
    features = (rng.rand(n, 4) * 0.5 + labels[:, None] * np.array([0.2, -0.1, 0.15, 0.1])).astype("float32")
    return tf.data.Dataset.from_tensor_slices((features, labels))


def custom_training_walkthrough(replicas):
    """On 2 replicas: model and optimizer made in the strategy's scope, the loop as printed."""
    out = {}
    class_names = ['Adélie', 'Chinstrap', 'Gentoo']
    ds_test, ds_train = _penguins(12, 7), _penguins(40, 8)   # tfds.load("penguins/processed", ...)
    ds_train_batch = ds_train.batch(32)
    features, labels = next(iter(ds_train_batch))
    with scope(replicas):
        model = tf.keras.Sequential([
            tf.keras.layers.Dense(10, activation=relu, input_shape=(4,)),  # input shape required
            tf.keras.layers.Dense(10, activation=relu),
            tf.keras.layers.Dense(3)
        ])
        deterministic(model, scale=0.5)
    predictions = model(features)
    out["predictions"] = [rnd(predictions[:5]), rnd(softmax(predictions[:5])),
                          ints(tf.math.argmax(predictions, axis=1))]
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loss(model, x, y, training):
        y_ = model(x, training=training)
        return loss_object(y_true=y, y_pred=y_)

    l = loss(model, features, labels, training=False)
    out["loss_test"] = "Loss test: {}".format(l).startswith("Loss test: ")

    def grad(model, inputs, targets):
        with tf.GradientTape() as tape:
            loss_value = loss(model, inputs, targets, training=True)
        return loss_value, tape.gradient(loss_value, model.trainable_variables)

    with scope(replicas):
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.01)
    loss_value, grads = grad(model, features, labels)
    out["step0"] = [int(optimizer.iterations.numpy()), rnd(loss_value.numpy())]
    out["printed"] = ["Step: {}, Initial Loss: {}".format(optimizer.iterations.numpy(), loss_value.numpy())]
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    out["step1"] = [int(optimizer.iterations.numpy()), rnd(loss(model, features, labels, training=True).numpy())]
    train_loss_results, train_accuracy_results = [], []
    num_epochs = 3
    for epoch in range(num_epochs):
        epoch_loss_avg = tf.keras.metrics.Mean()
        epoch_accuracy = tf.keras.metrics.SparseCategoricalAccuracy()
        for x, y in ds_train_batch:
            loss_value, grads = grad(model, x, y)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            epoch_loss_avg.update_state(loss_value)
            epoch_accuracy.update_state(y, model(x, training=True))
        train_loss_results.append(epoch_loss_avg.result())
        train_accuracy_results.append(epoch_accuracy.result())
        if epoch % 50 == 0:
            out["printed"].append("Epoch {:03d}: Loss: {:.3f}, Accuracy: {:.3%}".format(
                epoch, epoch_loss_avg.result(), epoch_accuracy.result()))
    out["copies_agree"] = copies_agree(model.trainable_variables)
    out["results"] = [rnd(train_loss_results), rnd(train_accuracy_results), int(optimizer.iterations.numpy())]
    test_accuracy = tf.keras.metrics.Accuracy()
    ds_test_batch = ds_test.batch(10)
    for (x, y) in ds_test_batch:
        logits = model(x, training=False)
        prediction = tf.math.argmax(logits, axis=1, output_type=tf.int64)
        test_accuracy(prediction, y)
    out["test_accuracy"] = rnd(test_accuracy.result())
    out["stacked"] = ints(tf.stack([y, prediction], axis=1))
    predict_dataset = tf.convert_to_tensor([
        [0.3, 0.8, 0.4, 0.5, ],
        [0.4, 0.1, 0.8, 0.5, ],
        [0.7, 0.9, 0.8, 0.4]
    ])
    predictions = model(predict_dataset, training=False)
    out["examples"] = []
    for i, logits in enumerate(predictions):
        class_idx = tf.math.argmax(logits).numpy()
        p = softmax(logits)[class_idx]
        name = class_names[class_idx]
        out["examples"].append([name, rnd(100 * p, 3)])
        out["printed"].append("Example {} prediction: {} ({:4.1f}%)".format(i, name, 100 * p))
    return out


PROGRAMS = []
REPLICATED = [quickstart_beginner, quickstart_beginner_no_dropout, keras_classification, quickstart_advanced,
              custom_training_walkthrough]
