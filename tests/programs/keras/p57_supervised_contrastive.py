"""keras.io/examples/vision/supervised-contrastive-learning: two stages on one strategy. Stage 1 trains an encoder
(``Normalization`` adapted to the data, ``RandomFlip``/``RandomRotation`` augmentation, a conv encoder with
``BatchNormalization`` and average pooling) under a projection head with ``SupervisedContrastiveLoss``, a
``keras.losses.Loss`` subclass overriding ``__call__`` (``keras.utils.normalize``, logits over every pair of the
batch, the n-pairs loss); stage 2 freezes the encoder (``layer.trainable = False`` for each of its layers), builds
a classifier on it and compiles that in the same scope, fits and evaluates it.

The example's ``tfa.losses.npairs_loss`` (TensorFlow Addons) is written out with ``keras.ops`` (its formula: a
softmax cross-entropy of the pair logits against the same-label rows, normalised, averaged). ResNet50V2 is a
two-block conv encoder here. The loss pairs the examples a replica sees and BatchNormalization normalises each
replica's half, so on 2 replicas stage 1 differs from one device as on TensorFlow's MirroredStrategy; the frozen
encoder must not move in stage 2 on any device count (``encoder_moved``). Shrunk: 8x8 RGB images of 4 classes, 64
training and 32 test images, batch 16, 1 epoch per stage.
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/supervised-contrastive-learning/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    num_classes, input_shape = 4, (8, 8, 3)
    learning_rate, hidden_units, projection_units, dropout_rate, temperature = 0.001, 16, 8, 0.5, 0.05

    rng = np.random.RandomState(0)
    y_train, y_test = rng.randint(0, num_classes, (64 * scale, 1)), rng.randint(0, num_classes, (32, 1))
    x_train = (rng.rand(64 * scale, *input_shape) * 60 + y_train[:, :, None, None] * 40).astype("float32")
    x_test = (rng.rand(32, *input_shape) * 60 + y_test[:, :, None, None] * 40).astype("float32")
    keras.utils.set_random_seed(0)

    with strategy.scope():
        data_augmentation = keras.Sequential([layers.Normalization(), layers.RandomFlip("horizontal"),
                                              layers.RandomRotation(0.02)])
    data_augmentation.layers[0].adapt(x_train)

    def create_encoder():
        backbone = keras.Sequential([
            layers.Conv2D(8, 3, padding="same"), layers.BatchNormalization(), layers.Activation("relu"),
            layers.Conv2D(16, 3, strides=2, padding="same"), layers.BatchNormalization(), layers.Activation("relu"),
            layers.GlobalAveragePooling2D(),
        ], name="backbone")
        inputs = keras.Input(shape=input_shape)
        augmented = data_augmentation(inputs)
        outputs = backbone(augmented)
        return keras.Model(inputs=inputs, outputs=outputs, name="cifar10-encoder")

    def create_classifier(encoder, trainable=True):
        for layer in encoder.layers:
            layer.trainable = trainable
        inputs = keras.Input(shape=input_shape)
        features = encoder(inputs)
        features = layers.Dropout(dropout_rate)(features)
        features = layers.Dense(hidden_units, activation="relu")(features)
        features = layers.Dropout(dropout_rate)(features)
        outputs = layers.Dense(num_classes, activation="softmax")(features)
        model = keras.Model(inputs=inputs, outputs=outputs, name="cifar10-classifier")
        model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                      loss=keras.losses.SparseCategoricalCrossentropy(),
                      metrics=[keras.metrics.SparseCategoricalAccuracy()])
        return model

    def npairs_loss(y_true, y_pred):
        y_true = ops.expand_dims(y_true, -1)
        y_true = ops.cast(ops.equal(y_true, ops.transpose(y_true)), y_pred.dtype)
        y_true = y_true / ops.sum(y_true, axis=1, keepdims=True)
        return ops.mean(ops.sum(-y_true * ops.log_softmax(y_pred, axis=-1), axis=-1))

    class SupervisedContrastiveLoss(keras.losses.Loss):
        def __init__(self, temperature=1, name=None):
            super().__init__(name=name)
            self.temperature = temperature

        def __call__(self, labels, feature_vectors, sample_weight=None):
            feature_vectors_normalized = keras.utils.normalize(feature_vectors, axis=1, order=2)
            logits = ops.divide(ops.matmul(feature_vectors_normalized, ops.transpose(feature_vectors_normalized)),
                                self.temperature)
            return npairs_loss(ops.squeeze(labels), logits)

    def add_projection_head(encoder):
        inputs = keras.Input(shape=input_shape)
        features = encoder(inputs)
        outputs = layers.Dense(projection_units, activation="relu")(features)
        return keras.Model(inputs=inputs, outputs=outputs, name="cifar-encoder_with_projection-head")

    with strategy.scope():
        encoder = create_encoder()
        encoder_with_projection_head = add_projection_head(encoder)
        encoder_with_projection_head.compile(optimizer=keras.optimizers.Adam(learning_rate),
                                             loss=SupervisedContrastiveLoss(temperature))
    stage1 = encoder_with_projection_head.fit(x=x_train, y=y_train, batch_size=16, epochs=1, verbose=0)
    encoder_weights = [w.copy() for w in encoder.get_weights()]
    with strategy.scope():
        classifier = create_classifier(encoder, trainable=False)
    stage2 = classifier.fit(x=x_train, y=y_train, batch_size=16, epochs=1, verbose=0)
    accuracy = classifier.evaluate(x_test, y_test, verbose=0)[1]
    moved = max(float(np.abs(a - b).max()) for a, b in zip(encoder_weights, encoder.get_weights()))
    # (copies of the trained backbone: md.keras's Normalization statistics are buffers that ``adapt`` makes outside
    # the scope, as printed, one copy read by every replica, as TensorFlow reads a variable made outside the scope)
    return {"_model": encoder.get_layer("backbone"), "stage1": stage1.history, "stage2": stage2.history, "accuracy": accuracy,
            "encoder_moved": moved, "trainable": len(classifier.trainable_weights),
            "predict": classifier.predict(x_test[:4], verbose=0)}
