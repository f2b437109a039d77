"""Whole-model saving: ``model.save(path)`` and ``load_model(path)``, without pickle.

Layout (a directory, or the same members in a zip archive when ``path`` ends with ``.keras``):
  ``config.json``               {"format", "class_name", "config", "compile_config"} (JSON)
  ``model.weights.safetensors`` the weights, as ``save_weights`` writes them
  ``optimizer.safetensors``     optimizer state (``iterations`` and slots as ``<weight>/<slot>``), if compiled
Built-in layers, Sequential and functional models round-trip; custom layers need ``get_config``
and ``custom_objects={name: cls}`` on load. A subclassed model without ``get_config`` is saved by
its class's import path and input signature and re-created from them (see ``subclassed.py``).
Crash-safe: the new directory is built beside the old one and swapped in (``_core.atomic_files``),
so a kill at any moment leaves a loadable model (``load_model`` finishes an interrupted swap).
Weights files carry a checksum, verified on load unless ``verify_checksum=False``.

Example:
    model.save("my_model")
    restored = md.keras.models.load_model("my_model")
"""

from __future__ import annotations

import io
import json
import os
import zipfile

from multidev._core import atomic_files
from multidev._core.user_warnings import warn_user
from multidev.keras import losses, metrics, optimizers
from multidev.keras.metrics.base import Metric
from multidev.keras.saving import subclassed, weights_io
from multidev.keras.saving import own_variables
from multidev.keras.saving.serialization import deserialize_layer, serialize_layer

FORMAT = "multidev.keras.model/1"
CONFIG, WEIGHTS, OPTIMIZER = "config.json", "model.weights.safetensors", "optimizer.safetensors"


def _compile_config(model):
    if not model._is_compiled:
        return None
    cc = model._compile_config

    def metric(m):
        return metrics.serialize(m) if isinstance(m, Metric) else m if isinstance(m, str) else None

    def structure(spec, fn):
        if isinstance(spec, dict):
            return {k: structure(v, fn) for k, v in spec.items()}
        if isinstance(spec, (list, tuple)):
            return [structure(v, fn) for v in spec]
        return fn(spec) if spec is not None else None

    config = {"optimizer": optimizers.serialize(model.optimizer), "loss": structure(cc["loss"], losses.serialize),
              "metrics": structure(cc["metrics"], metric), "loss_weights": cc["loss_weights"],
              "weighted_metrics": structure(cc["weighted_metrics"], metric)}
    try:
        json.dumps(config)
    except TypeError:
        warn_user("The compile arguments are not all serializable; the saved model will load uncompiled.")
        return None
    return config


def _members(model, include_optimizer) -> dict:
    try:
        model_config = serialize_layer(model)
    except NotImplementedError as err:
        if type(model).__module__.startswith("multidev."):   # Functional or Sequential: a layer is the cause
            raise ValueError(f"Cannot save {type(model).__name__} model {model.name!r}: {err}") from err
        model_config = {"class_name": type(model).__name__, "config": None,
                        subclassed.CLASS_KEY: subclassed.describe(model)}
    config = {"format": FORMAT, **model_config, "compile_config": _compile_config(model)}
    members = {CONFIG: json.dumps(config, indent=1).encode()}
    variables = weights_io.variable_dict(model)
    members[WEIGHTS] = weights_io.to_bytes({**variables, **own_variables.stores(model)},
                                           {"format": weights_io.FORMAT, "model": model.name})
    if include_optimizer and model.optimizer is not None and model.optimizer._torch_opt is not None:
        names = {id(v): k for k, v in variables.items()}
        members[OPTIMIZER] = weights_io.to_bytes(model.optimizer.state_tensors(names), {"format": FORMAT})
    return members


def model_files_if_serializable(model, include_optimizer=True) -> dict:
    """``{file name: bytes}`` of ``model``'s saved form (what ``load_model`` reads from a directory), or none
    when its config cannot be written (a ``Lambda``'s Python function): the SavedModel beside them is then
    for ``md.saved_model.load`` only, as ``load_model`` says."""
    try:
        return _members(model, include_optimizer)
    except (ValueError, NotImplementedError, TypeError):
        return {}


def save_model(model, filepath, overwrite=True, include_optimizer=True) -> None:
    """Write ``model`` to ``filepath`` (directory, or zip archive for ``*.keras``)."""
    path = os.fspath(filepath)
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path!r} already exists; pass overwrite=True to replace it.")
    members = _members(model, include_optimizer)
    if path.endswith(".keras"):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for name, data in members.items():
                zf.writestr(name, data)
        weights_io.atomic_write(path, buf.getvalue())
        return
    with atomic_files.atomic_directory(path) as tmp:
        for name, data in members.items():
            atomic_files.atomic_write(os.path.join(tmp, name), data)


def _read_members(path) -> dict:
    atomic_files.recover_directory(path)   # a save killed between its two renames
    if os.path.isdir(path):
        out = {}
        for name in (CONFIG, WEIGHTS, OPTIMIZER):
            full = os.path.join(path, name)
            if os.path.exists(full):
                with open(full, "rb") as f:
                    out[name] = f.read()
        return out
    if os.path.isfile(path):
        try:
            with zipfile.ZipFile(path) as zf:
                return {n: zf.read(n) for n in zf.namelist() if n in (CONFIG, WEIGHTS, OPTIMIZER)}
        except zipfile.BadZipFile as err:
            raise ValueError(f"{path!r} is not a saved model (not a directory or a .keras archive): {err}") from err
    raise ModelNotFoundError(f"No model found at {path!r}: save one with model.save({path!r}).")


class ModelNotFoundError(FileNotFoundError, ValueError):
    """``load_model`` of a path that does not exist: Keras 3 (TensorFlow 2.21's tf.keras) raises ValueError
    ("File not found"), Keras 2 an OSError; this is both, so either ``except`` catches it."""


def load_model(filepath, custom_objects=None, compile=True, safe_mode=True, verify_checksum=True, options=None):
    """Rebuild a model saved by ``model.save`` (architecture, weights, compile state, optimizer state).

    ``verify_checksum=False`` skips the weights files' SHA-256 check (faster for very large models).
    ``options`` (``md.saved_model.LoadOptions``, tf.keras 2's argument: the save_and_load tutorial's
    ``experimental_io_device='/job:localhost'``) is checked and changes nothing: this process reads the files.
    """
    from multidev.saved_model.options import LoadOptions, check
    check(options, LoadOptions, "load_model")
    path = os.fspath(filepath)
    members = _read_members(path)
    if CONFIG not in members or WEIGHTS not in members:
        if os.path.exists(os.path.join(path, "saved_model.json")):
            raise ValueError(f"{path!r} is an md.saved_model without the Keras model's files (model.save(..., "
                             "save_format='tf') of a model whose config cannot be written, e.g. a Lambda layer): "
                             f"load it with md.saved_model.load({path!r}).")
        raise ValueError(f"{path!r} is missing {CONFIG!r} or {WEIGHTS!r}; it was not written by model.save().")
    return _from_members(members, path, custom_objects, compile, verify_checksum)


def load_weights_from_archive(model, filepath, skip_mismatch=False, verify_checksum=True) -> None:
    """``model.load_weights("x.keras")``: the weights of a whole model saved by ``model.save`` (a best-only
    ``ModelCheckpoint("checkpoint.keras")`` reloaded into the trained model, as keras.io's ConvMixer does), as
    Keras 3 reads them (``saving_lib.load_weights_only``); the architecture must match (all-or-nothing)."""
    path = os.fspath(filepath)
    if not os.path.exists(path):
        raise ModelNotFoundError(f"Unable to load weights: {path!r} does not exist. load_weights reads a `.keras` file "
                                 "that model.save wrote, or a weights file, whose name must end in `.weights.h5` "
                                 "(Keras 3) or `.safetensors`, that model.save_weights wrote.")
    members = _read_members(path)
    if WEIGHTS not in members:
        raise ValueError(f"{path!r} is missing {WEIGHTS!r}; it was not written by model.save().")
    variables = weights_io.variable_dict(model)
    if not variables:
        raise ValueError(f"Model {model.name!r} has no weights yet, so {path!r} cannot be loaded into it: build the "
                         "model first (call it on a batch, pass input_shape, or model.build(shape)).")
    tensors, _ = weights_io.read_tensors(members[WEIGHTS], f"{path}/{WEIGHTS}", verify_checksum)
    tensors, own = own_variables.split(tensors)
    weights_io.check_and_assign(variables, tensors, f"{path}/{WEIGHTS}", skip_mismatch)
    own_variables.load(model, own)


def copy_model(model):
    """``copy.deepcopy(model)`` as Keras 3 makes it (a pickle round trip through its saving): the model saved and
    loaded in memory (architecture, weights, compile and optimizer state), its new variables created under the
    current strategy's scope (distributed there, plain tensors outside any), sharing nothing with ``model``.

    Raises:
        TypeError: for a model that cannot be re-created from its config (Keras 3's "Could not locate class").
    """
    try:
        members = _members(model, include_optimizer=True) if weights_io.variable_dict(model) else {
            CONFIG: json.dumps({"format": FORMAT, **serialize_layer(model), "compile_config": _compile_config(model)})}
    except (NotImplementedError, ValueError) as err:
        raise TypeError(f"Cannot copy.deepcopy model {model.name!r}: {err} (Keras 3's deepcopy saves and reloads the "
                        "model too.) To copy a teacher's weights, build a new instance and call "
                        "new.set_weights(model.get_weights()).") from err
    return _from_members(members, f"<copy.deepcopy of {model.name!r}>", None, True, False)


def _from_members(members: dict, path: str, custom_objects, compile: bool, verify_checksum: bool):
    """The model of a saved model's members (``path`` names them in errors)."""
    try:
        config = json.loads(members[CONFIG])
    except ValueError as err:
        raise ValueError(f"Corrupt {CONFIG} in {path!r}: {err}") from err
    if config.get("format") != FORMAT:
        raise ValueError(f"Unknown model format {config.get('format')!r} in {path!r}; expected {FORMAT!r}.")
    if config.get(subclassed.CLASS_KEY):
        model = subclassed.rebuild(config[subclassed.CLASS_KEY], custom_objects)
    else:
        model = deserialize_layer(config, custom_objects)
    variables = weights_io.variable_dict(model)
    if WEIGHTS in members:   # an unbuilt model's copy has none
        tensors, _ = weights_io.read_tensors(members[WEIGHTS], f"{path}/{WEIGHTS}", verify_checksum)
        tensors, own = own_variables.split(tensors)
        weights_io.check_and_assign(variables, tensors, f"{path}/{WEIGHTS}")
        own_variables.load(model, own)
    cc = config.get("compile_config")
    if compile and cc:
        model.compile(optimizer=optimizers.get(cc["optimizer"], custom_objects), loss=_loss(cc["loss"]), metrics=_metric(cc["metrics"]),
                      loss_weights=cc["loss_weights"], weighted_metrics=_metric(cc["weighted_metrics"]))
        if OPTIMIZER in members:
            state, _ = weights_io.read_tensors(members[OPTIMIZER], f"{path}/{OPTIMIZER}", verify_checksum)
            model.optimizer.load_state_tensors(state, variables)
    return model


def _loss(spec):
    if isinstance(spec, dict) and "class_name" not in spec:
        return {k: _loss(v) for k, v in spec.items()}
    if isinstance(spec, list):
        return [_loss(v) for v in spec]
    return losses.get(spec) if spec is not None else None


def _metric(spec):
    if isinstance(spec, dict) and "class_name" not in spec:
        return {k: _metric(v) for k, v in spec.items()}
    if isinstance(spec, list):
        return [_metric(v) for v in spec]
    return metrics.get(spec) if isinstance(spec, dict) else spec
