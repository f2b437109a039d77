"""Model: a Layer that trains (``compile``/``fit``/``evaluate``/``predict``) and saves.

``Model(inputs=..., outputs=...)`` builds a functional model; subclass ``Model`` and define
``call`` for custom models; ``Model.from_torch(module)`` wraps any ``torch.nn.Module``.

Example:
    class MLP(md.keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = md.keras.layers.Dense(32, activation="relu")
            self.out = md.keras.layers.Dense(1)
        def call(self, x):
            return self.out(self.hidden(x))
"""

from __future__ import annotations

import inspect
import os

from torch import nn

from multidev.keras.layers.base import Layer
from multidev.keras.layers.input_layer import Input
from multidev.keras.models import summary as summary_mod
from multidev.keras.models.step_runner import LocalStepRunner
from multidev.keras.models.trainer import Trainer
from multidev.values import context


class Model(Trainer, Layer):
    """A trainable network of layers (subclassed, functional, Sequential or a wrapped torch module)."""

    def __new__(cls, *args, **kwargs):
        if cls is Model and ("inputs" in kwargs or "outputs" in kwargs or len(args) >= 2):
            from multidev.keras.models.functional import Functional
            return Layer.__new__(Functional)
        if cls is not Model and _functional_arguments(args, kwargs):
            return Layer.__new__(_functional_subclass(cls))
        return Layer.__new__(cls)

    def __init__(self, *args, **kwargs):
        if args:
            raise TypeError(f"Model.__init__ got positional arguments {args!r}; use Model(inputs=..., outputs=...) "
                            "for a functional model.")
        super().__init__(**kwargs)
        self._init_trainer()
        self._local_runner = LocalStepRunner()
        # The strategy whose scope the model was created in (TensorFlow's model.distribute_strategy).
        self._strategy = context.current_scope_strategy()
        self.history = None

    def __call__(self, *args, **kwargs):
        # A model made in a strategy's scope and first called outside it (a summary, a sample
        # prediction) builds there: its weights belong to that strategy, as TensorFlow's do.
        strategy = self.__dict__.get("_strategy")
        if (strategy is not None and not self.built and context.current_scope_strategy() is None
                and strategy.extended.distributes_variables):
            with strategy.scope():
                return super().__call__(*args, **kwargs)
        return super().__call__(*args, **kwargs)

    @property
    def distribute_strategy(self):
        """The strategy the model's variables belong to (the default strategy if none)."""
        from multidev import distribute

        return self._strategy or distribute.get_strategy()

    @property
    def _step_runner(self):
        """How ``fit``/``evaluate``/``predict`` run a step: on the model's strategy's replicas."""
        strategy = self.__dict__.get("_strategy")
        if strategy is None:
            return self._local_runner
        runner = self.__dict__.get("_strategy_runner")
        if runner is None or runner.strategy is not strategy:
            from multidev.keras.models.strategy_runner import StrategyStepRunner

            runner = self.__dict__["_strategy_runner"] = StrategyStepRunner(strategy)
        return runner

    @property
    def layers(self) -> list:
        """Layers tracked as attributes of this model (lists/dicts of layers flattened), in assignment order."""
        out = []
        for m in self._modules.values():
            if isinstance(m, Layer):
                out.append(m)
            elif isinstance(m, (nn.ModuleList, nn.ModuleDict)):
                out += [c for c in m.children() if isinstance(c, Layer)]
        return out

    @property
    def input(self):
        """The model's input KerasTensor (a list when it has several), as in Keras.

        Raises:
            AttributeError: the model has no symbolic input (a subclassed model, or a Sequential
                model built without a known input shape).
        """
        return _one_or_list(self._symbolic("inputs", "input"))

    @property
    def output(self):
        """The model's output KerasTensor (a list when it has several), as in Keras."""
        return _one_or_list(self._symbolic("outputs", "output"))

    def _symbolic(self, attr: str, what: str) -> list:
        tensors = getattr(type(self), attr, None) and getattr(self, attr)
        if not tensors:
            raise AttributeError(
                f"Model {self.name!r} ({type(self).__name__}) has no defined {what}: only functional models and "
                "Sequential models with a known input (keras.Input(shape=...) first, or input_shape=) have "
                f"symbolic {attr}. A subclassed model's {what} is whatever call() receives/returns.")
        return tensors

    def get_layer(self, name=None, index=None) -> Layer:
        """A layer by name or by index in ``layers``."""
        if index is not None:
            if not -len(self.layers) <= index < len(self.layers):
                raise ValueError(f"Was asked to retrieve layer at index {index} but model only has {len(self.layers)} layers.")
            return self.layers[index]
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise ValueError(f"No such layer: {name!r}. Existing layers are: {[l.name for l in self.layers]}.")

    def build(self, input_shape):
        """Build all weights by calling the model once on zeros of ``input_shape`` (batch dim included).

        Reached as ``super().build(input_shape)`` from a subclass's own ``build`` (keras.io's Perceiver makes its
        sublayers and latent weight there), it only marks the model built, as Keras 3's ``Layer.build`` does: the
        sublayers build at the first call."""
        if type(self).build is not Model.build:
            Layer.build(self, input_shape)
            self.built = True
            return
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        inputs = [Input(batch_shape=tuple(s)) for s in shapes]
        self(inputs if isinstance(input_shape, list) else inputs[0])
        self.built = True

    def _maybe_build(self, inputs):
        if not self.built:
            if type(self).build is not Model.build:   # its own build(input_shape) first, as Keras calls it
                Layer._maybe_build(self, inputs)
            self.built = True      # a subclassed model's layers build themselves inside call
            if self.__dict__.get("_input_signature") is None:
                from multidev.keras.saving.subclassed import signature
                try:
                    self._input_signature = signature(inputs)     # lets save() rebuild it on load
                except (AttributeError, TypeError):
                    pass

    def summary(self, line_length=None, positions=None, print_fn=None, **_):
        """Print Keras's table: layer (type), output shape, param #, and the totals."""
        summary_mod.print_summary(self, line_length, positions, print_fn)

    def count_params(self) -> int:
        if not self.built:
            raise ValueError(f"You tried to call `count_params` on model '{self.name}', but the model isn't built. "
                             "Build it with `build(input_shape)` or by calling it on data first.")
        return int(sum(w.numel() for w in self.weights))

    def save_weights(self, filepath, overwrite=True, save_format=None, options=None):
        """Write weights to exactly ``filepath`` ending in ``.weights.h5`` (Keras 3) or ``.safetensors``, or,
        for a name without suffix (``"ckpt"``), an ``md.train`` checkpoint at that prefix, as Keras 2 wrote
        TensorFlow's: the weights and a compiled model's optimizer, read back by ``load_weights(prefix)``
        or ``md.train.Checkpoint(model).read(prefix)``.

        The content is safetensors either way. Another suffix raises ValueError, as Keras 3 does.

        Example:
            >>> model.save_weights("model.weights.h5")
            >>> model.save_weights("ckpt")          # ckpt.index + ckpt.data.safetensors
        """
        from multidev.keras.saving import weights_io
        weights_io.save_weights(self, filepath, overwrite=overwrite)

    def load_weights(self, filepath, skip_mismatch=False, by_name=False, options=None, verify_checksum=True):
        """Load weights written by ``save_weights``; mismatches raise ValueError listing all, changing nothing.

        The file's checksum is verified (damage raises ``md.errors.DataLossError``);
        ``verify_checksum=False`` skips that for speed. A checkpoint prefix (no suffix) returns its load
        status, as Keras 2 does. A ``.keras`` file written by ``model.save`` gives its weights, as Keras 3 reads it.
        """
        from multidev.keras.saving import model_io, weights_io
        if os.fspath(filepath).endswith(".keras"):
            return model_io.load_weights_from_archive(self, filepath, skip_mismatch, verify_checksum)
        return weights_io.load_weights(self, filepath, skip_mismatch=skip_mismatch, verify_checksum=verify_checksum)

    def save(self, filepath, overwrite=True, include_optimizer=True, save_format=None, options=None, signatures=None,
             **_):
        """Save config + weights (+ optimizer state) as a directory; see ``saving.model_io``.
        ``options`` (``md.saved_model.SaveOptions``, tf.keras 2's argument) is checked and changes nothing:
        the calling process writes the files. ``save_format='tf'`` (tf.keras 2's SavedModel, with its
        ``signatures``) writes an ``md.saved_model`` for ``md.saved_model.load``, with the model's own files
        beside it, so ``md.keras.models.load_model`` rebuilds the Keras model from it as tf.keras 2's does
        (TensorFlow's "Distributed training with Keras" tutorial loads it back with and without a strategy)."""
        from multidev.keras.saving import model_io
        from multidev.saved_model.options import SaveOptions, check
        check(options, SaveOptions, "Model.save")
        if save_format == "tf" or signatures is not None:
            from multidev.saved_model.export import save as save_saved_model
            save_saved_model(self, filepath, signatures=signatures, options=options,
                             extra_files=model_io.model_files_if_serializable(self, include_optimizer))
            return
        model_io.save_model(self, filepath, overwrite=overwrite, include_optimizer=include_optimizer)

    def export(self, filepath, format="tf_saved_model", verbose=None, input_signature=None, **kwargs):
        """Keras 3's export for serving: an ``md.saved_model`` at ``filepath`` whose ``serve`` endpoint and
        ``serving_default`` signature run the inference call (``md.saved_model.load(filepath).serve(x)``).

        Raises:
            ValueError: another ``format`` (Keras 3's 'onnx', 'openvino', 'litert' are not written by multidev),
                or a model whose input shape is unknown (build it first).
        """
        if format != "tf_saved_model":
            raise ValueError(f"Model.export writes format='tf_saved_model' only (an md.saved_model); received "
                             f"format={format!r}. Keras 3's 'onnx', 'openvino' and 'litert' exports are not available.")
        from multidev.saved_model.export import export_keras
        export_keras(self, filepath, input_signature)

    def __deepcopy__(self, memo):
        """``copy.deepcopy(model)``: Keras 3's (a save and load round trip), see ``model_io.copy_model``."""
        from multidev.keras.saving.model_io import copy_model
        memo[id(self)] = copied = copy_model(self)
        return copied

    def get_config(self) -> dict:
        """A subclassed model's ``get_config`` override starts from this (``{**super().get_config(), 'units':
        ...}``: name, trainable, dtype, as Keras 3's); without an override there is nothing to rebuild it from."""
        if type(self).get_config is Model.get_config:
            raise NotImplementedError(
                f"Model {type(self).__name__!r} is a subclassed model: implement get_config()/from_config() to save "
                "its configuration, or use save_weights()/load_weights().")
        return Layer.get_config(self)

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """``cls(**config)``; a functional model's config (``layers``, ``input_layers``, ``output_layers``) read
        through ``md.keras.Model`` rebuilds the graph, as Keras 3's ``Model.from_config`` does."""
        functional = all(key in config for key in ("name", "layers", "input_layers", "output_layers"))
        if functional and (cls is Model or _takes_functional_arguments(cls)):
            from multidev.keras.models.functional import Functional
            return Functional.from_config.__func__(Functional if cls is Model else cls, config, custom_objects)
        if cls is Model and "layers" in config:
            raise ValueError(
                f"Unrecognized keyword arguments passed to Model: {sorted(set(config) - {'name', 'trainable'})!r}: "
                "this is a Sequential model's config; rebuild it with md.keras.Sequential.from_config(config) "
                "(or md.keras.models.clone_model(model)).")
        try:
            return cls(**config)
        except TypeError as err:
            raise TypeError(
                f"Unable to revive model from config. When overriding the `get_config()` method, make sure that the "
                f"returned config contains all items used as arguments in the constructor to {cls!r}, which is the "
                "default behavior. You can override this default behavior by defining a `from_config(cls, config)` "
                f"class method to specify how to create an instance of {cls.__name__} from its config.\n\nReceived "
                f"config={config!r}\n\nError encountered during deserialization: {err}") from err

    @staticmethod
    def from_torch(module, name=None, input_shape=None):
        """Wrap a ``torch.nn.Module`` as a Model (``call(x, training)`` sets train/eval mode and runs it)."""
        from multidev.keras.models.torch_model import TorchModel
        return TorchModel(module, name=name, input_shape=input_shape)


def _one_or_list(tensors: list):
    return tensors[0] if len(tensors) == 1 else list(tensors)


def _functional_arguments(args, kwargs) -> bool:
    """Whether a Model subclass is called as Keras 3 builds a functional model: ``(inputs, outputs)``
    given positionally or by name, the inputs KerasTensors."""
    from multidev.keras.layers.keras_tensor import KerasTensor, flatten

    inputs = kwargs.get("inputs", args[0] if args else None)
    outputs = kwargs.get("outputs", args[1] if len(args) > 1 else None)
    if inputs is None or outputs is None:
        return False
    flat = flatten(inputs)
    return bool(flat) and all(isinstance(t, KerasTensor) for t in flat)


def _takes_functional_arguments(cls) -> bool:
    """Keras 3's rule for reviving a subclass's functional config as that class: its ``__init__`` is Model's own
    takes Functional's arguments or ``(*args, **kwargs)`` (keras.io's MaskedLanguageModel overrides only
    ``compute_loss``); a subclass with its own arguments is built from ``cls(**config)``."""
    from multidev.keras.models.functional import Functional

    spec = inspect.getfullargspec(cls.__init__)
    return (spec.args[1:] == inspect.getfullargspec(Functional.__init__).args[1:]
            or (spec.varargs is not None and spec.varkw is not None))


_FUNCTIONAL_SUBCLASSES: dict = {}


def _functional_subclass(cls):
    """``cls`` mixed with Functional (Keras 3: ``class CustomModel(keras.Model)`` called with inputs and
    outputs is a functional model whose methods, e.g. ``train_step``, are CustomModel's)."""
    from multidev.keras.models.functional import Functional

    if issubclass(cls, Functional):
        return cls
    if cls not in _FUNCTIONAL_SUBCLASSES:
        _FUNCTIONAL_SUBCLASSES[cls] = type(cls.__name__, (cls, Functional),
                                           {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
    return _FUNCTIONAL_SUBCLASSES[cls]
