"""``md.GradientTape`` and ``md.stop_gradient``: TensorFlow's tape API over torch autograd.

torch records every operation on tensors that require gradients; the tape decides, as TensorFlow's
does, which sources it watched: a trainable variable it accessed (unless
``watch_accessed_variables=False``), a tensor passed to ``watch``, or a tensor computed while it
recorded. Any other source gets None (or zeros), never a gradient torch's graph happens to hold
(``x2 = variable + 1.0`` before the tape; a constant another tape watched). Inside ``strategy.run``
a distributed variable's gradient is the gradient of the calling replica's copy.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import threading
import weakref
from typing import Any, Iterator

import torch

from multidev._core.eager_tensor import gradient_input, readable
from multidev._core.user_warnings import warn_user
from multidev.values import context
from multidev.values.distributed import flatten, pack_as
from multidev.values.variables import DistributedVariable

#: Tensors some tape's ``watch`` made require grad (id -> weak reference): a later tape that did not
#: watch them gives them no gradient, as TensorFlow's constants have none.
_WATCHED_BY_A_TAPE: dict[int, weakref.ref] = {}


#: How many tapes record here now (entered, not exited): a gradient taken while another tape records is
#: itself recorded (create_graph), so the outer tape can differentiate it (higher-order gradients).
_RECORDING: contextvars.ContextVar[int] = contextvars.ContextVar("md_recording_tapes", default=0)

#: The tapes recording here now: a tape entered beside another (the DCGAN tutorial's ``with tf.GradientTape() as
#: gen_tape, tf.GradientTape() as disc_tape:``) shares its graph, so the first ``gradient`` keeps the graph's saved
#: tensors for the other (torch frees them after one backward pass; TF's tapes each keep their own record).
_OPEN_TAPES: contextvars.ContextVar[tuple] = contextvars.ContextVar("md_open_tapes", default=())


class UnconnectedGradients(enum.Enum):
    """What ``gradient`` returns for sources the target does not depend on."""

    NONE = "none"
    ZERO = "zero"


def stop_gradient(input: Any, name: str | None = None) -> torch.Tensor:
    """``input``'s value as a constant: gradients do not flow through it (``tensor.detach()``).

    Example:
        >>> x = torch.tensor(2.0, requires_grad=True)
        >>> md.stop_gradient(x * x).requires_grad
        False
    """
    return (input if isinstance(input, torch.Tensor) else torch.as_tensor(input)).detach()


def _sequence_now() -> int:
    """The autograd node counter of this thread now: nodes created later have larger numbers."""
    with torch.enable_grad():
        probe = torch.zeros((), requires_grad=True) * 1
    return probe.grad_fn._sequence_nr()


def _is_variable(source: torch.Tensor) -> bool:
    return isinstance(source, torch.nn.Parameter)


_VARIABLE_SOURCES: list = []   # (accepts, tensor_of): front ends' variables that are not tensors (Keras 3's)


def register_variable_source(accepts, tensor_of) -> None:
    """Let ``tape.gradient`` take a front end's variables as sources: ``accepts(obj)`` says whether ``obj``
    is one, ``tensor_of(obj)`` gives the tensor its forward reads (``integrations/keras3`` registers
    Keras 3's ``Variable``: its ``_value``, so a ``train_step`` typed with ``md.GradientTape`` trains)."""
    if (accepts, tensor_of) not in _VARIABLE_SOURCES:
        _VARIABLE_SOURCES.append((accepts, tensor_of))


def _source_tensor(source: Any) -> Any:
    """A front end's variable as the tensor autograd knows (anything else unchanged)."""
    if isinstance(source, torch.Tensor):
        return source
    return next((tensor_of(source) for accepts, tensor_of in _VARIABLE_SOURCES if accepts(source)), source)


class GradientTape:
    """Records operations so that ``gradient(target, sources)`` can differentiate them.

    Example:
        >>> x = md.constant(3.0)
        >>> with md.GradientTape() as tape:
        ...     tape.watch(x)
        ...     y = x * x
        >>> tape.gradient(y, x)
        tensor(6.)
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        self._persistent = bool(persistent)
        self._watch_accessed = bool(watch_accessed_variables)
        self._used = False
        self._grad_mode: Any = None
        self._watched: dict[int, torch.Tensor] = {}
        self._flipped: list[torch.Tensor] = []   # the tensors watch() made require grad
        self._target_nodes: list = []
        self._started_at: int | None = None
        self._thread: int | None = None
        self._token: Any = None
        self._was_reset = False
        self._beside: weakref.WeakSet = weakref.WeakSet()   # tapes that recorded while this one did
        self._open_token: Any = None

    def __enter__(self) -> "GradientTape":
        self._grad_mode = torch.enable_grad()
        self._grad_mode.__enter__()
        self._token = _RECORDING.set(_RECORDING.get() + 1)
        open_tapes = _OPEN_TAPES.get()
        for other in open_tapes:
            other._beside.add(self)
            self._beside.add(other)
        self._open_token = _OPEN_TAPES.set(open_tapes + (self,))
        if not torch.compiler.is_compiling():   # (under torch.compile every computed source counts as recorded)
            self._started_at, self._thread = _sequence_now(), threading.get_ident()
        return self

    def __exit__(self, *exc: Any) -> None:
        _OPEN_TAPES.reset(self._open_token)
        _RECORDING.reset(self._token)
        self._token = None
        self._grad_mode.__exit__(*exc)

    def _recorded_by_another(self) -> bool:
        """Whether a tape other than this one records now (this gradient must then be differentiable)."""
        return _RECORDING.get() > (1 if self._token is not None else 0)

    def _graph_shared(self) -> bool:
        """Whether a tape that recorded beside this one may still take gradients through the same graph."""
        return any(other._persistent or not other._used for other in self._beside)

    @contextlib.contextmanager
    def stop_recording(self) -> Iterator[None]:
        """Ops in this block are not recorded: their results carry no gradient (``torch.no_grad``)."""
        with torch.no_grad():
            yield

    def reset(self) -> None:
        """Forget everything recorded so far, as if the tape were exited and entered anew: results
        computed before keep their values but carry no gradient to this tape's sources."""
        self._watched.clear()
        self._target_nodes, self._used, self._was_reset = [], False, True
        if not torch.compiler.is_compiling():
            self._started_at, self._thread = _sequence_now(), threading.get_ident()

    def watch(self, tensor: Any) -> None:
        """Record operations on ``tensor`` (a tensor, variable or nested structure) from now on."""
        for t in flatten(tensor):
            if not isinstance(t, torch.Tensor):
                raise ValueError(f"GradientTape.watch expects tensors or variables, got {t!r}.")
            if not (t.is_floating_point() or t.is_complex()):
                warn_user(f"The dtype of the watched tensor must be floating (e.g. md.float32), got "
                          f"{str(t.dtype).replace('torch.', 'md.')}: it has no gradient.")
                continue
            if not t.requires_grad:
                t.requires_grad_(True)
                self._flipped.append(t)
                if not torch.compiler.is_compiling():
                    _WATCHED_BY_A_TAPE[id(t)] = weakref.ref(t, lambda _, key=id(t): _WATCHED_BY_A_TAPE.pop(key, None))
            self._watched[id(t)] = t

    def watched_variables(self) -> tuple:
        """The variables this tape watched: the ones passed to ``watch`` and, once ``gradient`` ran,
        the trainable variables its targets were computed from.

        Raises:
            RuntimeError: called before ``gradient`` on a tape that watches accessed variables
                (torch records no variable reads; multidev finds them in the targets' graph).
        """
        if self._watch_accessed and not self._used:
            raise RuntimeError("md.GradientTape.watched_variables() lists the variables the targets of "
                               "tape.gradient() were computed from: call it after tape.gradient(...).")
        found = {k: v for k, v in self._watched.items() if _is_variable(v)}
        if self._watch_accessed:
            found.update(self._variables_of(self._target_nodes))
        return tuple(found.values())

    def _records(self, source: Any, tensor: torch.Tensor) -> bool:
        """Whether this tape watched ``source`` (``tensor`` is what autograd knows of it)."""
        if id(source) in self._watched:
            return True
        if isinstance(source, DistributedVariable) or _is_variable(tensor):
            return self._watch_accessed
        if tensor.grad_fn is not None:   # computed: while the tape recorded, or before it (unwatched)
            return not self._knows_order() or tensor.grad_fn._sequence_nr() > self._started_at
        ref = _WATCHED_BY_A_TAPE.get(id(tensor))
        return ref is None or ref() is not tensor   # a torch leaf the program made require grad itself

    def _knows_order(self) -> bool:
        """Whether autograd's node numbers tell what this tape recorded: they count per thread, and a
        tape entered under torch.compile noted none."""
        return self._started_at is not None and self._thread == threading.get_ident() \
            and not torch.compiler.is_compiling()

    def _note_targets(self, targets: list) -> None:
        """Keep the targets' graph roots (a target that is a variable itself: the variable) for
        ``watched_variables``, which walks them only when asked (a walk per step would cost)."""
        self._target_nodes += [t.grad_fn if t.grad_fn is not None else t for t in targets
                               if t.grad_fn is not None or _is_variable(t)]

    def _variables_of(self, roots: list) -> dict[int, torch.Tensor]:
        """The variables the graph below ``roots`` read while this tape recorded, first seen first."""
        found: dict[int, torch.Tensor] = {}
        stack, seen = list(reversed(roots)), set()
        while stack:
            node = stack.pop()
            if isinstance(node, torch.Tensor):
                found.setdefault(id(node), node)
                continue
            if node is None or node in seen:
                continue
            seen.add(node)
            leaf = getattr(node, "variable", None)
            if leaf is not None:
                if _is_variable(leaf):
                    found.setdefault(id(leaf), leaf)
            elif not self._knows_order() or node._sequence_nr() > self._started_at:
                stack.extend(n for n, _ in reversed(node.next_functions))   # recorded by this tape
        return found

    def _recorded_graph(self, targets: list) -> tuple[set, list]:
        """The ids of the variables the targets read while this tape recorded, and the nodes recorded
        before (after a ``reset``) that the recorded part leads to: their gradients are cut to zero."""
        variables = self._variables_of([t.grad_fn if t.grad_fn is not None else t for t in targets
                                        if t.grad_fn is not None or _is_variable(t)])
        cut, stack, seen = [], [t.grad_fn for t in targets if t.grad_fn is not None], set()
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            if getattr(node, "variable", None) is not None:
                continue
            if node._sequence_nr() <= self._started_at:
                cut.append(node)
            else:
                stack.extend(n for n, _ in node.next_functions)
        return set(variables), cut

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None,
                 unconnected_gradients: UnconnectedGradients | str = UnconnectedGradients.NONE) -> Any:
        """Gradient of ``target`` (summed over its elements and list items) w.r.t. ``sources``."""
        if self._used and not self._persistent:
            raise RuntimeError(
                "A non-persistent GradientTape can only be used to compute one set of gradients "
                "(or jacobians); create it with md.GradientTape(persistent=True) to call gradient() again."
            )
        unconnected = _unconnected(unconnected_gradients)
        self._used = True
        targets = [t for t in flatten(target) if t is not None]
        leaves = [_source_tensor(s) for s in flatten(sources)]
        replica_id = context.current_replica_id()
        inputs = [s._view_for(replica_id) if isinstance(s, DistributedVariable) else s for s in leaves]
        for s in inputs:
            if not isinstance(s, torch.Tensor):
                raise ValueError(f"GradientTape.gradient sources must be tensors or variables, got {s!r}.")
        self._note_targets([t for t in targets if isinstance(t, torch.Tensor)])
        grad_outputs = flatten(output_gradients) if output_gradients is not None else [torch.ones_like(t) for t in targets]
        differentiable = [i for i, (s, t) in enumerate(zip(leaves, inputs)) if t.requires_grad and self._records(s, t)]
        grads: list = [None] * len(inputs)
        cut: list = []
        if self._was_reset and self._knows_order():   # only what was recorded since reset() carries gradients
            reached, cut = self._recorded_graph([t for t in targets if isinstance(t, torch.Tensor)])
            differentiable = [i for i in differentiable if not _is_variable(inputs[i]) or id(inputs[i]) in reached]
        if differentiable and any(t.requires_grad for t in targets):
            pairs = [(t, g) for t, g in zip(targets, grad_outputs) if t.requires_grad]
            handles = [node.register_prehook(_zeros) for node in cut]
            try:
                computed = torch.autograd.grad([t for t, _ in pairs], [gradient_input(inputs[i]) for i in differentiable],
                                               grad_outputs=[g for _, g in pairs], allow_unused=True,
                                               retain_graph=self._persistent or self._recorded_by_another() or bool(cut)
                                               or self._graph_shared(),
                                               create_graph=self._recorded_by_another())
            finally:
                for handle in handles:
                    handle.remove()
            for i, g in zip(differentiable, computed):
                grads[i] = readable(g)   # differentiable when another tape records: still .numpy()-able
        if unconnected is UnconnectedGradients.ZERO:
            grads = [torch.zeros_like(s) if g is None else g for s, g in zip(inputs, grads)]
        if not self._persistent:
            self._release_watched()
        return pack_as(sources, grads)

    def _release_watched(self) -> None:
        """A used non-persistent tape's watched tensors no longer require grad, as before ``watch``: TensorFlow's
        tensors are immutable, so keras.io's Deep Dream writes ``img += learning_rate * grads`` after the gradient,
        which torch refused on a leaf that requires grad. Kept while another tape is open (it may record them)."""
        if any(other is not self for other in _OPEN_TAPES.get()) or self._recorded_by_another():
            return
        for t in self._flipped:
            ref = _WATCHED_BY_A_TAPE.get(id(t))
            if t.grad_fn is None and t.requires_grad and ref is not None and ref() is t:
                t.requires_grad_(False)
                _WATCHED_BY_A_TAPE.pop(id(t), None)
        self._flipped = []

    def jacobian(self, target: Any, sources: Any, unconnected_gradients: UnconnectedGradients | str =
                 UnconnectedGradients.NONE, parallel_iterations: Any = None, experimental_use_pfor: bool = True) -> Any:
        """d target[i...] / d source[j...] for every element pair: shape ``target.shape + source.shape``.

        Example:
            >>> x = md.Variable([1.0, 2.0])
            >>> with md.GradientTape() as tape:
            ...     y = x * x
            >>> tape.jacobian(y, x).tolist()
            [[2.0, 0.0], [0.0, 4.0]]
        """
        return self._jacobians(target, sources, unconnected_gradients, batch=False)

    def batch_jacobian(self, target: Any, source: Any, unconnected_gradients: UnconnectedGradients | str =
                       UnconnectedGradients.NONE, parallel_iterations: Any = None,
                       experimental_use_pfor: bool = True) -> Any:
        """Each example's jacobian, the examples independent: shape ``target.shape + source.shape[1:]``.

        Raises:
            ValueError: target and source have different batch sizes (their first dimension).
        """
        if target.shape[:1] != source.shape[:1]:
            raise ValueError(f"Need first dimension of target shape ({tuple(target.shape)}) and source shape "
                             f"({tuple(source.shape)}) to match.")
        return self._jacobians(target, source, unconnected_gradients, batch=True)

    def _jacobians(self, target, sources, unconnected_gradients, batch: bool):
        if self._used and not self._persistent:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one set of gradients "
                               "(or jacobians); create it with md.GradientTape(persistent=True) to call it again.")
        unconnected, self._used = _unconnected(unconnected_gradients), True
        leaves = [_source_tensor(s) for s in flatten(sources)]
        replica_id = context.current_replica_id()
        out = []
        for source in leaves:
            tensor = source._view_for(replica_id) if isinstance(source, DistributedVariable) else source
            rows = None
            if target.requires_grad and tensor.requires_grad and self._records(source, tensor):
                rows = _rows(target, tensor, batch, self._recorded_by_another())
            shape = tuple(target.shape) + tuple(tensor.shape[1:] if batch else tensor.shape)
            if rows is None:
                out.append(torch.zeros(shape, dtype=tensor.dtype) if unconnected is UnconnectedGradients.ZERO
                           else None)
            elif batch:   # rows: (elements of one example's target, batch, source...) -> (batch, target..., source...)
                out.append(rows.movedim(1, 0).reshape(shape))
            else:
                out.append(rows.reshape(shape))
        return pack_as(sources, [readable(j) if j is not None else None for j in out])


def _zeros(grad_outputs: tuple) -> tuple:
    """A node's incoming gradients replaced by zeros (a path recorded before ``reset``)."""
    return tuple(None if g is None else torch.zeros_like(g) for g in grad_outputs)


def _unconnected(value) -> UnconnectedGradients:
    return UnconnectedGradients(value.value if isinstance(value, UnconnectedGradients) else str(value).lower())


def _rows(target: torch.Tensor, source: torch.Tensor, batch: bool, create_graph: bool):
    """The gradient of each target element (with ``batch``: of each element of one example, summed over
    the examples, which are independent) w.r.t. ``source``, stacked; None where they are unconnected."""
    per = target[0].numel() if batch else target.numel()
    eye = torch.eye(per, dtype=target.dtype, device=target.device)
    if batch:
        seeds = eye.reshape((per, 1) + tuple(target.shape[1:])).expand((per,) + tuple(target.shape))
    else:
        seeds = eye.reshape((per,) + tuple(target.shape))
    grads = [torch.autograd.grad(target, source, grad_outputs=seed, retain_graph=True, allow_unused=True,
                                 create_graph=create_graph)[0]
             for seed in seeds]
    if all(g is None for g in grads):
        return None
    return torch.stack([torch.zeros_like(source) if g is None else g for g in grads])


from multidev.forward_accumulator import ForwardAccumulator  # noqa: E402  (md.autodiff.ForwardAccumulator)
