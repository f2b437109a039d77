"""Expectations of the keras.io programs p84+ (keras8) for ``test_keras_programs.py``: the kinds and reasons, as
there (``docs/keras3_parity.md``, "keras.io programs p84+"). ``EXPECT_P74_ON`` joins them to p74-p83's."""

from __future__ import annotations

from tests.programs.keras._expect_p74 import BN, EXPECT_P74, EQUAL, RUNS, differs, fails

K3_NO_CALL = ("Keras 3 cannot fit the example's model as printed, on one device either: it has no `call`, so fit's "
              "symbolic build fails (Keras's own RuntimeError, as p55, p79); md.keras runs it")
BARLOW = ("the BarlowLoss normalises each embedding column over the batch it sees (mean and std over axis 0 of the "
          "replica's half) and divides the cross-correlation by the module's global BATCH_SIZE, so each replica's "
          "matrix is another statistic than one device's (as on TensorFlow's MirroredStrategy, where each replica "
          "runs the same train_step on its half); the Loss's call returns a scalar, which Keras leaves unscaled by "
          "the replica count (Keras 3 returns a 0-d loss as is; md.keras too, checked), so the replicas' gradients of "
          "their own statistics are summed and the tracker logs their mean; and " + BN[0].lower() + BN[1:])
VERIFIED_BN = BN + " (checked: with the BatchNormalization layers made identities, both front ends equal one device)"
K3_STRING_LOOKUP = ("Keras 3's StringLookup needs TensorFlow, which is not installed (the example looks the strings "
                    "up inside the model), on one device too")
NO_STRING_INPUTS = ("md.keras refuses Input(dtype='string') with the way out (look the strings up in the dataset, "
                    "before the model): its tensors are torch tensors; p88 does that")
ZIP_PAIRS = ("the train dataset zips an unlabeled dataset batched by 16 with a labeled one batched by 4, cut part by "
             "part as TensorFlow's MirroredStrategy cuts it (8 + 8 and 2 + 2 rows, tests/distribute/test_zip_split.py): "
             "the NT-Xent loss compares the pairs of the 10 images a replica sees and each replica draws its own "
             "augmentations, by design (as on TensorFlow); the baseline equals one device and the probe loss divides "
             "by the 4 labeled rows, so only the contrastive statistics and what the pretrained encoder gives "
             "fine-tuning differ (checked: c_loss 2.43 vs 3.06, the log of 10 and 20 candidates)")
OWN_PAIRS = ("with each replica's own zipped batches (8 unlabeled + 2 labeled rows), the NT-Xent loss compares the "
             "pairs of images a replica sees and each replica draws its own augmentations, by design (as on "
             "TensorFlow's MirroredStrategy); the two optimizers, the probe and the fine-tuning run")
K3_DISTRIBUTED_INPUT = ("Keras 3's fit takes no multidev distributed dataset (its data adapters do not know it: "
                        "\"Unrecognized data type\"), and p90's model has no `call` for Keras 3 anyway")
EXPECT_P84 = {
    "p84_barlow_twins": {"keras3": fails("unable to automatically build", K3_NO_CALL), "md2": differs(BARLOW),
                         "k3md2": fails("unable to automatically build", K3_NO_CALL)},
    "p85_involution": {"keras3": RUNS, "md2": differs(VERIFIED_BN), "k3md2": differs(VERIFIED_BN)},   # nested predict
    "p86_tabtransformer": {"keras3": RUNS, "md2": differs(VERIFIED_BN), "k3md2": differs(VERIFIED_BN)},
    "p87_wide_deep_cross": {"keras3": fails("requires tensorflow", K3_STRING_LOOKUP),
                            "md1": fails("no string inputs", NO_STRING_INPUTS),
                            "md2": fails("no string inputs", NO_STRING_INPUTS),
                            "k3md2": fails("requires tensorflow", K3_STRING_LOOKUP)},
    "p88_wide_deep_cross_ids": {"keras3": RUNS, "md2": differs(VERIFIED_BN), "k3md2": differs(VERIFIED_BN)},
    "p89_memory_efficient_embeddings": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # compiled outside the scope
    "p90_semisupervised_simclr": {"keras3": fails("unable to automatically build", K3_NO_CALL),
                                  "md2": differs(ZIP_PAIRS),
                                  "k3md2": fails("unable to automatically build", K3_NO_CALL)},
    "p91_simclr_per_replica_batches": {"keras3": fails("unrecognized data type", K3_DISTRIBUTED_INPUT),
                                       "md2": differs(OWN_PAIRS),
                                       "k3md2": fails("unrecognized data type", K3_DISTRIBUTED_INPUT)},
}
EXPECT_P74_ON = {**EXPECT_P74, **EXPECT_P84}
