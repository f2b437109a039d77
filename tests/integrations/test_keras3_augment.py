"""Keras 3's random augmentation layers and seeded ``keras.random`` draws over the batch in ``fit`` on 2 replicas
give one device's numbers: the global batch's draw, each replica its rows (``integrations/keras3_random.py``).

Before, each replica drew its own slice: augmentation layers (a ``SeedGenerator`` each) from per-replica streams
(independent, not one device's), and ``keras.random.normal(shape, seed=42)`` the same rows on both replicas
(two halves holding the same images came out identical: correlated noise, a silently wrong run).
md.keras (``md_*`` cases, ``multidev/keras/batch_draw.py``): its unseeded ``RandomFlip``/``RandomRotation`` and
``md.keras.random.normal(seed=42)`` gave both halves the same flips, angles and noise, and its ``Dropout`` the same
mask (torch's per-replica streams start alike, as DDP ranks'); seeded layers shared one generator between the
replicas' threads (rows in thread order). Now one device's draws as well. ``md_dropout_uneven`` also covers md.keras's
``Flatten`` on an empty slice (a last batch of 1 on 2 replicas), which raised "cannot reshape tensor of 0 elements".
"""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

from tests.conftest import run_fresh

if importlib.util.find_spec("keras") is None:
    pytest.skip("Keras 3 is not installed (pip install 'multidev[keras3]')", allow_module_level=True)

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_keras3_augment_program.py")
CASES = ["augment_seeded", "augment_unseeded", "flip_only", "normal_int_seed", "normal_seed_generator",
         "augment_uneven", "sampling_evaluate_predict", "md_augment_seeded", "md_augment_unseeded", "md_normal_int_seed", "md_dropout",
         "md_dropout_uneven"]   # *_uneven: batches of 5 split [3, 2], the last one [1, 0] (replica 1 idle)


@pytest.fixture(scope="module")
def observed():
    proc = run_fresh(f"import runpy; runpy.run_path({PROGRAM!r}, run_name='__main__')", timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_case_ran(observed):
    assert list(observed) == CASES + ["p15_synchronized_bn"]


@pytest.mark.parametrize("front", ["keras3", "md"])
def test_keras_io_image_classification_equals_one_device_but_for_per_replica_batch_norm(observed, front):
    # tests/programs/keras/p15 (augmentation inside the model) differs on 2 replicas only by BatchNormalization's
    # per-replica moments: with synchronized=True it is one device's run, on both front ends
    assert observed["p15_synchronized_bn"][front]["equal"], observed["p15_synchronized_bn"][front]


@pytest.mark.parametrize("case", CASES)
def test_replicas_halves_are_one_devices_augmentations(observed, case):
    one, two = observed[case]["one"], observed[case]["two"]
    assert len(one["batches"]) == len(two["batches"]) == 4   # 2 epochs of 2 global batches (uneven: 1 of 4)
    for step, (a, b) in enumerate(zip(one["batches"], two["batches"])):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a), err_msg=f"{case}: global batch {step}")
    for a, b in zip(one["weights"], two["weights"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("case", [c for c in CASES if not c.endswith("_uneven")])
def test_the_two_halves_are_not_augmented_alike(observed, case):
    # Each global batch's halves hold the same 4 images: different draws make them differ (4 coin flips
    # alone could agree by chance, hence every step at once).
    assert max(observed[case]["two"]["halves"]) > 0.05


def test_a_vaes_sampling_draws_one_devices_noise_in_evaluate_and_predict_too(observed):
    one, two = observed["sampling_evaluate_predict"]["one"], observed["sampling_evaluate_predict"]["two"]
    np.testing.assert_allclose(two["evaluate"], one["evaluate"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(two["predict"], one["predict"], rtol=1e-5, atol=1e-7)   # (the trained weights' rounding)
    # the noise itself is one device's: a per-replica stream would move predictions by ~0.1, not by rounding

