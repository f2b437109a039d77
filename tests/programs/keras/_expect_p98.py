"""Expectations of the keras.io programs p98+ (keras10: vision and generative) for ``test_keras_programs.py``: the
kinds and reasons, as there (``docs/keras3_parity.md``, "keras.io programs p98+"). ``EXPECT_P74_ON`` joins them to
p74-p97's."""

from __future__ import annotations

from tests.programs.keras._expect_p74 import EQUAL, RUNS, differs, fails
from tests.programs.keras._expect_p84 import K3_NO_CALL, VERIFIED_BN
from tests.programs.keras._expect_p92 import EXPECT_P74_ON as _EXPECT_P74_P97

K3_PIXEL_CE = ("Keras 3 on torch cannot train the example as printed, on one device either: the backward of its "
               "sparse categorical crossentropy over (H, W) pixels fails in torch ('grad_input must be contiguous', "
               "NllLoss2DBackward0; torch 2.13); md.keras trains it")
K3_NUMPY_LEFT = ("Keras 3 on torch cannot sample as printed, on one device either: `probs - keras.random.uniform(...)` "
                 "subtracts a torch tensor from a numpy array, which torch refuses (TensorFlow converts; md.keras's "
                 "draws outside layers are eager tensors that take it); p101 reads the draw into numpy")
K3_TRIPLE = ("Keras 3 cannot fit the example as printed, on one device either: it reads the unlabeled (anchor, "
             "positive, negative) batch as (x, y, sample_weight) and builds the model on the anchors alone ('expects "
             "3 named input(s)'); md.keras hands train_step the batch as it is")
SUMMED_VQ = ("md.keras applies TensorFlow's rule to a model's own train_step (p16, p95): the reconstruction loss "
             "and the quantizer's add_loss are means over each replica's own images and the replicas' gradients are "
             "summed, so 2 replicas take twice one device's gradient; Adam divides most of it out (codebook off by "
             "~1e-3 relative; checked: with the gradient's loss divided by num_replicas_in_sync md.keras equals one "
             "device); the md.Variable codebook kept as a layer attribute trains on both")
OWN_NEGATIVES = ("each replica draws its negatives by shuffling its own half of the labels (`tf.random.shuffle(y)` "
                 "in train_step, as TensorFlow's replicas do), and each FFDense's own optimizer sums the replicas' "
                 "gradients of their per-replica mean goodness loss (TensorFlow's rule: twice one device's); the "
                 "loss_var/loss_count counters (aggregation none) count one device's 4 layer updates on every copy")
EXPECT_P98 = {
    "p98_oxford_pets_unet": {"keras3": fails("grad_input must be contiguous", K3_PIXEL_CE), "md2": differs(VERIFIED_BN),
                             "k3md2": fails("grad_input must be contiguous", K3_PIXEL_CE)},
    # DepthToSpace from ops.shape (each replica's batch), a callback predicting one image, best weights reloaded
    "p99_super_resolution_sub_pixel": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    # the masked kernel's assign in every replica's call (tests/keras/test_kernel_assign_in_replicas.py)
    "p100_pixelcnn": {"keras3": fails("unsupported operand type(s) for -", K3_NUMPY_LEFT), "md2": EQUAL,
                      "k3md2": fails("unsupported operand type(s) for -", K3_NUMPY_LEFT)},
    "p101_pixelcnn_numpy_draws": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p102_vq_vae": {"keras3": fails("unable to automatically build", K3_NO_CALL), "md2": differs(SUMMED_VQ),
                    "k3md2": fails("unable to automatically build", K3_NO_CALL)},
    # the per-triplet loss vector's gradient is the sum over the replica's triplets: equal (its BatchNormalization
    # runs in inference mode: the step calls the network without `training`, as Keras 3)
    "p103_siamese_triplet": {"keras3": fails("exception encountered when calling siamesemodel.call()", K3_TRIPLE),
                             "md2": EQUAL,
                             "k3md2": fails("exception encountered when calling siamesemodel.call()", K3_TRIPLE)},
    "p104_3d_image_classification": {"keras3": RUNS, "md2": differs(VERIFIED_BN), "k3md2": differs(VERIFIED_BN)},
    "p105_forward_forward": {"keras3": fails("unable to automatically build", K3_NO_CALL),
                             "md2": differs(OWN_NEGATIVES),
                             "k3md2": fails("unable to automatically build", K3_NO_CALL)},
}
EXPECT_P74_ON = {**_EXPECT_P74_P97, **EXPECT_P98}
