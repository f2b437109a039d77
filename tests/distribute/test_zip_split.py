"""A ``Dataset.zip`` of datasets batched to different sizes (keras.io's semi-supervised SimCLR zips 16 unlabeled
with 4 labeled rows a step) is cut part by part, as TensorFlow 2.21 cuts it (recorded in
zip_split_tensorflow.json): each part along its own dimension 0 in slices of ``ceil(rows / replicas)``, full or
partial batch, whatever the auto-shard policy. multidev refused such an element ("different batch sizes"). In
md.keras each loss of a custom ``train_step`` divides by the global batch of the rows it was given (the labeled
loss by 4, not by the unlabeled part's 16, which trained it with a quarter of its gradient, on one device too).

One fresh interpreter (3 logical CPUs) runs ``_zip_split_program.py``; the tests compare its JSON line."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import run_fresh

HERE = os.path.dirname(__file__)
TF_REL = 1e-7   # Keras 3 keeps SGD's learning rate 0.1 in float32 (0.100000001...): its float64 weights differ so much


@pytest.fixture(scope="module")
def ours():
    proc = run_fresh("from tests.distribute._zip_split_program import main; main()", timeout=300,
                     env={"MULTIDEV_LOGICAL_CPUS": "3"})
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tf():
    with open(os.path.join(HERE, "zip_split_tensorflow.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("case", ["full_16_4", "partial_26_16__7_4"])
def test_each_part_is_cut_on_its_own_as_tensorflow_cuts_it_on_two_replicas(ours, tf, case):
    assert ours["replicas_2"][case] == tf["replicas_2"]["cases"][case]["steps"]


@pytest.mark.parametrize("case", ["full_16_4", "partial_26_16__7_4"])
def test_three_replicas_get_ceil_slices_as_tensorflow_gives_them(ours, tf, case):
    # 16 rows over 3 replicas: 6, 6, 4 (not 6, 5, 5); 4 rows: 2, 2, 0; TensorFlow knows no batch size for the zip
    assert ours["replicas_3"][case] == tf["replicas_3"]["cases"][case]["steps"]


def test_auto_shard_off_spreads_a_partial_part_as_tensorflow(ours, tf):
    # OFF fills one-size partial batches in order; a zip's parts are spread (10 rows: 5 + 5, not 8 + 2)
    assert ours["replicas_2_off_rows"] == tf["replicas_2_auto_shard_off_rows"]


def test_a_zip_of_a_dict_is_cut_per_key(ours):
    assert ours["dict_rows"] == [[{"unlabeled": 8, "labeled": 2}] * 2] * 2


def test_repeat_and_prefetch_after_the_zip_keep_its_parts(ours):
    assert ours["repeat_prefetch_rows"] == [[[8, 2], [8, 2]]] * 4


@pytest.mark.parametrize("case", ["full_16_4", "partial_26_16__7_4"])
def test_fit_with_a_loss_on_each_part_equals_one_device(ours, tf, case):
    for run in (ours["fit_2"][case], ours["fit_1"][case]):
        for name in ("w", "v"):
            assert run[name] == pytest.approx(tf["replicas_2"]["fit"][case + "_one_device"][name], rel=TF_REL)
    assert ours["fit_2"][case]["evaluate"]["ll_mean"] == pytest.approx(ours["fit_1"][case]["evaluate"]["ll_mean"],
                                                                       rel=1e-6)


def test_fit_on_two_replicas_equals_tensorflow_on_even_splits(ours, tf):
    theirs, mine = tf["replicas_2"]["fit"]["full_16_4"], ours["fit_2"]["full_16_4"]
    for name in ("w", "v"):
        assert mine[name] == pytest.approx(theirs[name], rel=TF_REL)
    for name in ("lu", "ll"):   # a returned loss logs as on TensorFlow (replica 0's share of the global mean)
        assert mine["history"][name] == pytest.approx(theirs["history"][name], rel=1e-6)


def test_partial_uneven_split_trains_as_one_device_not_as_tensorflow(ours, tf):
    # 3 labeled rows cut 2 + 1: TensorFlow weights each replica's mean alike (its v differs from one device's);
    # multidev divides by the 3 rows, as for every partial batch (docs/keras3_parity.md)
    theirs = tf["replicas_2"]["fit"]["partial_26_16__7_4"]
    assert theirs["v"] != pytest.approx(tf["replicas_2"]["fit"]["partial_26_16__7_4_one_device"]["v"], rel=1e-3)
    assert ours["fit_2"]["partial_26_16__7_4"]["v"] == pytest.approx(ours["fit_1"]["partial_26_16__7_4"]["v"],
                                                                     rel=1e-12)


def test_second_epoch_and_a_distributed_zip_in_fit(ours):
    for name in ("w", "v"):
        assert ours["fit_2_two_epochs"][name] == pytest.approx(ours["fit_1_two_epochs"][name], rel=1e-12)
        assert ours["fit_2_distributed"][name] == pytest.approx(ours["fit_1"]["partial_26_16__7_4"][name], rel=1e-12)


def test_a_zip_rebuilt_by_map_is_still_refused_with_the_way_out(ours):
    message = ours["mapped_refusal"]
    assert "different batch sizes [4, 16]" in message
    assert "Map each dataset before zipping them" in message and "distribute_datasets_from_function" in message
