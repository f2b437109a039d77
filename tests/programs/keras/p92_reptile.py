"""keras.io/examples/vision/reptile as printed (``tf.GradientTape`` -> ``md.GradientTape``, ``tf.argmax`` ->
``np.argmax(..., axis=0)``, tf's default axis): a functional conv net (``Conv2D`` + ``BatchNormalization`` +
``ReLU`` blocks, ``Dense(classes, activation="softmax")``), ``model.compile()`` with no arguments, one
``keras.optimizers.SGD`` used in a Python loop OUTSIDE ``strategy.run`` (cross-replica context): each meta
iteration saves ``old_vars = model.get_weights()``, takes inner SGD steps on a mini dataset of a few classes
(``model(images)``, the per-example ``sparse_categorical_crossentropy`` vector handed to the tape), then
``model.set_weights`` of the numpy interpolation ``old + (new - old) * cur_meta_step_size``; the evaluation trains
on a few shots, ``model.predict(test_images)`` and ``model.set_weights(old_vars)`` back. Here the model is built in
the strategy's scope (the brief's variant: the replicas' copies must all follow set_weights and the optimizer).

Omniglot is made up: 10 classes of 12x12 grey images (28x28, 1623 classes), 20 per class. Shrunk: 4 meta iterations
(2000), 2 inner iterations (4), 2 eval iterations (5), 3 classes (5), 16 filters (64), batch 6 (25).
"""

import random

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/reptile/"
learning_rate, meta_step_size, inner_batch_size, eval_batch_size = 0.003, 0.25, 6, 6
meta_iters, eval_iters, inner_iters, eval_interval = 4, 2, 2, 1
train_shots, shots, classes, image_size, num_classes = 4, 2, 3, 12, 10


class Dataset:
    def __init__(self, rng, n_per_class):
        self.data = {}
        for label in range(num_classes):
            pattern = rng.uniform(0, 1, (image_size, image_size, 1))
            self.data[label] = [(pattern + rng.normal(0, 0.3, pattern.shape)).astype("float32")
                                for _ in range(n_per_class)]
        self.labels = list(self.data.keys())

    def get_mini_dataset(self, batch_size, repetitions, shots, num_classes, split=False):
        temp_labels = np.zeros(shape=(num_classes * shots))
        temp_images = np.zeros(shape=(num_classes * shots, image_size, image_size, 1))
        if split:
            test_labels = np.zeros(shape=(num_classes))
            test_images = np.zeros(shape=(num_classes, image_size, image_size, 1))
        label_subset = random.choices(self.labels, k=num_classes)
        for class_idx, class_obj in enumerate(label_subset):
            temp_labels[class_idx * shots: (class_idx + 1) * shots] = class_idx
            if split:
                test_labels[class_idx] = class_idx
                images_to_split = random.choices(self.data[label_subset[class_idx]], k=shots + 1)
                test_images[class_idx] = images_to_split[-1]
                temp_images[class_idx * shots: (class_idx + 1) * shots] = images_to_split[:-1]
            else:
                temp_images[class_idx * shots: (class_idx + 1) * shots] = random.choices(
                    self.data[label_subset[class_idx]], k=shots)
        dataset = md.data.Dataset.from_tensor_slices(
            (temp_images.astype(np.float32), temp_labels.astype(np.int32)))
        dataset = dataset.shuffle(100, seed=0).batch(batch_size).repeat(repetitions)
        if split:
            return dataset, test_images, test_labels
        return dataset


def copies_spread(model):
    """The largest difference between a weight's replica copies (0 on one device): they must stay equal."""
    return copies_spread_of(model.weights)


def copies_spread_of(weights):
    spread = 0.0
    for weight in weights:
        values = getattr(getattr(weight, "_value", weight), "values", None)
        if isinstance(values, (list, tuple)) and len(values) > 1:
            arrays = [np.asarray(v.detach().cpu() if hasattr(v, "detach") else v, "float64") for v in values]
            spread = max([spread] + [float(np.abs(a - arrays[0]).max()) for a in arrays[1:]])
    return spread


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    rng = np.random.RandomState(0)
    random.seed(0)
    train_dataset, test_dataset = Dataset(rng, 20), Dataset(rng, 20)

    def conv_bn(x):
        x = layers.Conv2D(filters=16, kernel_size=3, strides=2, padding="same")(x)
        x = layers.BatchNormalization()(x)
        return layers.ReLU()(x)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = layers.Input(shape=(image_size, image_size, 1))
        x = conv_bn(inputs)
        x = conv_bn(x)
        x = conv_bn(x)
        x = layers.Flatten()(x)
        outputs = layers.Dense(classes, activation="softmax")(x)
        model = keras.Model(inputs=inputs, outputs=outputs)
        model.compile()
        optimizer = keras.optimizers.SGD(learning_rate=learning_rate)

    training, testing, losses = [], [], []
    for meta_iter in range(meta_iters * scale):
        frac_done = meta_iter / meta_iters
        cur_meta_step_size = (1 - frac_done) * meta_step_size
        old_vars = model.get_weights()
        mini_dataset = train_dataset.get_mini_dataset(inner_batch_size, inner_iters, train_shots, classes)
        for images, labels in mini_dataset:
            with md.GradientTape() as tape:
                preds = model(images)
                loss = keras.losses.sparse_categorical_crossentropy(labels, preds)
            grads = tape.gradient(loss, model.trainable_weights)
            optimizer.apply_gradients(zip(grads, model.trainable_weights))
            losses.append(float(keras.ops.convert_to_numpy(keras.ops.mean(loss))))
        new_vars = model.get_weights()
        for var in range(len(new_vars)):
            new_vars[var] = old_vars[var] + ((new_vars[var] - old_vars[var]) * cur_meta_step_size)
        model.set_weights(new_vars)
        if meta_iter % eval_interval == 0:
            accuracies = []
            for dataset in (train_dataset, test_dataset):
                train_set, test_images, test_labels = dataset.get_mini_dataset(
                    eval_batch_size, eval_iters, shots, classes, split=True)
                old_vars = model.get_weights()
                for images, labels in train_set:
                    with md.GradientTape() as tape:
                        preds = model(images)
                        loss = keras.losses.sparse_categorical_crossentropy(labels, preds)
                    grads = tape.gradient(loss, model.trainable_weights)
                    optimizer.apply_gradients(zip(grads, model.trainable_weights))
                test_preds = model.predict(test_images, verbose=0)
                test_preds = np.argmax(np.asarray(test_preds), axis=0)
                num_correct = (test_preds == test_labels).sum()
                model.set_weights(old_vars)
                accuracies.append(num_correct / classes)
            training.append(accuracies[0])
            testing.append(accuracies[1])
    sample = train_dataset.data[0][0][None]
    return {"_model": model, "losses": losses, "training": training, "testing": testing,
            "weights": {str(i): np.asarray(w) for i, w in enumerate(model.get_weights())},
            "copies_spread": copies_spread(model),
            "predict": model.predict(sample, verbose=0), "call": keras.ops.convert_to_numpy(model(sample))}
