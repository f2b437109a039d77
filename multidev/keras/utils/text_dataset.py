"""``md.keras.utils.text_dataset_from_directory``: a labelled ``md.data.Dataset`` of text files.

Keras 3's rules: one subdirectory per class (class ids in sorted order, or ``class_names``'s),
``*.txt`` files walked in sorted order, shuffled once with ``np.random.RandomState(seed)``, split
into the first ``1 - validation_split`` for training and the rest for validation, shuffled again
per epoch with a buffer of 8 batches. Texts are Python strings (numpy ``str_`` arrays once batched),
which ``layers.TextVectorization`` takes.

Example:
    train = md.keras.utils.text_dataset_from_directory("aclImdb/train", batch_size=32,
                                                       validation_split=0.2, subset="training", seed=1337)
"""

from __future__ import annotations

import os

import numpy as np

from multidev import data

_LABEL_MODES = ("int", "categorical", "binary", None)


def _check_split(validation_split, subset, shuffle, seed):
    if validation_split and not 0 < validation_split < 1:
        raise ValueError(f"`validation_split` must be between 0 and 1, received: {validation_split!r}")
    if bool(validation_split) != bool(subset):
        raise ValueError("If `subset` is set, `validation_split` must be set, and inversely.")
    if subset not in ("training", "validation", "both", None):
        raise ValueError(f'`subset` must be either "training", "validation" or "both", received: {subset!r}')
    if validation_split and shuffle and seed is None:
        raise ValueError("If using `validation_split` and shuffling the data, you must provide a `seed` argument, "
                         "to make sure that there is no overlap between the training and validation subset.")


def _text_files(root, follow_links, extensions=(".txt",)):
    """Paths of ``*.txt`` files (image_dataset's: of its ``extensions``) under ``root``, in sorted order."""
    out = []
    for dirpath, _, files in sorted(os.walk(root, followlinks=follow_links), key=lambda w: w[0]):
        out += [os.path.join(dirpath, f) for f in sorted(files) if f.lower().endswith(extensions)]
    return out


def _index(directory, labels, class_names, follow_links, extensions=(".txt",)):
    """(paths, integer labels or None, class names) in Keras's order."""
    if labels != "inferred":
        paths = _text_files(directory, follow_links, extensions)
        if labels is None:
            return paths, None, None
        if len(labels) != len(paths):
            raise ValueError(f"Expected the lengths of `labels` to match the number of files in the target "
                             f"directory. len(labels) is {len(labels)} while we found {len(paths)} files in "
                             f"directory {directory!r}.")
        return paths, np.asarray(labels, dtype="int32"), [str(v) for v in sorted(set(labels))]
    found = sorted(d for d in os.listdir(directory) if os.path.isdir(os.path.join(directory, d)))
    if class_names is not None and not set(class_names).issubset(found):
        raise ValueError(f"The `class_names` passed did not match the names of the subdirectories of the target "
                         f"directory. Expected: {found!r} (or a subset), but received: class_names={class_names!r}")
    names = list(class_names) if class_names is not None else found
    paths, ids = [], []
    for index, name in enumerate(names):
        files = _text_files(os.path.join(directory, name), follow_links, extensions)
        paths += files
        ids += [index] * len(files)
    return paths, np.asarray(ids, dtype="int32"), names


def _encode(ids, label_mode, num_classes):
    if label_mode == "categorical":
        return np.eye(num_classes, dtype="float32")[ids]
    if label_mode == "binary":
        return ids.astype("float32").reshape(-1, 1)
    return ids


def _dataset(paths, ids, label_mode, num_classes, max_length, shuffle, buffer, seed, batch_size, class_names):
    texts = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            texts.append(f.read() if max_length is None else f.read()[:max_length])
    texts = np.asarray(texts, dtype=str)
    elements = texts if label_mode is None else (texts, _encode(ids, label_mode, num_classes))
    dataset = data.Dataset.from_tensor_slices(elements)
    if shuffle:
        dataset = dataset.shuffle(buffer, seed=seed)
    if batch_size is not None:
        dataset = dataset.batch(batch_size)
    dataset.class_names = class_names
    return dataset


def text_dataset_from_directory(directory, labels="inferred", label_mode="int", class_names=None, batch_size=32,
                                max_length=None, shuffle=True, seed=None, validation_split=None, subset=None,
                                follow_links=False, verbose=True):
    """A dataset of (text, label) batches from ``directory/<class>/*.txt`` (see the module docstring).

    Returns:
        An ``md.data.Dataset`` with a ``class_names`` attribute; a list [training, validation]
        when ``subset="both"``.

    Raises:
        ValueError: bad ``labels``, ``label_mode``, ``class_names``, split arguments, or no files.
    """
    if labels not in ("inferred", None) and not isinstance(labels, (list, tuple)):
        raise ValueError("`labels` argument should be a list/tuple of integer labels, of the same size as the "
                         f'number of text files in the target directory. If you wish to infer the labels from '
                         f'the subdirectory names in the target directory, pass `labels="inferred"`. '
                         f"If you wish to get a dataset that only contains text samples (no labels), pass "
                         f"`labels=None`. Received: labels={labels!r}")
    if class_names is not None and labels != "inferred":
        raise ValueError(f'You can only pass `class_names` if `labels="inferred"`. Received: labels={labels!r}, '
                         f"and class_names={class_names!r}")
    if label_mode not in _LABEL_MODES:
        raise ValueError(f'`label_mode` argument must be one of "int", "categorical", "binary", or None. '
                         f"Received: label_mode={label_mode!r}")
    if labels is None or label_mode is None:
        labels = label_mode = None
    _check_split(validation_split, subset, shuffle, seed)
    seed = int(np.random.randint(1e6)) if seed is None else seed
    paths, ids, names = _index(directory, labels, class_names, follow_links)
    if verbose:
        print(f"Found {len(paths)} files." if ids is None else
              f"Found {len(paths)} files belonging to {len(names)} classes.")
    if label_mode == "binary" and len(names) != 2:
        raise ValueError(f'When passing `label_mode="binary"`, there must be exactly 2 class_names. '
                         f"Received: class_names={names!r}")
    if shuffle:
        np.random.RandomState(seed).shuffle(paths)
        if ids is not None:
            np.random.RandomState(seed).shuffle(ids)
    buffer = 1024 if batch_size is None else batch_size * 8
    n_val = int(validation_split * len(paths)) if validation_split else 0
    parts = {"training": slice(0, len(paths) - n_val), "validation": slice(len(paths) - n_val, len(paths)),
             None: slice(0, len(paths))}
    wanted = ["training", "validation"] if subset == "both" else [subset]
    out = []
    for part in wanted:
        sel = parts[part]
        if sel.stop <= sel.start:
            raise ValueError(f"No {'' if part is None else part + ' '}text files found in directory {directory!r}. "
                             "Allowed format: .txt")
        if verbose and part is not None:
            print(f"Using {sel.stop - sel.start} files for {part}.")
        out.append(_dataset(paths[sel], None if ids is None else ids[sel], label_mode, len(names or ()),
                            max_length, shuffle and part != "validation", buffer, seed, batch_size, names))
    return out if subset == "both" else out[0]
