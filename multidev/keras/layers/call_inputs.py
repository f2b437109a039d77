"""Which argument of a layer call is its inputs: the first positional one, or the first parameter of
``call`` passed by its own name (Keras: ``self.attention(x=x)`` where ``call(self, x)``; ``inputs=``
always works). Without it ``Layer.__call__`` has no tensor to build on, cast or take the mask of."""

import inspect

_FIRST_NAME = {}


def _first_param_name(layer_type) -> str:
    if layer_type not in _FIRST_NAME:
        params = list(inspect.signature(layer_type.call).parameters.values())[1:]   # after self
        plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        _FIRST_NAME[layer_type] = params[0].name if params and params[0].kind in plain else "inputs"
    return _FIRST_NAME[layer_type]


def split_inputs(layer, args, kwargs):
    """The call's inputs (popped from ``kwargs`` when passed by name), for ``Layer.__call__``."""
    if args:
        return args[0]
    name = _first_param_name(type(layer))
    for key in (name, "inputs"):
        if key in kwargs:
            return kwargs.pop(key)
    raise ValueError(
        f'Layer "{layer.name}" was called without its inputs: pass them first or by the name of its call()\'s '
        f"first parameter ({name!r}); got only keyword arguments {sorted(kwargs)!r}.")
