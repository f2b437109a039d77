"""The Keras 3 variants of ``multidev bench train`` (issue 13): each trains 2 steps of every workload
that has a Keras 3 model, keras stays unimported unless one is asked for, and a missing Keras is
named with the extra to install. No timing assertions."""

from __future__ import annotations

import argparse

import pytest
import torch

from multidev.bench import cli, keras3_variants, variants, workloads

NAMES = ["/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"]


@pytest.mark.parametrize("workload", sorted(keras3_variants.MODELS))
@pytest.mark.parametrize("variant", keras3_variants.KERAS3_VARIANTS)
def test_keras3_variant_trains_two_steps(workload, variant):
    from tests.integrations._keras3_env import import_keras3

    import_keras3()  # skip without Keras 3
    w = workloads.get(workload)
    built = variants.build(variant, w, NAMES, torch.device("cpu"))
    assert (built.strategy is None) == (variant == "keras3_own")
    if built.strategy is not None:
        assert built.strategy.num_replicas_in_sync == variants.devices_needed(variant)
    g = torch.Generator().manual_seed(0)
    wall, cpu = built.run([w.make_batch(g, 8) for _ in range(2)])  # small batches keep the test quick
    assert wall > 0 and cpu >= 0


def test_keras3_model_has_the_torch_workloads_size():
    from tests.integrations._keras3_env import import_keras3

    import_keras3()
    for name in keras3_variants.MODELS:
        model = keras3_variants.keras3_model(workloads.get(name))
        assert model.count_params() == workloads.get(name).num_parameters(), name


def test_default_variants_leave_keras_unimported(fresh):
    out = fresh("import sys\nfrom multidev.bench import cli, variants, train_inprocess\n"
                "assert 'keras3_own' in variants.ALL_VARIANTS and 'keras3_own' not in variants.DEFAULT_VARIANTS\n"
                "print('keras' in sys.modules)")
    assert out.stdout.strip().endswith("False")


def test_missing_keras_is_named_with_the_extra(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "keras" else real(name, *a))
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert cli.run(parser.parse_args(["train", "--workloads", "mlp", "--variants", "plain,keras3_fit1"])) == 1
    err = capsys.readouterr().err
    assert "pip install 'multidev[keras3]'" in err and "keras3_fit1" in err


def test_keras3_targets_pair_the_right_variants():
    from multidev.bench import measure, report

    def r(ms):
        return {"step_s": measure.summarize([ms / 1e3]), "batch_size": 256}

    results = {"mlp": {"plain": r(10), "keras3_own": r(20), "keras3_fit1": r(20.6), "keras3_fit2": r(12)}}
    got = {t["target"].split(" <=")[0]: (round(t["ratio"], 3), t["holds"]) for t in report.train_targets(results)}
    assert got == {"Keras 3 fit, MirroredStrategy 1 device": (1.03, True),
                   "Keras 3 fit, MirroredStrategy 2 logical devices": (1.2, False)}
