"""``md.keras.utils.image_dataset_from_directory``, ``load_img`` and ``img_to_array`` as tf.keras's
(images/classification tutorial): the same seeded training/validation split and file order, float32
images resized as ``tf.image.resize`` does, int32 labels, and errors naming the valid choices.
TensorFlow's numbers below were observed with tensorflow-cpu 2.21 (tf_keras).
"""

import os

import numpy as np
import pytest

import multidev as md

Image = pytest.importorskip("PIL.Image")


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory):
    """3 classes (made in the order b, a, c) of 4 PNGs of 6x5 pixels, and a text file that is skipped."""
    root = tmp_path_factory.mktemp("images") / "d"
    for c in ["b", "a", "c"]:
        os.makedirs(root / c)
        for i in range(4):
            Image.fromarray(np.full((6, 5, 3), 10 * i + 50 * ord(c) % 200, "uint8")).save(root / c / f"{i}.png")
    (root / "a" / "notes.txt").write_text("x")
    return str(root)


def _names(paths, root):
    return [os.path.relpath(p, root) for p in paths]


def test_split_order_and_batches_are_tf_keras_ones(image_dir):
    train, val = md.keras.utils.image_dataset_from_directory(image_dir, validation_split=0.25, subset="both",
                                                             seed=123, image_size=(6, 5), batch_size=4)
    assert train.class_names == ["a", "b", "c"]
    assert _names(train.file_paths, image_dir) == ['b/1.png', 'a/0.png', 'b/0.png', 'c/1.png', 'c/0.png', 'b/3.png',
                                                   'c/2.png', 'a/3.png', 'a/1.png']   # TF's
    assert _names(val.file_paths, image_dir) == ['b/2.png', 'c/3.png', 'a/2.png']
    (x, y), = list(val)
    assert tuple(x.shape) == (3, 6, 5, 3) and str(x.dtype) == "torch.float32" and str(y.dtype) == "torch.int32"
    assert y.tolist() == [1, 2, 0] and float(x[0, 0, 0, 0]) == 120.0
    for _ in range(2):   # the training set is reshuffled per epoch and still holds every file once
        assert sorted(int(v) for _, y in train for v in y) == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_resize_is_tf_image_resize(image_dir):
    from multidev.keras.utils.image_dataset import _center_crop, _resize
    x = (np.arange(5 * 7 * 3) % 251).reshape(5, 7, 3).astype("float32") * 1.7
    tf_bilinear = [[13.8125, 22.7375, 31.6625, 40.5875], [73.3125, 82.2375, 91.1625, 100.0875],
                   [132.8125, 141.7375, 150.6625, 159.5875]]
    tf_nearest = [[0.0, 10.2, 20.4, 30.6], [71.4, 81.6, 91.8, 102.0], [142.8, 153.0, 163.2, 173.4]]
    np.testing.assert_allclose(_resize(x, (3, 4), "bilinear")[..., 0], tf_bilinear, rtol=1e-6)
    np.testing.assert_allclose(_resize(x, (3, 4), "nearest")[..., 0], tf_nearest, rtol=1e-6)
    np.testing.assert_allclose(_resize(x, (8, 9), "bilinear")[..., 1].sum(), 6364.8, rtol=1e-6)
    # crop_to_aspect_ratio=True: tf_keras's smart_resize (the centred crop, then the resize)
    np.testing.assert_allclose(_resize(_center_crop(x, 2, 5), (2, 5), "bilinear")[..., 0],
                               [[36.72, 43.86, 51.0, 58.14, 65.28], [72.42, 79.56, 86.7, 93.84, 100.98]], rtol=1e-6)
    np.testing.assert_allclose(_resize(_center_crop(x, 4, 2), (4, 2), "bilinear")[..., 2],
                               [[18.0625, 23.1625], [62.6875, 67.7875], [107.3125, 112.4125], [151.9375, 157.0375]],
                               rtol=1e-6)
    ds = md.keras.utils.image_dataset_from_directory(image_dir, image_size=(3, 2), batch_size=None, shuffle=False,
                                                     label_mode="categorical", color_mode="grayscale")
    x, y = next(iter(ds))
    assert tuple(x.shape) == (3, 2, 1) and y.tolist() == [1.0, 0.0, 0.0]
    cropped = md.keras.utils.image_dataset_from_directory(image_dir, image_size=(2, 4), crop_to_aspect_ratio=True,
                                                          verbose=False)
    assert tuple(next(iter(cropped))[0].shape) == (12, 2, 4, 3)


def test_labels_none_jpeg_and_a_strategy_fit(image_dir, tmp_path):
    Image.fromarray(np.full((8, 8, 3), 200, "uint8")).save(tmp_path / "one.jpg")
    ds = md.keras.utils.image_dataset_from_directory(str(tmp_path), labels=None, image_size=(4, 4), verbose=False)
    (x,) = [b for b in ds]
    assert tuple(x.shape) == (1, 4, 4, 3) and abs(float(x.mean()) - 200) < 3
    train = md.keras.utils.image_dataset_from_directory(image_dir, image_size=(6, 5), batch_size=6, seed=1)
    model = md.keras.Sequential([md.keras.layers.Rescaling(1. / 255, input_shape=(6, 5, 3)),
                                 md.keras.layers.Flatten(), md.keras.layers.Dense(3)])
    model.compile("adam", md.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert len(model.fit(train.cache().shuffle(1000).prefetch(md.data.AUTOTUNE), epochs=2, verbose=0)
               .history["loss"]) == 2


def test_bad_arguments_say_what_is_valid(image_dir, tmp_path):
    cases = [({"color_mode": "cmyk"}, "color_mode"), ({"interpolation": "bicubic"}, "interpolation"),
             ({"label_mode": "sparse"}, "label_mode"), ({"validation_split": 0.2}, "subset"),
             ({"image_size": (4,)}, "image_size")]
    for kwargs, word in cases:
        with pytest.raises(ValueError, match=word):
            md.keras.utils.image_dataset_from_directory(image_dir, **kwargs)
    with pytest.raises(ValueError, match="No images found"):
        md.keras.utils.image_dataset_from_directory(str(tmp_path))


def test_load_img_and_img_to_array(image_dir):
    path = os.path.join(image_dir, "a", "1.png")
    img = md.keras.utils.load_img(path, target_size=(3, 4))
    array = md.keras.utils.img_to_array(img)
    assert array.shape == (3, 4, 3) and array.dtype == np.float32 and array[0, 0, 0] == 10 + 50 * ord("a") % 200
    assert md.keras.utils.img_to_array(md.keras.utils.load_img(path, color_mode="grayscale")).shape == (6, 5, 1)
    assert md.keras.utils.img_to_array(img, data_format="channels_first").shape == (3, 3, 4)
    with pytest.raises(ValueError, match="interpolation"):
        md.keras.utils.load_img(path, target_size=(3, 4), interpolation="cubic")


def test_tf_keras_2_preprocessing_aliases():
    """Older tutorials write ``tf.keras.preprocessing.image_dataset_from_directory`` and ``...image.load_img``."""
    utils, preprocessing = md.keras.utils, md.keras.preprocessing
    assert preprocessing.image_dataset_from_directory is utils.image_dataset_from_directory
    assert preprocessing.text_dataset_from_directory is utils.text_dataset_from_directory
    assert preprocessing.timeseries_dataset_from_array is utils.timeseries_dataset_from_array
    assert preprocessing.image.load_img is utils.load_img and preprocessing.image.img_to_array is utils.img_to_array
    with pytest.raises(AttributeError, match="no attribute 'nothing_like_this'"):
        preprocessing.nothing_like_this  # noqa: B018
