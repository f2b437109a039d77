"""Shared fixtures: fresh interpreters for configuration tests, GPU marker handling."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A suite started with SIGINT ignored (a background job of a non-interactive shell: `cmd &` in a script)
# hands the ignore down to every child process, which then never raises KeyboardInterrupt, and the Ctrl-C
# tests' children ran on forever. A handler (unlike an ignore) is reset to the default in a child.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_fresh(code: str, *, timeout: float = 120, env: dict | None = None, check: bool = True):
    """Run ``code`` in a fresh Python interpreter (device configuration is per process).

    Returns the CompletedProcess; with ``check`` a non-zero exit fails the test with its output.
    """
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = ROOT + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.setdefault("OMP_NUM_THREADS", "1")
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"fresh interpreter failed (rc={proc.returncode}):\nSTDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}")
    return proc


@pytest.fixture
def fresh():
    """The ``run_fresh`` helper as a fixture."""
    return run_fresh


@pytest.fixture
def pretend_workers(monkeypatch):
    """``pretend_workers(strategy, num_workers, worker_index, gather=None)``: the strategy's injected
    worker collective replaced, for this test, by one posing as worker ``worker_index`` of
    ``num_workers`` (sum and broadcast are identities; ``gather`` defaults to one too)."""
    from multidev.distribute.worker_collective import WorkerCollective

    class PretendWorkers(WorkerCollective):
        spans_processes = False
        num_workers, worker_index = 1, 0   # set per instance below

        def __init__(self, real, num_workers, worker_index, gather):
            self._real, self.num_workers, self.worker_index, self._gather = real, num_workers, worker_index, gather

        timeout_seconds = property(lambda self: self._real.timeout_seconds)
        sum = broadcast = staticmethod(lambda tensor: tensor)

        def gather(self, tensor, axis):
            return tensor if self._gather is None else self._gather(tensor, axis)

        def all_reduce(self, *args):
            return self._real.all_reduce(*args)

        def all_gather(self, *args):
            return self._real.all_gather(*args)

        def broadcast_initial_values(self, primaries):
            return None

    def pretend(strategy, num_workers, worker_index, gather=None):
        real = strategy.extended.worker_collective
        monkeypatch.setattr(strategy.extended, "_workers", PretendWorkers(real, num_workers, worker_index, gather))

    return pretend


TEST_LOGICAL_CPUS = 4


def _register_hypothesis_profiles() -> None:
    """Fuzz-test budgets (tests/fuzz): "ci" by default, "long" with ``--hypothesis-profile=long``."""
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # hypothesis is in the `test` extra; tests/fuzz skips without it
        return
    common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.register_profile("ci", max_examples=150, **common)
    settings.register_profile("long", max_examples=5000, **common)


_register_hypothesis_profiles()


def pytest_configure(config):
    """Split the CPU into 4 logical devices for the in-process tests (multi-replica strategies).

    Configuration is per process and frozen once devices initialise, so it happens here, before any
    test runs; tests of configuration itself run in fresh interpreters (``fresh`` fixture).
    """
    try:
        from hypothesis import settings
    except ImportError:
        pass
    else:  # "ci" unless --hypothesis-profile names another (whichever of us configures last)
        settings.load_profile(config.getoption("hypothesis_profile", None) or "ci")
    import multidev as md

    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * TEST_LOGICAL_CPUS)


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # pragma: no cover - torch import problems surface elsewhere
        return False


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; none is visible on this machine")
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # the marker, not any node named "gpu" (a checkout dir)
            item.add_marker(skip)
