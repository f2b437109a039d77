"""keras.io/examples/vision/integrated_gradients, typed with ``tf.GradientTape`` -> ``md.GradientTape`` and
``tf.*`` -> ``keras.ops``: ``get_gradients`` watches the (cast) input images (``tape.watch(images)``) and takes the
gradient of the top class's score; ``get_integrated_gradients`` interpolates numpy images between a baseline and the
input, takes each one's gradient (``ops.expand_dims``, ``grad[0]``), stacks the list with ``convert_to_tensor``,
averages by the trapezoidal rule and multiplies by ``img_input - baseline`` (a numpy array minus... times a tensor);
``random_baseline_integrated_gradients`` averages runs over ``np.random.random`` baselines.

The example's pretrained Xception (and its ``preprocess_input``: ``x / 127.5 - 1``) is a small CNN trained here in
the strategy's scope. Shrunk: 12x12 RGB images of 3 classes, 96 training images, batch 16, 2 epochs, num_steps 8
(50), 2 random baselines.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/integrated_gradients/"
img_size = (12, 12, 3)


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    def preprocess_input(x):   # xception.preprocess_input
        return x / 127.5 - 1.0

    def get_gradients(img_input, top_pred_idx):
        images = ops.cast(img_input, "float32")
        with md.GradientTape() as tape:
            tape.watch(images)
            preds = model(images)
            top_class = preds[:, top_pred_idx]
        grads = tape.gradient(top_class, images)
        return grads

    def get_integrated_gradients(img_input, top_pred_idx, baseline=None, num_steps=50):
        # If baseline is not provided, start with a black image
        # having same size as the input image.
        if baseline is None:
            baseline = np.zeros(img_size).astype(np.float32)
        else:
            baseline = baseline.astype(np.float32)
        # 1. Do interpolation.
        img_input = img_input.astype(np.float32)
        interpolated_image = [
            baseline + (step / num_steps) * (img_input - baseline) for step in range(num_steps + 1)
        ]
        interpolated_image = np.array(interpolated_image).astype(np.float32)
        # 2. Preprocess the interpolated images
        interpolated_image = preprocess_input(interpolated_image)
        # 3. Get the gradients
        grads = []
        for i, img in enumerate(interpolated_image):
            img = ops.expand_dims(img, axis=0)
            grad = get_gradients(img, top_pred_idx=top_pred_idx)
            grads.append(grad[0])
        grads = ops.convert_to_tensor(grads, dtype="float32")
        # 4. Approximate the integral using the trapezoidal rule
        grads = (grads[:-1] + grads[1:]) / 2.0
        avg_grads = ops.mean(grads, axis=0)
        # 5. Calculate integrated gradients and return
        integrated_grads = (img_input - baseline) * avg_grads
        return integrated_grads

    def random_baseline_integrated_gradients(img_input, top_pred_idx, num_steps=50, num_runs=2):
        integrated_grads = []
        # 1. Get the integrated gradients for all the baselines
        for run in range(num_runs):
            baseline = np.random.random(img_size) * 255
            igrads = get_integrated_gradients(img_input=img_input, top_pred_idx=top_pred_idx,
                                              baseline=baseline, num_steps=num_steps)
            integrated_grads.append(igrads)
        # 2. Return the average integrated gradients for the image
        integrated_grads = ops.convert_to_tensor(integrated_grads)
        return ops.mean(integrated_grads, axis=0)

    rng = np.random.RandomState(0)
    n = 96 * scale
    y = rng.randint(0, 3, n)
    x = rng.rand(n, *img_size) * 128
    for k in range(3):   # each class brightens one channel
        x[y == k, :, :, k] += 100
    x = x.astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([
            layers.Input(img_size),
            layers.Conv2D(8, 3, activation="relu"),
            layers.GlobalAveragePooling2D(),
            layers.Dense(3, activation="softmax"),
        ])
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
    history = model.fit(preprocess_input(x), y, batch_size=16, epochs=2, verbose=0)
    orig_img = x[0]
    img = np.expand_dims(orig_img, axis=0)
    preds = model.predict(preprocess_input(img), verbose=0)
    top_pred_idx = int(np.argmax(preds[0]))
    grads = get_gradients(preprocess_input(img), top_pred_idx=top_pred_idx)
    igrads = random_baseline_integrated_gradients(np.copy(orig_img), top_pred_idx=top_pred_idx, num_steps=8,
                                                  num_runs=2)
    return {"_model": model, "history": history.history, "preds": preds, "grads": grads,
            "igrads": ops.convert_to_numpy(igrads)}
