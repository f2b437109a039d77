"""``Model.summary()``: Keras's table of layers, output shapes and parameter counts."""

from __future__ import annotations


def _fmt_shape(shape) -> str:
    if isinstance(shape, list):
        return "[" + ", ".join(_fmt_shape(s) for s in shape) + "]"
    return str(tuple(shape))


def _row(fields, positions) -> str:
    line = ""
    for field, pos in zip(fields, positions):
        if line and not line.endswith(" "):
            line += " "
        line += str(field)
        line += " " * (pos - len(line))
    return line


def _param_count(layer):
    """The layer's parameter count; Keras 3's ``0 (unbuilt)`` before its weights exist."""
    return sum(w.numel() for w in layer.weights) if layer.built else "0 (unbuilt)"


def _connected_to(layer, model) -> str:
    names = []
    for node in layer._inbound_nodes:
        if node in model._nodes:
            names += [f"{t._keras_history[0].name}[{t._keras_history[1]}][{t._keras_history[2]}]"
                      for t in node.input_tensors]
    return ", ".join(names)


def print_summary(model, line_length=None, positions=None, print_fn=None) -> None:
    """Print the summary table of ``model``; an unbuilt one's layers with unknown shapes, as Keras 3 does (keras.io's
    programs print a Sequential before its first call; tf.keras 2 raised)."""
    print_fn = print_fn or print
    graph = hasattr(model, "_nodes")
    line_length = line_length or (98 if graph else 65)
    fractions = positions or ([0.33, 0.55, 0.67, 1.0] if graph else [0.45, 0.85, 1.0])
    positions = [int(line_length * p) if p <= 1 else int(p) for p in fractions]
    header = ["Layer (type)", "Output Shape", "Param #"] + (["Connected to"] if graph else [])
    lines = [f'Model: "{model.name}"', "_" * line_length, _row(header, positions), "=" * line_length]
    layers = model._summary_layers() if graph else model.layers
    for i, layer in enumerate(layers):
        try:
            shape = _fmt_shape(layer.output_shape) if type(layer).__name__ != "InputLayer" else f"[{_fmt_shape(layer.output_shape)}]"
        except AttributeError:
            shape = "multiple" if layer.built else "?"
        fields = [f"{layer.name} ({type(layer).__name__})", shape, _param_count(layer)]
        if graph:
            fields.append(_connected_to(layer, model))
        lines.append(_row(fields, positions))
        lines.append("=" * line_length if i == len(layers) - 1 else "_" * line_length)
    trainable = sum(w.numel() for w in model.trainable_weights)
    non_trainable = sum(w.numel() for w in model.non_trainable_weights)
    if not layers:
        lines.append("=" * line_length)
    lines += [f"Total params: {trainable + non_trainable:,}", f"Trainable params: {trainable:,}",
              f"Non-trainable params: {non_trainable:,}", "_" * line_length]
    for line in lines:
        print_fn(line)
