"""Fuzzed md.config setters (2 fake GPUs, in a fresh interpreter): every call succeeds or raises a
documented error, and after an error the configuration is exactly what it was (no half-applied
change), before initialization and after (where changes must raise RuntimeError)."""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis")
from hypothesis import settings  # noqa: E402

from tests.conftest import run_fresh  # noqa: E402
from tests.devices.fake_gpus import fake_gpus  # noqa: E402

pytestmark = pytest.mark.timeout(600 if settings().max_examples < 1000 else 3600)  # the long profile runs for minutes

CODE = """
import os
from hypothesis import given, settings, strategies as st, HealthCheck
import multidev as md
from tests.fuzz._checks import FAILED, outcome

cfg = md.config
cpu = cfg.list_physical_devices("CPU")[0]
gpus = cfg.list_physical_devices("GPU")
devices = [cpu] + gpus
budget = settings(max_examples=int(os.environ["FUZZ_EXAMPLES"]), deadline=None,
                  suppress_health_check=list(HealthCheck))

def snapshot():
    return (tuple(cfg.get_visible_devices()), tuple(tuple(cfg.get_logical_device_configuration(d) or ()) for d in devices),
            tuple(cfg.get_memory_growth(g) for g in gpus), cfg.get_soft_device_placement(), cfg.get_device_policy())

LIMITS = st.one_of(st.none(), st.integers(-10, 10**12), st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from(["100", True, [1]]))
CONFIGS = st.one_of(st.builds(cfg.LogicalDeviceConfiguration, memory_limit=LIMITS), st.none(), st.integers(0, 3),
                    st.text(max_size=3), st.just(cfg.LogicalDeviceConfiguration))
DEVICES = st.one_of(st.sampled_from(devices), st.none(), st.text(max_size=6), st.integers(-1, 3),
                    st.sampled_from(["GPU:0", "/physical_device:GPU:0", cfg.LogicalDevice("/device:GPU:0", "GPU")]))
CALLS = st.one_of(
    st.tuples(st.just(cfg.set_logical_device_configuration), DEVICES, st.one_of(st.lists(CONFIGS, max_size=4), CONFIGS)),
    st.tuples(st.just(cfg.set_visible_devices), st.one_of(st.lists(DEVICES, max_size=3), DEVICES),
              st.one_of(st.none(), st.sampled_from(["GPU", "CPU", "gpu", "TPU", "", 3]))),
    st.tuples(st.just(cfg.set_memory_growth), DEVICES, st.one_of(st.booleans(), st.none(), st.integers(0, 2), st.text(max_size=3))),
    st.tuples(st.just(cfg.set_soft_device_placement), st.one_of(st.booleans(), st.none(), st.integers(-1, 2), st.text(max_size=3))),
    st.tuples(st.just(cfg.set_device_policy), st.one_of(st.none(), st.sampled_from(["silent", "warn", "explicit", "SILENT", "x", 1]))),
    st.tuples(st.just(cfg.experimental.set_memory_growth), DEVICES, st.booleans()),
)

counts = {"calls": 0, "errors": 0}

def check(call, initialized):
    fn, *args = call
    before = snapshot()
    result = outcome(lambda: fn(*args))
    counts["calls"] += 1
    if result is FAILED:
        counts["errors"] += 1
        after = snapshot()
        assert after == before, f"{fn.__name__}{tuple(args)!r} failed but changed the configuration: {before} -> {after}"

@budget
@given(CALLS)
def before_initialization(call):
    check(call, False)

before_initialization()
# initialize with whatever configuration the fuzzing left (as a program would)
if not cfg.get_visible_devices("CPU"):
    cfg.set_visible_devices([cpu] + list(cfg.get_visible_devices("GPU")))
if len({cfg.get_memory_growth(g) for g in gpus}) > 1:   # initializing would raise "cannot differ" (TF's rule)
    for g in gpus:
        cfg.set_memory_growth(g, True)
names = [d.name for d in cfg.list_logical_devices()]

@budget
@given(CALLS)
def after_initialization(call):
    before = snapshot()[:3]  # devices, logical devices, memory growth freeze; placement options do not (as in TF)
    check(call, True)
    assert snapshot()[:3] == before, f"{call!r} changed the frozen configuration after initialization"
    assert [d.name for d in cfg.list_logical_devices()] == names

after_initialization()
print("COUNTS", counts["calls"], counts["errors"])
"""


def test_config_setters_never_half_apply():
    examples = settings().max_examples
    proc = run_fresh(fake_gpus(2, CODE), timeout=560 if examples < 1000 else 3500, env={"FUZZ_EXAMPLES": str(examples)})
    assert "COUNTS" in proc.stdout
    print(proc.stdout.strip().splitlines()[-1])  # COUNTS <calls> <documented errors>
