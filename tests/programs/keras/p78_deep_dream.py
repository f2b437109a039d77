"""keras.io/examples/generative/deep_dream, typed with ``tf.GradientTape`` -> ``md.GradientTape``,
``@tf.function`` -> ``@md.function`` and ``tf.*`` -> ``keras.ops``: a feature extractor
``keras.Model(inputs=model.inputs, outputs=outputs_dict)`` whose outputs are a dict of named layers' outputs; a
loss adding ``coeff * sum(square(activation[:, 2:-2, 2:-2, :])) / scaling`` per layer into ``ops.zeros(())`` with
``+=``; a compiled gradient-ascent step that watches the image, normalises the gradient by its mean absolute value
and returns ``img += learning_rate * grads``; a loop of octaves that resizes the image
(``ops.image.resize``), ascends, and re-injects the detail lost by shrinking.

The example's pretrained InceptionV3 is a small CNN trained here in the strategy's scope (so the dream reads a
distributed model); its image is made up. Shrunk: 24x24 RGB images, 3 octaves of scale 1.4, 5 iterations
(20), max_loss 15.0, layers conv1/conv2 (mixed4..mixed7), 64 training images, 1 epoch.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/generative/deep_dream/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    step = 0.01  # Gradient ascent step size
    num_octave = 3  # Number of scales at which to run gradient ascent
    octave_scale = 1.4  # Size ratio between scales
    iterations = 5  # Number of ascent steps per scale
    max_loss = 15.0
    layer_settings = {"conv1": 1.0, "conv2": 1.5}

    rng = np.random.RandomState(0)
    x = rng.rand(64 * scale, 24, 24, 3).astype("float32") * 2 - 1
    y = (x[:, :12].mean(axis=(1, 2, 3)) > x[:, 12:].mean(axis=(1, 2, 3))).astype("int64")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([
            layers.Input((None, None, 3)),
            layers.Conv2D(8, 3, activation="relu", name="conv1"),
            layers.Conv2D(8, 3, activation="relu", name="conv2"),
            layers.GlobalAveragePooling2D(),
            layers.Dense(2),
        ])
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, batch_size=16, epochs=1, verbose=0)

    # Get the symbolic outputs of each "key" layer (we gave them unique names).
    outputs_dict = dict([(layer.name, layer.output)
                         for layer in [model.get_layer(name) for name in layer_settings.keys()]])
    # Set up a model that returns the activation values for every target layer
    # (as a dict)
    feature_extractor = keras.Model(inputs=model.inputs, outputs=outputs_dict)

    def compute_loss(input_image):
        features = feature_extractor(input_image)
        # Initialize the loss
        loss = ops.zeros(shape=())
        for name in features.keys():
            coeff = layer_settings[name]
            activation = features[name]
            # We avoid border artifacts by only involving non-border pixels in the loss.
            scaling = ops.prod(ops.cast(ops.shape(activation), "float32"))
            loss += coeff * ops.sum(ops.square(activation[:, 2:-2, 2:-2, :])) / scaling
        return loss

    @md.function
    def gradient_ascent_step(img, learning_rate):
        with md.GradientTape() as tape:
            tape.watch(img)
            loss = compute_loss(img)
        # Compute gradients.
        grads = tape.gradient(loss, img)
        # Normalize gradients.
        grads /= ops.maximum(ops.mean(ops.abs(grads)), 1e-6)
        img += learning_rate * grads
        return loss, img

    def gradient_ascent_loop(img, iterations, learning_rate, max_loss=None):
        losses = []
        for i in range(iterations):
            loss, img = gradient_ascent_step(img, learning_rate)
            losses.append(float(loss))
            if max_loss is not None and loss > max_loss:
                break
        return img, losses

    original_img = ops.convert_to_tensor(x[:1])
    original_shape = original_img.shape[1:3]
    successive_shapes = [original_shape]
    for i in range(1, num_octave):
        shape = tuple([int(dim / (octave_scale**i)) for dim in original_shape])
        successive_shapes.append(shape)
    successive_shapes = successive_shapes[::-1]
    shrunk_original_img = ops.image.resize(original_img, successive_shapes[0])

    img = ops.copy(original_img)
    all_losses = []
    for i, shape in enumerate(successive_shapes):
        img = ops.image.resize(img, shape)
        img, losses = gradient_ascent_loop(img, iterations=iterations, learning_rate=step, max_loss=max_loss)
        all_losses += losses
        upscaled_shrunk_original_img = ops.image.resize(shrunk_original_img, shape)
        same_size_original = ops.image.resize(original_img, shape)
        lost_detail = same_size_original - upscaled_shrunk_original_img
        img += lost_detail
        shrunk_original_img = ops.image.resize(original_img, shape)
    return {"_model": model, "history": history.history, "losses": all_losses,
            "dream": ops.convert_to_numpy(img)}
