"""keras.io/examples/vision/image_classification_efficientnet_fine_tuning: a pretrained convolutional base
built on the model's ``input_tensor`` (its layers are the outer model's), frozen (``model.trainable =
False``) under a new top (``GlobalAveragePooling2D``, ``Dropout(0.2)``, softmax ``Dense``) trained with
Adam, then ``unfreeze_model``: the top 20 layers made trainable again *except* the BatchNormalization
layers (``if not isinstance(layer, layers.BatchNormalization): layer.trainable = True``), recompiled and
trained on. A frozen BatchNormalization runs in inference mode (its moving statistics, unchanged), so,
unlike a training one (p04, p15), it normalises every replica's half with the same numbers.

Shrunk: ``EfficientNetB0(include_top=False, input_tensor=inputs, weights="imagenet")`` replaced by a small
stem/depthwise/top-conv base of the same layer kinds (Conv2D, BatchNormalization, swish, DepthwiseConv2D)
whose "pretrained" weights and moving statistics are set from a seeded generator (nothing downloaded);
16x16x3 images, 4 classes, 48 examples, 1 epoch of batch 16 per phase; keras.io's top BatchNormalization
left out (a trainable one normalises each replica's half by its own moments: p04 and p15 show it);
learning rates 1e-2 then 1e-3 (keras.io: 1e-5, too small to move a 1-epoch run).
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/image_classification_efficientnet_fine_tuning/"
NUM_CLASSES = 4


def pretrained_base(keras, inputs):
    """Stands in for EfficientNetB0(include_top=False, input_tensor=inputs, weights="imagenet")."""
    layers = keras.layers
    x = layers.Conv2D(8, 3, strides=2, padding="same", use_bias=False, name="stem_conv")(inputs)
    x = layers.BatchNormalization(name="stem_bn")(x)
    x = layers.Activation("swish", name="stem_activation")(x)
    x = layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="block1a_dwconv")(x)
    x = layers.BatchNormalization(name="block1a_bn")(x)
    x = layers.Activation("swish", name="block1a_activation")(x)
    x = layers.Conv2D(16, 1, padding="same", use_bias=False, name="top_conv")(x)
    x = layers.BatchNormalization(name="top_bn")(x)
    x = layers.Activation("swish", name="top_activation")(x)
    base = keras.Model(inputs, x, name="efficientnet_like")
    rng = np.random.RandomState(1)   # the "imagenet" weights: seeded, moving variances positive
    base.set_weights([rng.uniform(0.5, 1.5, w.shape) if "variance" in w.name else rng.normal(0, 0.3, w.shape)
                      for w in base.weights])
    return base


def build_model(keras, num_classes):
    layers = keras.layers
    inputs = layers.Input(shape=(16, 16, 3))
    model = pretrained_base(keras, inputs)
    model.trainable = False   # freeze the pretrained weights
    x = layers.GlobalAveragePooling2D(name="avg_pool")(model.output)
    x = layers.Dropout(0.2, name="top_dropout")(x)
    outputs = layers.Dense(num_classes, activation="softmax", name="pred")(x)
    model = keras.Model(inputs, outputs, name="EfficientNet")
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-2), loss="categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def unfreeze_model(keras, model):
    for layer in model.layers[-20:]:   # the top 20 layers, BatchNorm layers left frozen
        if not isinstance(layer, keras.layers.BatchNormalization):
            layer.trainable = True
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3), loss="categorical_crossentropy",
                  metrics=["accuracy"])


def run(keras, strategy, workdir, scale=1):
    rng = np.random.RandomState(0)
    x = rng.rand(48 * scale, 16, 16, 3).astype("float32")
    y = keras.utils.to_categorical(rng.randint(0, NUM_CLASSES, 48 * scale), NUM_CLASSES)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = build_model(keras, NUM_CLASSES)
    frozen = model.fit(x, y, epochs=1, batch_size=16, validation_data=(x[:16], y[:16]), verbose=0)
    trainable_frozen = len(model.trainable_weights)
    with strategy.scope():
        unfreeze_model(keras, model)
    tuned = model.fit(x, y, epochs=1, batch_size=16, validation_data=(x[:16], y[:16]), verbose=0)
    bn = model.get_layer("top_bn")
    return {"_model": model, "frozen_history": frozen.history, "tuned_history": tuned.history,
            "trainable_weights": [trainable_frozen, len(model.trainable_weights)],
            "top_bn_moving_mean": np.asarray(bn.moving_mean), "top_conv": np.asarray(model.get_layer("top_conv").kernel),
            "predict": model.predict(x[:4], verbose=0)}
