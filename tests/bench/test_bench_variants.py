"""The benchmark's pieces in process: every workload trains under the strategy variants (on the
test session's logical CPUs), and the statistics / report helpers compute what they say."""

from __future__ import annotations

import pytest
import torch

from multidev.bench import measure, report, variants, workloads


@pytest.mark.parametrize("workload", sorted(workloads.WORKLOADS))
@pytest.mark.parametrize("variant", ["plain", "one_device", "mirrored_2", "fit_mirrored_2"])
def test_every_workload_runs_under_each_kind_of_variant(workload, variant):
    w = workloads.get(workload)
    built = variants.build(variant, w, ["/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"], torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    batch = [w.make_batch(g, 8)]  # a small batch keeps the test quick
    wall, cpu = built.run(batch)
    assert wall > 0 and cpu >= 0


def test_seed_workload_has_the_documented_size():
    assert workloads.get("text_conv").num_parameters() == 332_856
    assert 4_000_000 < workloads.get("mlp").num_parameters() < 4_500_000


def test_unknown_workload_and_too_few_devices_are_named():
    with pytest.raises(ValueError, match="valid workloads"):
        workloads.get("resnet")
    with pytest.raises(ValueError, match="needs 4 logical devices"):
        variants.build("mirrored_4", workloads.get("mlp"), ["/cpu:0"], torch.device("cpu"))


def test_statistics_helpers():
    s = measure.summarize([3.0, 1.0, 2.0])
    assert s["median"] == 2.0 and s["spread"] == 1.0
    assert measure.rotated(["a", "b", "c"], 1) == ["b", "c", "a"]
    assert measure.slope([0, 1, 2, 3], [5, 7, 9, 11]) == pytest.approx(2.0)
    assert measure.rss_mb() > 0 and measure.peak_rss_mb() >= measure.rss_mb() * 0.5


def _result(ms: float, batch: int = 32) -> dict:
    return {"step_s": measure.summarize([ms / 1e3]), "peak_mb": 100.0, "batch_size": batch}


def test_targets_compare_the_documented_pairs():
    results = {"text_conv": {"plain": _result(10), "mirrored_1": _result(10.2), "fit_mirrored_1": _result(11),
                             "mirrored_2": _result(11), "ddp_2proc": _result(8), "mwms_2proc": _result(9)}}
    got = {t["target"].split(" <=")[0]: (round(t["ratio"], 3), t["holds"]) for t in report.train_targets(results)}
    assert got == {"MirroredStrategy 1 device, custom loop": (1.02, True), "MirroredStrategy 1 device, fit": (1.1, False),
                   "MirroredStrategy 2 logical devices": (1.1, True), "MultiWorkerMirroredStrategy 2 processes": (1.125, False)}
    table = report.train_table(results)
    assert "| text_conv | mirrored_1 | 10.20 |" in table and "3200" in table  # 32 examples / 10 ms


def test_bus_bandwidth_follows_the_nccl_tests_formula():
    rows = [{"path": "extended", "replicas": 4, "bytes": 16 * 2**20, "seconds": measure.summarize([0.01])}]
    (row,) = report.collective_rows(rows, memcpy_bps=2e9)
    assert row["algbw"] == pytest.approx(16 * 2**20 / 0.01)
    assert row["busbw"] == pytest.approx(row["algbw"] * 1.5)
    assert row["vs_memcpy"] == pytest.approx(row["busbw"] / 2e9)
    (target,) = report.collective_targets([row])
    assert target["holds"] == (row["vs_memcpy"] >= 0.8)


def test_in_process_rows_carry_the_shared_memory_bound():
    rows = [{"path": p, "replicas": n, "bytes": 2**24, "seconds": measure.summarize([0.01])}
            for p, n in (("gradient_buckets", 2), ("gradient_buckets", 4), ("extended", 2), ("process_collective", 2))]
    bounds = [r["memory_bound"] for r in report.collective_rows(rows, memcpy_bps=1e10)]
    assert bounds == [pytest.approx(0.5), pytest.approx(0.375), pytest.approx(2 / 3), None]
    assert "| 0.375 |" in report.collectives_table(report.collective_rows(rows, memcpy_bps=1e10))
