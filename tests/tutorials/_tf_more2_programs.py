"""TensorFlow's images/cnn, images/classification, load_data/numpy, load_data/csv and customization/basics
tutorials, written once for ``tf`` = TensorFlow or multidev.

``python tests/tutorials/_tf_more2_programs.py tf|md [name,...]`` prints one JSON dict
``{program: {observation: value}}`` (``test_tf_more2_tutorials.py``). Programs run on one device
("<name>/1") and under a MirroredStrategy over 2 logical CPUs ("<name>/2"), except ``basics``.

Data is made here (never downloaded): CIFAR-shaped and MNIST-shaped arrays, PNG files in class folders
(the flowers' layout), and abalone/titanic-shaped tables (``_tf_more2_csv.py``). Each training set is
one batch (so fit's shuffle only reorders a sum); layer weights are set from a fixed pattern after build;
epochs are fewer. Substitutions (md refuses these TF names, naming the torch function):
``tf.random.uniform``, ``tf.linalg.matmul`` (torch's on md); TF's ``load_img`` needs PIL, which the
TensorFlow venv lacks (TF's side decodes with tf.io there).
"""

import json
import os
import sys
import struct
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _tf_core_common import IS_TF, copies_agree, deterministic, history, images, raised, rnd, scope, tf  # noqa: E402
from _tf_more2_csv import _fixed, csv_abalone, csv_titanic  # noqa: E402

if IS_TF:
    uniform, matmul = tf.random.uniform, tf.linalg.matmul
else:
    import torch
    def uniform(shape):
        return torch.rand(*shape)

    def matmul(a, b):   # TF makes int32 tensors of Python ints
        return torch.matmul(torch.tensor(a, dtype=torch.int32), torch.tensor(b, dtype=torch.int32))


def cnn(replicas):
    rng = np.random.RandomState(5)
    train_images = rng.randint(0, 256, (32, 32, 32, 3)).astype("uint8")
    train_labels = rng.randint(0, 10, (32, 1)).astype("uint8")
    test_images = rng.randint(0, 256, (16, 32, 32, 3)).astype("uint8")
    test_labels = rng.randint(0, 10, (16, 1)).astype("uint8")
    train_images, test_images = train_images / 255.0, test_images / 255.0
    layers, models = tf.keras.layers, tf.keras.models
    with scope(replicas):
        model = models.Sequential()
        model.add(layers.Conv2D(32, (3, 3), activation='relu', input_shape=(32, 32, 3)))
        model.add(layers.MaxPooling2D((2, 2)))
        model.add(layers.Conv2D(64, (3, 3), activation='relu'))
        model.add(layers.MaxPooling2D((2, 2)))
        model.add(layers.Conv2D(64, (3, 3), activation='relu'))
        model.add(layers.Flatten())
        model.add(layers.Dense(64, activation='relu'))
        model.add(layers.Dense(10))
        _fixed(model)
        model.compile(optimizer='adam',
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=['accuracy'])
    out = {"params": model.count_params(), "output_shape": list(model.layers[4].output_shape[1:])}
    h = model.fit(train_images, train_labels, epochs=3, validation_data=(test_images, test_labels), verbose=0)
    out["history"] = history(h)
    test_loss, test_acc = model.evaluate(test_images, test_labels, verbose=2)
    out["test"] = rnd([test_loss, test_acc], 4)
    out["copies_agree"] = copies_agree(model.trainable_variables)
    return out


def _png(path, pixels):
    """An RGB PNG file written with zlib (no imaging library on either side)."""
    raw = b"".join(b"\0" + row.tobytes() for row in pixels)

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    header = struct.pack(">IIBBBBB", pixels.shape[1], pixels.shape[0], 8, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
                + chunk(b"IEND", b""))


def _write_flowers(root, per_class=8, size=20):
    rng = np.random.RandomState(7)
    for c, name in enumerate(["daisy", "dandelion", "roses", "sunflowers", "tulips"]):
        os.makedirs(os.path.join(root, name))
        for i in range(per_class):
            pixels = rng.randint(0, 120, (size, size, 3)) + 25 * c * (np.arange(3) == c % 3)
            _png(os.path.join(root, name, f"{i}.png"), pixels.clip(0, 255).astype("uint8"))


def _load_img_array(path, size):
    """The page's ``img_to_array(load_img(path, target_size=size))``: tf_keras's needs PIL, which
    the TensorFlow venv lacks, so TF decodes and resizes with tf.io/tf.image instead."""
    if IS_TF:
        return tf.image.resize(tf.io.decode_png(tf.io.read_file(path), channels=3), size)
    img = tf.keras.utils.load_img(path, target_size=size)
    return tf.keras.utils.img_to_array(img)


def classification(replicas):
    data_dir = os.path.abspath("flower_photos")
    _write_flowers(data_dir)
    batch_size, img_height, img_width = 32, 16, 16   # the page's 180x180 images are 20x20 PNGs here
    out = {}
    train_ds = tf.keras.utils.image_dataset_from_directory(
        data_dir, validation_split=0.2, subset="training", seed=123,
        image_size=(img_height, img_width), batch_size=batch_size)
    val_ds = tf.keras.utils.image_dataset_from_directory(
        data_dir, validation_split=0.2, subset="validation", seed=123,
        image_size=(img_height, img_width), batch_size=batch_size)
    class_names = train_ds.class_names
    out["class_names"] = class_names
    for image_batch, labels_batch in train_ds:
        out["batch_shapes"] = [list(image_batch.shape), list(labels_batch.shape)]
        break
    out["val_labels"] = sorted(int(v) for _, y in val_ds for v in np.asarray(y))
    AUTOTUNE = tf.data.AUTOTUNE
    train_ds = train_ds.cache().shuffle(1000).prefetch(buffer_size=AUTOTUNE)
    val_ds = val_ds.cache().prefetch(buffer_size=AUTOTUNE)
    normalization_layer = tf.keras.layers.Rescaling(1. / 255)
    normalized_ds = train_ds.map(lambda x, y: (normalization_layer(x), y))
    image_batch, labels_batch = next(iter(normalized_ds))
    first_image = image_batch[0]
    out["np_min_of_tensor"] = raised(lambda: np.min(first_image))   # the page's print(np.min(first_image), ...)
    first_image = first_image if IS_TF else first_image.numpy()   # np.min(torch tensor): TypeError (torch's)
    out["pixel_range"] = rnd([np.min(first_image), np.max(first_image)], 4)
    out["pixel_sum"] = rnd(np.sum(np.asarray(image_batch)), 2)
    num_classes = len(class_names)
    layers = tf.keras.layers
    with scope(replicas):
        model = tf.keras.Sequential([
            layers.Rescaling(1. / 255, input_shape=(img_height, img_width, 3)),
            layers.Conv2D(16, 3, padding='same', activation='relu'),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, padding='same', activation='relu'),
            layers.MaxPooling2D(),
            layers.Conv2D(64, 3, padding='same', activation='relu'),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dense(128, activation='relu'),
            layers.Dense(num_classes)
        ])
        _fixed(model)
        model.compile(optimizer='adam',
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=['accuracy'])
    h = model.fit(train_ds, validation_data=val_ds, epochs=3, verbose=0)
    out["history"] = history(h)
    out["copies_agree"] = copies_agree(model.trainable_variables)
    with scope(replicas):
        data_augmentation = tf.keras.Sequential([
            layers.RandomFlip("horizontal", input_shape=(img_height, img_width, 3)),
            layers.RandomRotation(0.1),
            layers.RandomZoom(0.1),
        ])
        model = tf.keras.Sequential([
            data_augmentation,
            layers.Rescaling(1. / 255),
            layers.Conv2D(16, 3, padding='same', activation='relu'),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, padding='same', activation='relu'),
            layers.MaxPooling2D(),
            layers.Conv2D(64, 3, padding='same', activation='relu'),
            layers.MaxPooling2D(),
            layers.Dropout(0.2),
            layers.Flatten(),
            layers.Dense(128, activation='relu'),
            layers.Dense(num_classes, name="outputs")
        ])
        model.compile(optimizer='adam',
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=['accuracy'])
    augmented = data_augmentation(image_batch * 255, training=True)
    out["augmented_shape"] = list(augmented.shape)
    h = model.fit(train_ds, validation_data=val_ds, epochs=2, verbose=0)
    out["augmented_epochs"] = len(h.history["loss"])
    img_array = _load_img_array(os.path.join(data_dir, "roses", "0.png"), (img_height, img_width))
    out["img_array"] = [list(img_array.shape), rnd(np.asarray(img_array)[0, 0], 2)]
    img_array = tf.expand_dims(img_array, 0)  # Create a batch
    predictions = model.predict(img_array, verbose=0)
    score = tf.nn.softmax(predictions[0])
    out["confidence"] = raised(lambda: "{:.2f} percent confidence.".format(100 * np.max(score)))
    out["score"] = [list(score.shape), rnd(np.sum(np.asarray(score)), 4), class_names[np.argmax(score)] in
                    class_names]
    out["copies_agree_augmented"] = copies_agree(model.trainable_variables)
    return out


def numpy_data(replicas):
    train_examples, train_labels = images(64, 11)
    test_examples, test_labels = images(32, 12)
    train_dataset = tf.data.Dataset.from_tensor_slices((train_examples, train_labels))
    test_dataset = tf.data.Dataset.from_tensor_slices((test_examples, test_labels))
    BATCH_SIZE = 64
    SHUFFLE_BUFFER_SIZE = 100
    train_dataset = train_dataset.shuffle(SHUFFLE_BUFFER_SIZE).batch(BATCH_SIZE)
    test_dataset = test_dataset.batch(BATCH_SIZE)
    with scope(replicas):
        model = tf.keras.Sequential([
            tf.keras.layers.Flatten(input_shape=(28, 28)),
            tf.keras.layers.Dense(128, activation='relu'),
            tf.keras.layers.Dense(10)
        ])
        deterministic(model, 0.01)
        model.compile(optimizer=tf.keras.optimizers.RMSprop(),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=['sparse_categorical_accuracy'])
    h = model.fit(train_dataset, epochs=4, verbose=0)
    return {"history": history(h), "evaluate": rnd(model.evaluate(test_dataset, verbose=0), 4),
            "copies_agree": copies_agree(model.trainable_variables)}


def basics():
    out = {"add": rnd(tf.math.add(1, 2)), "add_list": rnd(tf.math.add([1, 2], [3, 4])),
           "square": rnd(tf.math.square(5)), "reduce_sum": rnd(tf.math.reduce_sum([1, 2, 3])),
           "overload": rnd(tf.math.square(2) + tf.math.square(3))}
    x = matmul([[1]], [[2, 3]])
    out["matmul"] = [rnd(x), list(x.shape), str(x.dtype).replace("torch.", "").replace("<dtype: '", "")[:5]]
    ndarray = np.ones([3, 3])
    tensor = tf.math.multiply(ndarray, 42)
    out["multiply"] = rnd(tensor)
    out["np_add"] = rnd(np.add(tensor, 1))
    out["numpy"] = rnd(tensor.numpy())
    x = uniform([3, 3])
    out["gpus"] = len(tf.config.list_physical_devices("GPU"))
    out["on_gpu"] = x.device.endswith('GPU:0') if IS_TF else str(x.device).endswith('GPU:0')
    with tf.device("CPU:0"):
        x = uniform([100, 100])
        out["cpu_device"] = raised(lambda: x.device.endswith("CPU:0"))
    ds_tensors = tf.data.Dataset.from_tensor_slices([1, 2, 3, 4, 5, 6])
    with open("file.txt", 'w') as f:
        f.write("""Line 1\nLine 2\nLine 3\n""")
    ds_file = tf.data.TextLineDataset("file.txt")
    ds_tensors = ds_tensors.map(tf.math.square).shuffle(2).batch(2)
    ds_file = ds_file.batch(2)
    out["ds_tensors"] = sorted(int(v) for x in ds_tensors for v in np.asarray(x))
    out["ds_file"] = [[bytes(v).decode() if isinstance(v, (bytes, np.bytes_)) else str(v) for v in np.asarray(x)]
                      for x in ds_file]
    return out


PROGRAMS = [basics]
REPLICATED = [cnn, classification, numpy_data, csv_abalone, csv_titanic]


def _observe(program, *args):
    os.chdir(tempfile.mkdtemp())
    try:
        return program(*args)
    except Exception as e:  # the observation is the exception
        if os.environ.get("TUTORIAL_TRACEBACK"):
            import traceback
            traceback.print_exc()
        return {"raises": type(e).__name__, "message": str(e)[:300]}


def main():
    only = sys.argv[2].split(",") if len(sys.argv) > 2 else None
    results = {}
    for program in PROGRAMS:
        if not only or program.__name__ in only:
            results[program.__name__] = _observe(program)
    for program in REPLICATED:
        for replicas in (1, 2):
            if not only or program.__name__ in only:
                results[f"{program.__name__}/{replicas}"] = _observe(program, replicas)
    print(json.dumps(results, default=repr))


if __name__ == "__main__":
    main()
