"""Run the multidev side of the conformance cases in this (fresh) interpreter and print the
observations as JSON on stdout's last line (tests/conformance/test_conformance.py reads it)."""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import multidev as md  # noqa: E402

from harness import run_all  # noqa: E402


def main() -> None:
    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    only = set(sys.argv[1:]) or None
    observed = run_all(md, only, bases=True)
    sys.stdout.write("\n" + json.dumps(observed, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
