"""keras.io/examples/vision/oxford_pets_image_segmentation as printed (the Keras 3 version): an Xception-style U-Net
(``Conv2D(strides=2)``, ``SeparableConv2D`` + ``BatchNormalization`` blocks, ``MaxPooling2D(3, strides=2,
padding="same")``, residuals projected by a strided 1x1 ``Conv2D`` and joined with ``layers.add([x, residual])``,
then ``Conv2DTranspose`` blocks with ``UpSampling2D(2)`` on both paths), a per-pixel softmax over 3 classes,
``loss="sparse_categorical_crossentropy"`` against ``(H, W, 1)`` uint8 masks (``target_img -= 1``: trimap 1..3 ->
0..2), ``Adam(1e-4)``, a ``ModelCheckpoint("oxford_segmentation.keras", save_best_only=True)``, ``predict`` of the
validation dataset and the argmax mask of one prediction.

The Oxford pets are made up: 16x16 RGB images (160x160) of a bright disc on a dim background and its trimap (1 inside,
2 outside, 3 on the rim). The loader's ``decode_jpeg``/``resize``/``convert_image_dtype`` become a dataset ``map`` of
``/ 255`` and ``- 1``. Shrunk: filters [8, 16] down, [16, 8, 4] up (32 / [64, 128, 256] / [256, 128, 64, 32]),
batch 8 (32), 2 epochs (50), 48 training and 16 validation images (6680 / 1000).
"""

import os

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/oxford_pets_image_segmentation/"
img_size, num_classes, batch_size, epochs = (16, 16), 3, 8, 2
NORMALIZATION = "BatchNormalization"   # "Identity": the check that the rest equals one device


def pets(rng, n):
    yy, xx = np.mgrid[0:img_size[0], 0:img_size[1]]
    images, masks = [], []
    for _ in range(n):
        cy, cx, r = rng.uniform(5, 11), rng.uniform(5, 11), rng.uniform(3, 6)
        d = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2)
        trimap = np.where(d < r - 1, 1, np.where(d > r + 1, 2, 3)).astype("uint8")
        colour = rng.uniform(150, 255, 3)
        img = np.where((d < r)[..., None], colour, 60) + rng.normal(0, 20, (*img_size, 3))
        images.append(np.clip(img, 0, 255).astype("uint8"))
        masks.append(trimap[..., None])
    return np.asarray(images), np.asarray(masks)


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    norm = getattr(layers, NORMALIZATION)
    rng = np.random.RandomState(0)
    train_img, train_mask = pets(rng, 48 * scale)
    val_img, val_mask = pets(rng, 16)

    def load_img_masks(input_img, target_img):
        input_img = md.cast(input_img, "float32") / 255.0
        target_img = target_img - 1
        return input_img, target_img

    def get_dataset(batch_size, img_size, input_imgs, target_imgs, max_dataset_len=None):
        dataset = md.data.Dataset.from_tensor_slices((input_imgs, target_imgs))
        dataset = dataset.map(load_img_masks)
        return dataset.batch(batch_size)

    def get_model(img_size, num_classes):
        inputs = keras.Input(shape=img_size + (3,))
        x = layers.Conv2D(4, 3, strides=2, padding="same")(inputs)
        x = norm()(x)
        x = layers.Activation("relu")(x)
        previous_block_activation = x
        for filters in [8, 16]:
            x = layers.Activation("relu")(x)
            x = layers.SeparableConv2D(filters, 3, padding="same")(x)
            x = norm()(x)
            x = layers.Activation("relu")(x)
            x = layers.SeparableConv2D(filters, 3, padding="same")(x)
            x = norm()(x)
            x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
            residual = layers.Conv2D(filters, 1, strides=2, padding="same")(previous_block_activation)
            x = layers.add([x, residual])
            previous_block_activation = x
        for filters in [16, 8, 4]:
            x = layers.Activation("relu")(x)
            x = layers.Conv2DTranspose(filters, 3, padding="same")(x)
            x = norm()(x)
            x = layers.Activation("relu")(x)
            x = layers.Conv2DTranspose(filters, 3, padding="same")(x)
            x = norm()(x)
            x = layers.UpSampling2D(2)(x)
            residual = layers.UpSampling2D(2)(previous_block_activation)
            residual = layers.Conv2D(filters, 1, padding="same")(residual)
            x = layers.add([x, residual])
            previous_block_activation = x
        outputs = layers.Conv2D(num_classes, 3, activation="softmax", padding="same")(x)
        return keras.Model(inputs, outputs)

    keras.utils.set_random_seed(0)
    train_dataset = get_dataset(batch_size, img_size, train_img, train_mask)
    valid_dataset = get_dataset(batch_size, img_size, val_img, val_mask)
    with strategy.scope():
        model = get_model(img_size, num_classes)
        model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="sparse_categorical_crossentropy")
    callbacks = [keras.callbacks.ModelCheckpoint(os.path.join(workdir, "oxford_segmentation.keras"),
                                                 save_best_only=True)]
    history = model.fit(train_dataset, epochs=epochs, validation_data=valid_dataset, callbacks=callbacks, verbose=0)
    val_preds = model.predict(valid_dataset, verbose=0)
    mask = np.argmax(val_preds[2], axis=-1)
    mask = np.expand_dims(mask, axis=-1)
    best = keras.models.load_model(os.path.join(workdir, "oxford_segmentation.keras"))
    return {"_model": model, "history": history.history, "val_preds": val_preds, "mask": mask,
            "best_preds": best.predict(valid_dataset, verbose=0)}
