"""keras.io/examples/vision/grad_cam, typed with ``tf.GradientTape`` -> ``md.GradientTape`` and ``tf.*`` ->
``keras.ops``: after training, ``model.layers[-1].activation = None`` removes the last layer's softmax, a
``keras.models.Model(model.inputs, [model.get_layer(last_conv_layer_name).output, model.output])`` gives the last
conv layer's activations with the predictions, the tape takes the gradient of the top class's score
(``preds[:, pred_index]`` with ``pred_index = ops.argmax(preds[0])``) with respect to those activations, pooled
over batch and space, and the heatmap is the activations weighted by the pooled gradients, ``maximum(h, 0) /
max(h)``, read with ``.numpy()`` (``ops.convert_to_numpy``).

The example's pretrained Xception is a small CNN trained here (in the strategy's scope, so the Grad-CAM reads a
distributed model); its image is a made-up one. Shrunk: 16x16 RGB images of 4 classes, Conv2D(8) and
Conv2D(16) ("last_conv"), 128 training images, batch 16, 2 epochs.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/grad_cam/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    last_conv_layer_name = "last_conv"

    def make_gradcam_heatmap(img_array, model, last_conv_layer_name, pred_index=None):
        # First, we create a model that maps the input image to the activations
        # of the last conv layer as well as the output predictions
        grad_model = keras.models.Model(
            model.inputs, [model.get_layer(last_conv_layer_name).output, model.output]
        )
        # Then, we compute the gradient of the top predicted class for our input image
        # with respect to the activations of the last conv layer
        with md.GradientTape() as tape:
            last_conv_layer_output, preds = grad_model(img_array)
            if pred_index is None:
                pred_index = ops.argmax(preds[0])
            class_channel = preds[:, pred_index]
        grads = tape.gradient(class_channel, last_conv_layer_output)
        pooled_grads = ops.mean(grads, axis=(0, 1, 2))
        last_conv_layer_output = last_conv_layer_output[0]
        heatmap = last_conv_layer_output @ pooled_grads[..., None]
        heatmap = ops.squeeze(heatmap)
        heatmap = ops.maximum(heatmap, 0) / ops.max(heatmap)
        return ops.convert_to_numpy(heatmap)

    rng = np.random.RandomState(0)
    n = 128 * scale
    y = rng.randint(0, 4, n)
    x = rng.rand(n, 16, 16, 3).astype("float32")
    for k in range(4):   # each class brightens one quadrant
        rows = y == k
        x[rows, (k // 2) * 8:(k // 2) * 8 + 8, (k % 2) * 8:(k % 2) * 8 + 8] += 1.0
    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input((16, 16, 3))   # a functional model, as keras.applications' Xception
        h = layers.Conv2D(8, 3, activation="relu", padding="same")(inputs)
        h = layers.MaxPooling2D()(h)
        h = layers.Conv2D(16, 3, activation="relu", padding="same", name=last_conv_layer_name)(h)
        h = layers.GlobalAveragePooling2D()(h)
        outputs = layers.Dense(4, activation="softmax", name="predictions")(h)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    img_array = x[:1]
    preds = model.predict(img_array, verbose=0)
    # Remove last layer's softmax
    model.layers[-1].activation = None
    logits = model.predict(img_array, verbose=0)
    heatmap = make_gradcam_heatmap(img_array, model, last_conv_layer_name)
    second = make_gradcam_heatmap(x[1:2], model, last_conv_layer_name, pred_index=1)
    return {"_model": model, "history": history.history, "preds": preds, "logits": logits,
            "heatmap": heatmap, "heatmap_class1": second}
