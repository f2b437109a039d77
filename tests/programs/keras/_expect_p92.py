"""Expectations of the keras.io programs p92+ (keras9) for ``test_keras_programs.py``: the kinds and reasons, as
there (``docs/keras3_parity.md``, "keras.io programs p92+"). ``EXPECT_P74_ON`` joins them to p74-p91's."""

from __future__ import annotations

from tests.programs.keras._expect_p74 import EQUAL, RUNS, differs, fails
from tests.programs.keras._expect_p84 import EXPECT_P74_ON as _EXPECT_P74_P91
from tests.programs.keras._expect_p84 import K3_NO_CALL

OWN_QUEUE = ("each replica compares the pairs of the images it sees and draws its own augmentations (p90's "
             "reasons), and the support-set queue, a keras.Variable(trainable=False) written with assign in "
             "train_step, keeps one copy per replica, each replica pushing its own projections (aggregation 'none': "
             "TensorFlow 2.21's Keras 3 does the same, tests/keras/tf_2.21_variable_queue.json); the per-example "
             "c_loss vector train_step returns is the replicas' mean of their halves (40 numbers, 80 on one device); "
             "the fine-tuned model's copies stay equal")
FIRST_IMAGE = ("the example's PSNR metric is the PSNR of the FIRST image of the batch (tf.image.psnr(...)[0]): each "
               "replica measures the first image of its half and the metric averages the two, as on TensorFlow's "
               "MirroredStrategy; the losses, val_loss and predict_step's image equal one device")
SUMMED_STEP = ("md.keras applies TensorFlow's rule to a model's own train_step (p16, p58): the four hand-written losses "
               "are means over each replica's own images, and the replicas' gradients are summed, so 2 replicas take "
               "twice one device's gradient; Adam divides most of that out, leaving its epsilon's share (weights off "
               "by ~2e-5; checked: with the gradient's loss divided by num_replicas_in_sync md.keras equals one "
               "device); the logged losses are the replicas' mean, equal to one device's")
RAW_TOTAL = ("md.keras divides a Keras loss called in a replica's own train_step by the replica count (TensorFlow's "
             "rule: training equals one device, p40's HALF_TRACKER), so the raw `total_loss` the step returns logs "
             "half one device's on 2 replicas; the teacher, the student's predictions and accuracies equal one device "
             "(test_trains_as_one_device_and_logs_half_its_raw_loss)")
EXPECT_P92 = {
    # get_weights / set_weights / SGD in cross-replica context: every copy follows (copies_spread 0)
    "p92_reptile": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p93_nnclr": {"keras3": fails("unable to automatically build", K3_NO_CALL), "md2": differs(OWN_QUEUE),
                  "k3md2": fails("unable to automatically build", K3_NO_CALL)},
    "p94_edsr": {"keras3": RUNS, "md2": differs(FIRST_IMAGE), "k3md2": differs(FIRST_IMAGE)},
    "p95_zero_dce": {"keras3": RUNS, "md2": differs(SUMMED_STEP), "k3md2": EQUAL},
    "p96_video_classification": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # mask input, best checkpoint
    "p97_consistency_training": {"keras3": fails("unable to automatically build", K3_NO_CALL),
                                 "md2": differs(RAW_TOTAL),
                                 "k3md2": fails("unable to automatically build", K3_NO_CALL)},
}
EXPECT_P74_ON = {**_EXPECT_P74_P91, **EXPECT_P92}
