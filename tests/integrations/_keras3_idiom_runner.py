"""What ``_keras3_idioms_program.py`` and ``_keras3_more_idioms_program.py`` share: each idiom run on one device
and on 2 replicas in a fresh working directory from seed 0, its observation made JSON (numbers as float64
lists), or the exception's type and message; one JSON dict printed. Imported after the program set the backend
and the logical devices."""

import json
import os
import tempfile

import keras
import numpy as np


def num(value):
    return np.asarray(keras.ops.convert_to_numpy(value), "float64").tolist()


def jsonable(value):
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    return num(value)


def run_idioms(all_idioms, names):
    """Print ``{"1": {idiom: observation}, "2": {...}}`` for the idioms named (all without names)."""
    idioms = [i for i in all_idioms if not names or i.__name__ in names]
    results = {}
    for replicas in (1, 2):
        results[str(replicas)] = out = {}
        for idiom in idioms:
            os.chdir(tempfile.mkdtemp())
            keras.utils.set_random_seed(0)
            try:
                out[idiom.__name__] = jsonable(idiom(replicas))
            except Exception as e:  # the observation is the exception's type and message
                out[idiom.__name__] = {"raises": type(e).__name__, "message": str(e)[:300]}
    print(json.dumps(results))
