"""multidev.bench.update_hops measures how a gradient travels through multidev's files in one step
(issue 26 item 5): its report must be sane, and the target of the update-engine redesign is policed here."""

from __future__ import annotations

import inspect
import json
import os
import threading

import pytest
import torch

from multidev.bench import update_hops
from tests.conftest import ROOT, run_fresh


@pytest.fixture(scope="module")
def report():
    """The tool's JSON report: all scenarios, one fresh interpreter (it configures 2 logical CPUs)."""
    proc = run_fresh("import sys; from multidev.bench import update_hops; sys.exit(update_hops.main(['--json']))",
                     timeout=180)
    return json.loads(proc.stdout)


def _file(function: str) -> str:
    return function.split(":")[0]


def test_report_counts_hops_between_real_files_in_every_scenario(report):
    names = [s["scenario"] for s in report["scenarios"]]
    assert sorted(names + list(report["skipped"])) == sorted(update_hops.SCENARIOS)
    assert {"md_keras_fit", "torch_optim"} <= set(names)
    assert all(why for why in report["skipped"].values())  # a skip says why
    for s in report["scenarios"]:
        hops = [e for e in s["edges"] if e["kind"] != "mode"]
        crossings = [e for e in hops if e["kind"] == "crossing"]
        assert s["replicas"] == 2 and s["crossings"] == len(crossings) >= 1
        assert s["hops"] == len(hops) == s["crossings"] + s["entries"]
        assert len({(e["caller"], e["callee"]) for e in hops}) == len(hops)  # distinct edges
        assert sum(s["entries_by_library"].values()) == s["entries"]
        for edge in hops:
            assert os.path.isfile(os.path.join(ROOT, "multidev", _file(edge["callee"]))), edge
        for edge in crossings:
            caller, callee = _file(edge["caller"]), _file(edge["callee"])
            assert caller != callee and {caller, callee} <= set(s["files"]), edge
            assert os.path.isfile(os.path.join(ROOT, "multidev", caller)), edge
        for edge in hops:
            if edge["kind"] == "entry":
                assert _file(edge["caller"]).split("/")[0] in ("torch", "keras"), edge
        assert len(s["files"]) >= 2
        pairs = {(_file(e["caller"]), _file(e["callee"])) for e in crossings}
        for a, b in s["back_and_forth"]:
            assert (a, b) in pairs and (b, a) in pairs
        # the region holds the reduction: the replicas' gradients meet in the collectives
        assert any(_file(e["callee"]).startswith("collectives/") for e in hops), s["scenario"]
    torch_optim = next(s for s in report["scenarios"] if s["scenario"] == "torch_optim")
    # torch.optim's step is torch's own: multidev is reached only through torch's hooks
    assert any(e["caller"].startswith("torch/optim/") for e in torch_optim["edges"] if e["kind"] == "entry")


def test_table_and_list_show_every_scenario_and_edge(report):
    table = update_hops.format_table(report)
    for s in report["scenarios"]:
        assert f"{s['scenario']:14s} {s['hops']:5d} {s['crossings']:10d}" in table
    listing = update_hops.format_list(report).splitlines()
    assert len(listing) == sum(1 + len(s["edges"]) for s in report["scenarios"])
    first = report["scenarios"][0]["edges"][0]
    assert listing[1].endswith(f"{first['caller']} -> {first['callee']}")


def test_definitions_of_caller_kinds_and_function_names():
    assert update_hops._where(threading.__file__)[0] == "plumbing"
    assert update_hops._where("<string>")[0] == "plumbing"
    assert update_hops._where(inspect.getfile(torch.optim.Optimizer)) == ("library", "torch/optim/optimizer.py")
    assert update_hops._where(os.path.join(ROOT, "multidev", "values", "context.py")) == ("multidev", "values/context.py")
    assert update_hops._where(update_hops.__file__)[0] == "program"

    def outer():
        return [_code() for _ in range(1)][0]

    def _code():
        import sys
        return sys._getframe(1).f_code

    assert update_hops._function(outer()).endswith("outer")  # a list comprehension counts as its function


def test_unknown_scenario_is_refused_with_the_valid_names(capsys):
    with pytest.raises(SystemExit) as exc:
        update_hops.main(["--scenarios", "md_keras_fit,nope"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "['nope']" in err and "torch_optim" in err


#: Issue 26's target: at most 10 file-crossing calls between multidev's files per step, none back and forth.
CROSSINGS_AT_MOST = {"md_keras_fit": 10, "torch_optim": 10, "keras3_fit": 10}


def test_update_path_meets_the_issue_26_target(report):
    """File-crossing calls within the target per scenario and no file pair both ways; the library
    entries (torch's autograd and optimizer hooks, Keras's methods) are the seams, reported apart."""
    over = {s["scenario"]: (s["crossings"], s["back_and_forth"]) for s in report["scenarios"]
            if s.get("skipped") is None and (s["crossings"] > CROSSINGS_AT_MOST[s["scenario"]] or s["back_and_forth"])}
    assert not over
