"""The AttributeError for a TensorFlow name multidev does not provide: it says which torch function
to call instead, where torch has one under the same name."""

from __future__ import annotations

import importlib
import types

import torch

#: Where torch keeps the functions that TensorFlow has at top level or in tf.math / tf.nn / tf.linalg.
_TORCH_HOMES = ("torch", "torch.special", "torch.linalg", "torch.nn.functional")

#: TensorFlow ops that torch names otherwise (the ones TF's tutorials use).
_TORCH_RENAMED = {
    "tf.random.normal": "torch.randn (or torch.normal)", "tf.random.uniform": "torch.rand (torch.randint for integers)",
    "tf.random.truncated_normal": "torch.nn.init.trunc_normal_", "tf.random.shuffle": "torch.randperm as an index",
    "tf.random.categorical": "torch.multinomial", "tf.random.Generator": "torch.Generator",
    "tf.random.log_uniform_candidate_sampler": "torch.multinomial over log-uniform (Zipf) weights "
                                               "log((k + 2) / (k + 1)) / log(range_max + 1)",
    "tf.random.stateless_normal": "torch.randn with a seeded torch.Generator",
    "tf.random.stateless_uniform": "torch.rand with a seeded torch.Generator",
    "tf.nn.softmax_cross_entropy_with_logits": "torch.nn.functional.cross_entropy (it takes probabilities too)",
    "tf.nn.sparse_softmax_cross_entropy_with_logits": "torch.nn.functional.cross_entropy",
    # TF's own initializers (pix2pix's tf.random_normal_initializer(0., 0.02)): Keras's of the same arguments
    **{f"tf.{k}_initializer": f"md.keras.initializers.{v} (layers take it as kernel_initializer)" for k, v in (
        ("random_normal", "RandomNormal(mean, stddev)"), ("random_uniform", "RandomUniform(minval, maxval)"),
        ("constant", "Constant(value)"), ("zeros", "Zeros()"), ("ones", "Ones()"))},
    # torch.signal holds window functions only: the time_series tutorial's tf.signal.rfft is torch.fft.rfft
    "tf.signal": "torch.fft's functions (tf.signal.rfft is torch.fft.rfft; tf.signal.stft is torch.stft)",
}

#: TensorFlow names outside the multi-device system whose replacement is not one torch function: what to do.
_OTHER_WAYS = {
    "tf.train.ExponentialMovingAverage": "Use torch.optim.swa_utils.AveragedModel(model, "
                                         "multi_avg_fn=get_ema_multi_avg_fn(decay)), or a md.keras optimizer's "
                                         "use_ema=True.",
    **{f"tf.{n}": "multidev parses no protobufs (tf.train.Example, TFRecords): convert the data once to arrays "
                  "(numpy .npy, safetensors) and use md.data.Dataset.from_tensor_slices."
       for n in ("train.Example", "train.Features", "train.Feature", "io.parse_single_example", "io.parse_example",
                 "io.FixedLenFeature", "io.VarLenFeature", "io.TFRecordWriter")},
    "tf.io.read_file": "Read the bytes with open(path, 'rb').read() (md.io.gfile.GFile in TensorFlow's spelling).",
    **{f"tf.io.decode_{kind}": f"Decode the file's bytes with torchvision.io.decode_{kind} or PIL.Image.open."
       for kind in ("jpeg", "png", "image")},
    **{f"tf.summary.{n}": "For the graph use torch.utils.tensorboard.SummaryWriter.add_graph(model, example_input); "
                          "for a trace, torch.profiler with tensorboard_trace_handler."
       for n in ("trace_on", "trace_export", "trace_off")},
}


def torch_equivalent(name: str, tf_name: str = "") -> str | None:
    """``"torch.einsum"`` for ``"einsum"``: the first torch namespace holding a callable of that name.

    A TensorFlow module (``tf.linalg``) maps to torch's module of that name; ``tf.random.normal``
    and other renamed ops map through ``_TORCH_RENAMED`` (torch names them otherwise).
    """
    if tf_name in _TORCH_RENAMED:
        return _TORCH_RENAMED[tf_name]
    for home in _TORCH_HOMES:
        module = importlib.import_module(home)
        if callable(getattr(module, name, None)):
            return f"{home}.{name}"
    if tf_name == f"tf.{name}" and isinstance(getattr(torch, name, None), types.ModuleType):
        return f"torch.{name}'s functions"
    return None


def missing_attribute(module: str, name: str, tf_name: str) -> AttributeError:
    """The error for ``module.name``: what multidev covers and, where torch has it, what to call."""
    if name.startswith("__"):
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    torch_name = None if tf_name in _OTHER_WAYS else torch_equivalent(name, tf_name)
    method = " (or the tensor method)" if torch_name and torch_name.endswith(f".{name}") else ""
    hint = _OTHER_WAYS.get(tf_name) or (f"Tensors are torch tensors: call {torch_name}{method} instead."
            if torch_name else "multidev implements TensorFlow's multi-device system and the tensor ops its "
            "distributed-training docs use; for other ops use torch's equivalent.")
    return AttributeError(f"module {module!r} has no attribute {name!r} (TensorFlow's {tf_name} is not part of "
                          f"multidev). {hint}")
