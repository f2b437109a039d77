"""Expectations of the keras.io programs p74+ (keras7) for ``test_keras_programs.py``: the kinds and reasons, as
there (``docs/keras3_parity.md``, "keras.io programs p74+")."""

from __future__ import annotations

RUNS, EQUAL = ("runs", None), ("equal", None)
BN = ("BatchNormalization normalises each replica's half of the batch (TensorFlow's MirroredStrategy does "
      "the same; SyncBatchNormalization would not)")


def differs(reason):
    return ("differs", reason)


def fails(match, reason):
    return ("fails", (match, reason))


K3_NDARRAY_TENSOR = ("Keras 3 on torch cannot run keras.io's integrated gradients as printed, on one device either: "
                     "`(img_input - baseline) * avg_grads` multiplies a numpy array by a torch tensor, which torch refuses "
                     "(\"unsupported operand type(s) for *: 'numpy.ndarray' and 'Tensor'\"; TensorFlow converts the array, "
                     "and so do md.keras's results)")
K3_DDPM_BUILD = ("Keras 3 cannot fit keras.io's DDPM as printed on one device either: the DiffusionModel has no `call`, so "
                 "fit's symbolic build fails (Keras's own RuntimeError, as p55); md.keras runs it")
DDPM_HALF = ("the DDPM step returns its raw compiled loss (`self.loss(noise, pred_noise)`, a MeanSquaredError), which "
             "md.keras divides by the replica count inside a replica's own step (TensorFlow's rule, RAW_HALF): 2 replicas "
             "log half; the per-example timesteps and noise are one device's rows, so the network, its EMA copy and their "
             "predictions equal one device: below")
K3_STRING_LOOKUP = ("Keras 3's StringLookup needs TensorFlow, which is not installed (the example looks the census "
                    "strings up before the model); md.keras has its own")
FOREST_BN = (BN + "; the trees' feature masks (the global np.random.choice) are one device's, and without the "
             "BatchNormalization md.keras on 2 replicas equals one device (checked with the layer replaced by Identity)")
K3_ADAPT_DATASET = ("Keras 3 on torch cannot adapt a Normalization on a dataset without TensorFlow (its adapt tests "
                    "`isinstance(data, tf.data.Dataset)`: \"This requires the tensorflow module\"), on one device too; "
                    "md.keras adapts on its md.data.Dataset")
GLOBAL_BATCH_SHAPES = ("keras.io's DDIM step draws its noises and diffusion times with the module's global `batch_size` "
                       "in their shapes: each replica holds half the images, and `signal_rates * images` refuses the "
                       "broadcast, a loud failure (TensorFlow's MirroredStrategy meets the same shapes; not checked "
                       "there); p83 takes the batch from the images")
DDIM_PAIRS = (BN + "; and the KID metric is a kernel estimate over the pairs of images each replica sees (as on "
              "TensorFlow's MirroredStrategy, where each replica updates the metric with its own batch); with the "
              "BatchNormalization replaced by Identity every loss, the normalizer's adapted mean, the network and "
              "its EMA copy equal one device, and only the validation KID differs")
EXPECT_P74 = {
    "p74_timeseries_anomaly_detection": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # Dropout after Conv1D
    "p75_timeseries_transformer_classification": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p76_grad_cam": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # activation = None; d(pred)/d(conv output)
    "p77_integrated_gradients": {"keras3": fails("unsupported operand", K3_NDARRAY_TENSOR), "md2": EQUAL,
                                 "k3md2": fails("unsupported operand", K3_NDARRAY_TENSOR)},
    "p78_deep_dream": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # img += ... after the tape's gradient
    "p79_ddpm": {"keras3": fails("unable to automatically build", K3_DDPM_BUILD), "md2": differs(DDPM_HALF),
                 "k3md2": fails("unable to automatically build", K3_DDPM_BUILD)},
    "p80_neural_decision_forest": {"keras3": fails("requires tensorflow", K3_STRING_LOOKUP), "md2": differs(FOREST_BN),
                                   "k3md2": fails("requires tensorflow", K3_STRING_LOOKUP)},
    "p81_grn_vsn": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # sample weights from a 3-tuple dataset
    "p82_ddim": {"keras3": fails("requires the tensorflow module", K3_ADAPT_DATASET),
                 "md2": fails("must match the size", GLOBAL_BATCH_SHAPES),
                 "k3md2": fails("requires the tensorflow module", K3_ADAPT_DATASET)},
    "p83_ddim_replica_batch": {"keras3": fails("requires the tensorflow module", K3_ADAPT_DATASET),
                               "md2": differs(DDIM_PAIRS),
                               "k3md2": fails("requires the tensorflow module", K3_ADAPT_DATASET)},
}
