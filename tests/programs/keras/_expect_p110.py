"""Expectations of the keras.io programs p110+ (keras11) for ``test_keras_programs.py``: the kinds and reasons, as
there (``docs/keras3_parity.md``, "keras.io programs p110+"). ``EXPECT_P74_ON`` joins them to p74-p109's."""

from __future__ import annotations

from tests.programs.keras._expect_p74 import EQUAL, RUNS, fails
from tests.programs.keras._expect_p98 import EXPECT_P74_ON as _EXPECT_P74_P109

K3_OWN_CALL_INPUTS = ("Keras 3 cannot fit keras.io's earlier GAT on one device either: its fit builds the model by calling "
                      "it on fit's x (the node indices), which its call, taking [node_states, edges], refuses (Keras's "
                      "own error); its own train_step also uses compiled_loss, which Keras 3 removed")
BUILD_FIRST = ("md.keras builds a model before its first step on replicas by calling it on fit's x; this model's call "
               "takes other inputs (its own train_step gives them), so md.keras says to build it in the strategy's "
               "scope before fit (one device: the step builds it, as tf.keras 2 does); with that line (p116) it "
               "equals one device")
EXPECT_P110 = {
    # compute_loss returns a sum over the replica's tokens; a tracker made outside the scope; save/load_model
    "p110_masked_language_modeling": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    # the whole graph on every replica, the replica's half of the node indices as the batch
    "p111_gat_node_classification": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    # overridden trainable_weights, a custom loss returning the mean over a concatenated output
    "p112_mixture_density_network": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    # predict and a Mean made outside the scope, in on_epoch_end
    "p113_sklearn_metric_callback": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    # the seeded notebook run twice must give the same history (the program raises if not); parallel map
    "p114_reproducibility_recipes": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p115_gat_train_step": {"keras3": fails("graphattentionnetwork.call", K3_OWN_CALL_INPUTS),
                            "md2": fails("build it in the strategy's scope before fit", BUILD_FIRST),
                            "k3md2": fails("graphattentionnetwork.call", K3_OWN_CALL_INPUTS)},
    "p116_gat_train_step_built_first": {"keras3": fails("graphattentionnetwork.call", K3_OWN_CALL_INPUTS),
                                        "md2": EQUAL,
                                        "k3md2": fails("graphattentionnetwork.call", K3_OWN_CALL_INPUTS)},
}
EXPECT_P74_ON = {**_EXPECT_P74_P109, **EXPECT_P110}
