"""Run the conformance cases on one side (TensorFlow or multidev) and compare observations.

Both sides load the same case files (``cases/*.py``), configure two logical CPUs before anything
else, run every ``case_*`` function in file order with the module as its argument, and record its
return value (or ``{"raises": <exception type name>}``).
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import os
import sys

CASES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases")


def case_modules() -> list:
    """The case files, imported (they import nothing heavy), in name order. CASES_DIR is not put on
    sys.path: its ``keras.py`` would shadow the real Keras for every later import in the process."""
    if "conformance_support" not in sys.modules:
        spec = importlib.util.spec_from_file_location("conformance_support",
                                                      os.path.join(CASES_DIR, "conformance_support.py"))
        support = importlib.util.module_from_spec(spec)
        sys.modules["conformance_support"] = support
        spec.loader.exec_module(support)
    modules = []
    for file in sorted(os.listdir(CASES_DIR)):
        if file.endswith(".py") and file != "conformance_support.py":
            spec = importlib.util.spec_from_file_location(f"conformance_{file[:-3]}", os.path.join(CASES_DIR, file))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            modules.append((file[:-3], module))
    return modules


def all_cases() -> list:
    """``[(case_id, function)]`` in file order, then source order."""
    out = []
    for stem, module in case_modules():
        functions = [(name, f) for name, f in vars(module).items() if name.startswith("case_") and inspect.isfunction(f)]
        functions.sort(key=lambda item: item[1].__code__.co_firstlineno)   # stable: generated cases keep their order
        out.extend((f"{stem}.{name[5:]}", f) for name, f in functions)
    return out


def observe(fn, module, bases: bool = False) -> object:
    """What case ``fn`` returns on ``module``, or the type of what it raised (with ``bases``, also the
    names of the classes it derives from: multidev's error may be TensorFlow's type and another)."""
    from conformance_support import val
    try:
        return val(fn(module))
    except Exception as exc:
        if not bases:
            return {"raises": type(exc).__name__}
        return {"raises": type(exc).__name__, "bases": [k.__name__ for k in type(exc).__mro__[1:-2]]}


def run_all(module, only: set | None = None, bases: bool = False) -> dict:
    return {case_id: observe(fn, module, bases) for case_id, fn in all_cases() if only is None or case_id in only}


def same(a, b, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """Observations are equal: floats within tolerance, bools never equal to numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and math.isnan(a):
            return isinstance(b, float) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict) and "raises" in a and "raises" in b:
        a_types, b_types = [a["raises"], *a.get("bases", [])], [b["raises"], *b.get("bases", [])]
        return a["raises"] in b_types or b["raises"] in a_types   # an error of both types catches as either
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys() == {"approx", "atol"}:
        return same(a["approx"], b["approx"], 0.0, max(a["atol"], b["atol"]))   # conformance_support.approx
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rtol, atol) for k in a)
    return a == b
