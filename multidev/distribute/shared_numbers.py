"""Refuse a step function that adds into a Python number of its enclosing function or module
(``nonlocal correct; correct += (pred == y).sum().item()``, ``global total; total += y.size(0)``) when
several replicas run it.

Each DDP rank has its own variable and counts its own half; replicas are threads of one process sharing
one variable. They would count the global batch (what DDP's script prints after its own all-reduce), but
``correct += expr`` reads ``correct`` before evaluating ``expr`` and writes after, and torch releases the
GIL inside ``expr``'s ops: another replica's whole ``+=`` can run in between and be overwritten. Measured
on 2 logical CPUs under load: one epoch in 200 (8 steps each) lost a replica's count, a silently wrong
number. Checked once per run on the step function's own code (the names it writes with ``STORE_DEREF`` /
``STORE_GLOBAL``, decoded once per code object) and the values those names hold (a plain assignment,
``alpha = log_alpha.exp().item()``, is refused too: one replica's value overwrites the one the others
read): ``int`` and ``float`` (not ``bool``: a flag set to the same value by every replica loses nothing),
numpy numbers alike.

Not seen here: numbers in a dict or an object the step writes (``stats["correct"] += ...``,
``meter.sum += val * n``), or writes in functions the step calls; those stay the program's to guard
(docs/ddp_port.md, "Metrics computed in the step").
"""

from __future__ import annotations

import dis
import numbers
from types import CodeType
from typing import Any, Callable

_writes: dict[CodeType, tuple[tuple[str, ...], tuple[str, ...]]] = {}   # code -> (nonlocal, global) names
_added: dict[CodeType, frozenset] = {}   # code -> the names it writes with an augmented assignment (``+=``)


def _written_names(code: CodeType) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names = _writes.get(code)
    if names is None:
        free, glob, added, previous = set(), set(), set(), None
        for ins in dis.get_instructions(code):
            if ins.opname == "STORE_DEREF" and ins.argval in code.co_freevars:
                free.add(ins.argval)
            elif ins.opname == "STORE_GLOBAL":
                glob.add(ins.argval)
            if ins.opname in ("STORE_DEREF", "STORE_GLOBAL") and previous is not None and (
                    previous.opname.startswith("INPLACE_")
                    or previous.opname == "BINARY_OP" and previous.argrepr.endswith("=")):
                added.add(ins.argval)
            previous = ins
        names = _writes[code] = (tuple(sorted(free)), tuple(sorted(glob)))
        _added[code] = frozenset(added)
    return names


def _is_count(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _refusal(fn: Callable, kind: str, name: str, value: Any) -> ValueError:
    if name not in _added.get(fn.__code__, ()):   # ``alpha = log_alpha.exp().item()``: an overwrite
        return ValueError(
            f"{getattr(fn, '__qualname__', fn)!s} writes {kind} {name!r} (now {value!r}) inside strategy.run on "
            f"several replicas: replicas are threads sharing that one variable (each DDP rank has its own), so "
            f"`{name} = ...` in one replica overwrites the value the others read next, in the threads' order. "
            f"Make it a local of the step, computed where it is used (cleanrl's SAC: `alpha = "
            f"log_alpha.exp().item()` in the step, with `log_alpha` an md.Variable), return it from the step "
            f"and assign it outside, or keep one value per replica "
            f"(`values[md.distribute.get_replica_context().replica_id_in_sync_group] = ...`).")
    return ValueError(
        f"{getattr(fn, '__qualname__', fn)!s} writes {kind} {name!r} (now {value!r}) inside strategy.run on "
        f"several replicas: replicas are threads sharing that one variable (each DDP rank has its own), and "
        f"`{name} += ...` read-modify-writes it unguarded, so a replica's addition can be lost. Return the "
        f"value from the step and add it up outside: `{name} += float(strategy.reduce('SUM', value, "
        f"axis=None))` (the global count, DDP's after its all-reduce), or keep one number per replica "
        f"(`counts[md.distribute.get_replica_context().replica_id_in_sync_group] += ...`).")


def check(fn: Callable) -> None:
    """Raise ``ValueError`` if ``fn`` writes a number of its enclosing function or module."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if not isinstance(code, CodeType):
        return
    free, glob = _written_names(code)
    if free and fn.__closure__:
        cells = dict(zip(code.co_freevars, fn.__closure__))
        for name in free:
            try:
                value = cells[name].cell_contents
            except ValueError:   # an empty cell
                continue
            if _is_count(value):
                raise _refusal(fn, "the enclosing function's variable", name, value)
    for name in glob:
        value = fn.__globals__.get(name)
        if _is_count(value):
            raise _refusal(fn, "the module variable", name, value)
