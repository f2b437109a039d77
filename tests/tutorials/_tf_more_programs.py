"""TensorFlow's keras/regression, keras/overfit_and_underfit, keras/text_classification,
structured_data/imbalanced_data and structured_data/time_series tutorials, written once for ``tf`` =
TensorFlow or multidev.

``python tests/tutorials/_tf_more_programs.py tf|md [name,...]`` prints one JSON dict
``{program: {observation: value}}`` (``tests/tutorials/test_tf_more_tutorials.py``); with
``TUTORIAL_TRACEBACK=1`` an observed exception's traceback goes to stderr. Programs that
take ``replicas`` run on one device ("<name>/1") and under a MirroredStrategy over 2 logical CPUs
("<name>/2": the seed's two added lines, the model built and compiled in ``strategy.scope()``).
"""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _tf_core_common as common  # noqa: E402  (chooses tf or multidev from sys.argv)
import _tf_regression  # noqa: E402
import _tf_structured  # noqa: E402
import _tf_text  # noqa: E402
import _tf_time_series  # noqa: E402

MODULES = [_tf_regression, _tf_structured, _tf_time_series, _tf_text]


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
    for module in MODULES:
        for program in module.PROGRAMS:
            if only and program.__name__ not in only:
                continue
            results[program.__name__] = _observe(program)
        for program in getattr(module, "REPLICATED", ()):
            if only and program.__name__ not in only:
                continue
            for replicas in (1, 2):
                results[f"{program.__name__}/{replicas}"] = _observe(program, replicas)
    print(json.dumps(results, default=repr))


if __name__ == "__main__":
    main()
