"""keras.io programs run three ways (Keras 3 one device, md.keras on 2 replicas, Keras 3 on multidev on
2 replicas): what runs unchanged and equals one device is asserted; what does not is an xfail naming why.

The runs happen in two fresh interpreters at once (each configures 2 logical CPUs); see ``_harness.py``. Timings
are not asserted: ``benchmarks/keras_programs.py`` measures them (benchmarks/RESULTS.md).
Non-strict xfails are cases another helper of issue 29 fixes in parallel ("kcorrect": md.keras
correctness; "k3": Keras 3 on multidev): they turn into passes after the merge.
"""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

from tests.programs.keras._expect_p110 import EXPECT_P74_ON   # p74+ (keras7), p84+, p92+, p98+, p110+
from tests.programs.keras._harness import PROGRAMS, report_in_parallel

if importlib.util.find_spec("keras") is None:
    pytest.skip("Keras 3 is not installed (pip install 'multidev[keras3]')", allow_module_level=True)

EQUAL = ("equal", None)                       # runs unchanged, distributed over 2 copies, equals one device
RUNS = ("runs", None)                         # the one-device Keras 3 baseline runs


def differs(reason):                          # runs and is distributed, but differs from one device by design
    return ("differs", reason)


def fails(match, reason):                     # does not run; the error says ``match``
    return ("fails", (match, reason))


def pending(owner, reason):                   # should be EQUAL; another helper's fix is expected
    return ("pending", f"[{owner}] {reason}")


BN = ("BatchNormalization normalises each replica's half of the batch (TensorFlow's MirroredStrategy does "
      "the same; SyncBatchNormalization would not)")
NEEDS_TF = "Keras 3's text_dataset_from_directory/TextVectorization need TensorFlow, which is not installed"
NEEDS_TS = ("Keras 3's timeseries_dataset_from_array makes a tf.data (or Grain) dataset: TensorFlow is not installed; "
            "md.keras has its own (md.keras.utils.timeseries_dataset_from_array)")


MASKED_MEAN = ("Keras 3 divides a masked loss by the unmasked entries of the batch it sees (losses/loss.py "
               "apply_mask): each replica by its own count, then weighted by its share of the examples, as Keras 3 "
               "on TensorFlow's MirroredStrategy does (checked with tensorflow 2.21: a mask_zero Embedding model's "
               "losses differ there too); without padding the program equals one device")
OWN_DRAWS = ("the GAN step's label noise (keras.random.uniform over the labels of the concatenated fake and real "
             "images) and the discriminator's Dropout on those images are draws over twice the replica's slice, not "
             "rows of the global batch: each replica draws its own (per-replica seed streams), as tf.keras's replicas "
             "draw on TensorFlow's MirroredStrategy (Keras 3 on TensorFlow draws the same numbers on every "
             "replica); without those two draws the program equals one device")
OWN_DRAWS_MD = ("the GAN step's label noise and the discriminator's Dropout are drawn over the concatenated fake "
                "and real images (twice the replica's slice, not the global batch's rows): md.keras makes every "
                "replica's draw in replica order from the same generator, so the numbers are one device's but "
                "given to other rows; its latent vectors are one device's")
BATCH_TENSORDOT = ("keras.io's RecommenderNet contracts the batch axis too (ops.tensordot(user_vector, "
                   "movie_vector, 2) adds one number summed over the whole batch to every prediction), so each "
                   "replica sums its own half, as TensorFlow's MirroredStrategy does; with a per-example dot "
                   "product (ops.sum(u * m, axis=1, keepdims=True)) both front ends equal one device")
K3_NO_TAPE = ("the example needs Keras 3's TensorFlow backend (tf.GradientTape): on torch, np.squeeze(action_probs) "
              "refuses a tensor that requires grad on one device too (torch's own error)")
GRAPH_DROPOUT = ("the GNN's Dropout draws over the graph's nodes (not the batch) on every replica: each replica its own "
                 "mask, as on TensorFlow's MirroredStrategy; with dropout_rate=0 (p39) md.keras equals one device "
                 "(Keras 3 equals it as printed: a call without `training` runs the nested Dropout in inference mode)")
HALF_TRACKER = ("md.keras divides a Keras loss called in a replica's own train_step by the replica count (TensorFlow's "
                "rule: training equals one device), so the guide's loss_tracker.update_state(loss) logs half the loss on "
                "2 replicas, as Keras 3 on TensorFlow 2.21's MirroredStrategy does (checked: 0.1485 vs 0.2971 on one "
                "device, mae equal); Keras 3 on multidev weights the tracker by each replica's share instead")
NO_ACCUM = ("md.keras's optimizers do not take Keras 3's gradient_accumulation_steps (NotImplementedError naming "
            "the way out: Keras 3 on multidev, which trains it as one device; TensorFlow 2.21's Keras 3 refuses it "
            "under MirroredStrategy)")
K3_LIST_PLUS = ("the example needs Keras 3's TensorFlow backend: `rewards_sample + gamma * keras.ops.amax(...)` adds a "
                "Python list to a tensor, which torch refuses on one device too (TensorFlow converts the list; md.keras's "
                "eager results do as TensorFlow's)")
K3_NO_CALL = ("Keras 3 on torch cannot fit the MAE on one device either: its symbolic build of the compiled metrics "
              "calls the model, which has no `call` (Keras's own RuntimeError)")
ENDPOINT_LOSS = ("kerasio5: md.keras now logs the loss of a model compiled with only an optimizer, as Keras 3 does (its "
                 "history had no `loss`, so this was equal by omission): the endpoint's BinaryCrossentropy, added with "
                 "add_loss on 2 replicas, is scaled 1/replicas by the Loss and again as an added loss, as Keras 3 on "
                 "TensorFlow 2.21's MirroredStrategy scales it (checked: the same logged loss and weights with SGD), "
                 "so md.keras logs half and steps with half the gradient (Adam: the same step); training equal: below")
K3_INIT_LAST = ("the example's Router and Switch assign sublayers before super().__init__(): Keras 3's torch backend "
                "refuses that on one device too (torch's \"cannot assign module before Module.__init__() call\"); md.keras "
                "takes it, as Keras on TensorFlow does")
GLOBAL_TOKENS = ("the Switch reshapes every batch to num_tokens_per_batch = batch_size * num_tokens_per_example, a "
                 "constant of the global batch: each replica has half the tokens, and the reshape says so (TensorFlow's "
                 "MirroredStrategy fails the same way); p52 uses the replica's batch")
K3_SWITCH_SHAPE = ("Keras 3 on torch infers the functional model's shapes at a batch of 83 examples, which the Switch's "
                   "constant reshape refuses, on one device too (\"Could not automatically infer the output shape\" of "
                   "the TransformerBlock) (TensorFlow infers it symbolically; md.keras runs it at "
                   "the batch the reshape names)")
OWN_ROUTING = ("each replica routes its own tokens: its experts' capacity is the replica batch's, and its Router's "
               "add_loss is the load-balancing loss of its tokens (a product of two means over them, not a sum over "
               "examples), counted 1/replicas, as TensorFlow's MirroredStrategy counts an added loss (TensorFlow 2.21 "
               "itself stops earlier on 2 replicas: the Router's unseeded keras.random.uniform makes the global "
               "SeedGenerator's variable inside its tf.function; p51 fails there as here)")
SUMMED_ADD_LOSS = ("the CTCLayer add_loss'es the batch's per-example losses, which Keras sums: each replica adds its "
                   "rows' sum, scaled 1/replicas as TensorFlow's MirroredStrategy scales added losses, so 2 replicas log "
                   "half one device's loss and step with half its gradient (Adam takes the same step); with "
                   "ops.mean(loss) both front ends equal one device (LSTM dropout included): below")
K3_GAN_BUILD = ("Keras 3 on torch cannot fit the ConditionalGAN on one device either: the model has no `call`, so "
                "fit's symbolic build fails (Keras's own RuntimeError, on TensorFlow too; the torch guide's GAN sets "
                "self.built = True, as p21 and p58 do; p56's CycleGan has a call)")
RAW_HALF = ("the train_step returns its raw Keras losses (MeanSquaredError, MeanAbsoluteError), which md.keras "
            "divides by the replica count inside a replica's own step (TensorFlow's rule, HALF_TRACKER): 2 replicas "
            "log half, as Keras 3 on TensorFlow's MirroredStrategy scales a Loss called in the step; training equals "
            "one device: below")
BATCH_PAIRS = ("the supervised contrastive loss compares every pair of examples in the batch a replica sees (its "
               "logits are the replica's features times their transpose), and " + BN[0].lower() + BN[1:] +
               ": stage 1 differs as on TensorFlow's MirroredStrategy; the frozen encoder stays frozen in stage 2: below")
OWN_TOKEN_MEAN = ("the example's CustomNonPaddingTokenLoss.call returns ops.sum(loss) / ops.sum(mask), the mean over the "
                  "real tokens of the batch it sees: each replica divides by its own half's tokens (then 1/replicas), "
                  "as on TensorFlow's MirroredStrategy, so 2 replicas differ where the halves' token counts do; with "
                  "sample_weight=mask and a built-in loss (p61) both front ends equal one device")
K3_PAIRS_BUILD = ("Keras 3.15 on torch cannot fit keras.io's metric learning as printed, on one device either: before the first "
                  "step it builds the model symbolically on the PyDataset's item, a (2, classes, h, w, 3) array taken as x, "
                  "which the model's input refuses (Keras's own ValueError; its TensorFlow backend runs the example: checked "
                  "with tensorflow 2.21); md.keras runs it on one device")
PAIRS_AXIS = ("the PyDataset's item stacks anchors and positives on its leading axis, which fit takes as the batch: 2 "
              "replicas get one of each, and the step's data[1] is out of range (TensorFlow's MirroredStrategy splits it "
              "the same way); p68 yields the pairs as a tuple of two batches")
OWN_CLASSES = ("with the pairs as two batches, each replica's similarity matrix compares its own classes' anchors and "
               "positives only (a softmax over half the candidates), as on TensorFlow's MirroredStrategy")
K3_CONST_GRAPH = ("Keras 3 on torch cannot fit keras.io's token learner as printed, on one device either: the position "
                  "embedding, Embedding(...)(ops.arange(...)) called on a tensor, is a constant of the functional graph that "
                  "keeps its autograd history, and the second step's backward fails (torch's own error); md.keras holds the "
                  "constant without it; p73 (ops.stop_gradient of it: the same numbers) runs on both")
EXPECT = {**EXPECT_P74_ON,   # p74+: _expect_p74.py, p84+: _expect_p84.py (docs/keras3_parity.md)
    "p01_mnist_convnet": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p02_text_classification_from_scratch": {"keras3": fails("tensorflow", NEEDS_TF), "md2": EQUAL,
                                             "k3md2": fails("tensorflow", NEEDS_TF)},
    "p03_bidirectional_lstm_imdb": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p04_timeseries_classification": {"keras3": RUNS, "md2": differs(BN), "k3md2": differs(BN)},
    "p05_structured_data": {"keras3": RUNS, "k3md2": EQUAL, "md2": EQUAL},
    "p06_functional_api": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p07_training_with_built_in_methods": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p08_custom_train_step_in_torch": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p09_subclassing": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p10_serialization_and_saving": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p11_transfer_learning": {"keras3": RUNS, "md2": EQUAL,
        "k3md2": differs(BN + "; after unfreezing, Keras 3 (on one device too) runs the nested base model's "
                              "BatchNormalization in training mode despite training=False, so each replica "
                              "updates its moving statistics from its half")},
    "p12_custom_loop_on_strategy": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p13_text_classification_with_transformer": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p14_imbalanced_classification": {"keras3": RUNS, "md2": EQUAL, "k3md2": differs(
        "Keras 3 (torch backend) on one device reports the validation counts under the training keys "
        "(fn/fp/tn/tp; apparently result() hands back the state tensor itself, which the validation pass then resets and refills); multidev reports the "
        "training counts, which sum to the 96 training examples")},
    "p15_image_classification_from_scratch": {"keras3": RUNS, "md2": differs(BN),   # with synchronized BN
                                              "k3md2": differs(BN)},   # both equal: test_keras3_augment.py
    "p16_variational_autoencoder": {"keras3": RUNS, "k3md2": EQUAL, "md2": differs(
        "md.keras applies TensorFlow's rule to a model's own train_step: the replicas' gradients are summed, so a "
        "loss averaged over each replica's own examples (the VAE's ops.mean) gives N times one device's gradient "
        "(tf.distribute asks for the loss to be scaled by 1/num_replicas; Keras 3 on multidev weights each "
        "replica's share instead); with that scaling md.keras equals one device")},
    "p17_knowledge_distillation": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p18_collaborative_filtering_movielens": {"keras3": RUNS, "md2": differs(BATCH_TENSORDOT),
                                              "k3md2": differs(BATCH_TENSORDOT)},
    "p19_lstm_character_level_text_generation": {"keras3": RUNS, "k3md2": EQUAL, "md2": EQUAL},
    "p20_neural_machine_translation_with_transformer": {"keras3": RUNS, "k3md2": differs(MASKED_MEAN), "md1": RUNS,
                                                        "md2": EQUAL},   # md.keras sums the valid counts
    "p21_dcgan_overriding_train_step": {"keras3": RUNS, "md2": differs(OWN_DRAWS_MD), "k3md2": differs(OWN_DRAWS)},
    "p22_custom_training_loop_in_torch": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # k3: keras3_loss_scale
    "p23_denoising_autoencoder": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p24_fine_tuning_frozen_batch_norm": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p25_pretrained_word_embeddings": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p26_wgan_gp": {"keras3": RUNS, "k3md2": EQUAL, "md2": EQUAL},   # raw d_loss/g_loss: the replicas' mean, as Keras 3
    "p27_timeseries_weather_forecasting": {"keras3": fails("tensorflow", NEEDS_TS), "md2": EQUAL,   # md.keras's own
                                           "k3md2": fails("tensorflow", NEEDS_TS)},
    # p28+: kerasio3 (docs/keras3_parity.md, "keras.io programs p28+")
    "p28_distributed_training_with_torch": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p29_distributed_training_with_tensorflow": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p30_writing_your_own_callbacks": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p31_customizing_saving_and_serialization": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p32_custom_build_and_config": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p33_understanding_masking_and_padding": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p34_siamese_contrastive": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # synchronized BN on 2 replicas
    "p35_vision_transformer": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p36_actor_critic": {"keras3": fails("requires grad", K3_NO_TAPE), "md2": EQUAL,
                         "k3md2": fails("requires grad", K3_NO_TAPE)},
    "p37_mixup": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p38_gnn_citations": {"keras3": RUNS, "md2": differs(GRAPH_DROPOUT), "k3md2": EQUAL},
    "p39_gnn_citations_without_dropout": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p40_custom_step_losses_metrics": {"keras3": RUNS, "md2": differs(HALF_TRACKER), "k3md2": EQUAL},
    # p41+: kerasio4 (docs/keras3_parity.md, "keras.io programs p41+")
    "p41_optimizer_options": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # and TF's numbers: below
    "p42_gradient_accumulation": {"keras3": RUNS, "k3md2": EQUAL, "md1": fails("gradient_accumulation_steps", NO_ACCUM),
                                  "md2": fails("gradient_accumulation_steps", NO_ACCUM)},
    "p43_ddpg_pendulum": {"keras3": fails("requires grad", K3_NO_TAPE), "md2": EQUAL,
                          "k3md2": fails("requires grad", K3_NO_TAPE)},
    "p44_deep_q_network": {"keras3": fails("concatenate list", K3_LIST_PLUS), "md2": EQUAL,
                           "k3md2": fails("concatenate list", K3_LIST_PLUS)},
    "p45_gradient_centralization": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p46_keras_recipes_endpoint_and_embeddings": {"keras3": RUNS, "md2": differs(ENDPOINT_LOSS), "k3md2": EQUAL},
    "p49_mean_teacher": {"keras3": RUNS, "md2": differs(HALF_TRACKER + "; the teacher, consistency and "
                                                        "evaluation equal one device: below"), "k3md2": EQUAL},
    "p50_masked_image_modeling": {"keras3": fails("unable to automatically build", K3_NO_CALL), "md2": EQUAL,
                                  "k3md2": fails("unable to automatically build", K3_NO_CALL)},
    "p48_miniature_gpt": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p47_trainer_pattern": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # md.GradientTape over Keras 3 variables
    # p51+: kerasio5 (docs/keras3_parity.md, "keras.io programs p51+")
    "p51_switch_transformer": {"keras3": fails("before module.__init__", K3_INIT_LAST),
                               "md2": fails("is invalid for input of size", GLOBAL_TOKENS),
                               "k3md2": fails("before module.__init__", K3_INIT_LAST)},
    "p52_switch_transformer_per_replica": {"keras3": fails("calling transformerblock.call", K3_SWITCH_SHAPE),
                                           "md2": differs(OWN_ROUTING),
                                           "k3md2": fails("calling transformerblock.call", K3_SWITCH_SHAPE)},
    "p53_pointnet_regularizers": {"keras3": RUNS, "md2": differs(BN + "; and the T-Net's OrthogonalRegularizer "
                                                                 "sums over the pairs of examples a replica sees: "
                                                                 "TensorFlow's numbers, below"),
                                  "k3md2": differs(BN + "; TensorFlow's numbers: below")},
    "p54_captcha_ocr": {"keras3": RUNS, "md2": differs(SUMMED_ADD_LOSS), "k3md2": differs(SUMMED_ADD_LOSS)},
    "p55_conditional_gan": {"keras3": fails("unable to automatically build", K3_GAN_BUILD), "md2": EQUAL,
                            "k3md2": fails("unable to automatically build", K3_GAN_BUILD)},
    "p56_cyclegan": {"keras3": RUNS, "md2": differs(RAW_HALF), "k3md2": EQUAL},
    "p57_supervised_contrastive": {"keras3": RUNS, "md2": differs(BATCH_PAIRS), "k3md2": differs(BATCH_PAIRS)},
    "p58_simsiam": {"keras3": RUNS, "k3md2": EQUAL, "md2": differs(
        "md.keras applies TensorFlow's rule to a model's own train_step (p16): the loss averaged over each replica's "
        "examples gives 2 replicas twice one device's gradient, as TensorFlow 2.21's MirroredStrategy does (its "
        "numbers: below)")},
    "p59_antirectifier": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p60_ner_transformers": {"keras3": RUNS, "md2": differs(OWN_TOKEN_MEAN), "k3md2": differs(OWN_TOKEN_MEAN)},
    "p61_ner_sample_weights": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    # p62+: kerasio6 (docs/keras3_parity.md, "keras.io programs p62+")
    "p62_compact_convolutional_transformers": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p63_mlp_mixer_fnet_gmlp": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p64_convmixer": {"keras3": RUNS, "md2": differs(BN), "k3md2": differs(BN)},
    "p65_ppo_cartpole": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # the KL early stop: below
    "p66_perceiver": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p67_metric_learning": {"keras3": fails("incompatible with the layer", K3_PAIRS_BUILD),
                            "md2": fails("out of bounds", PAIRS_AXIS),
                            "k3md2": fails("incompatible with the layer", K3_PAIRS_BUILD)},
    "p68_metric_learning_pairs_as_tuple": {"keras3": RUNS, "md2": differs(OWN_CLASSES), "k3md2": differs(OWN_CLASSES)},
    "p69_attention_mil": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # batch_size=1: one replica idle
    "p70_addition_rnn": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p71_lstm_seq2seq": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},
    "p72_token_learner": {"keras3": fails("backward through the graph a second time", K3_CONST_GRAPH), "md2": EQUAL,
                          "k3md2": fails("backward through the graph a second time", K3_CONST_GRAPH)},
    "p73_token_learner_constant_positions": {"keras3": RUNS, "md2": EQUAL, "k3md2": EQUAL},   # RandomCrop: one window
}


@pytest.fixture(scope="module")
def report():
    return report_in_parallel()   # two fresh interpreters at once (each configures 2 logical CPUs)


def _cases():
    for program in PROGRAMS:
        for mode, (kind, detail) in {"md1": RUNS, **EXPECT[program]}.items():   # md.keras's one-device reference
            marks = [pytest.mark.xfail(strict=False, reason=detail)] if kind == "pending" else []
            yield pytest.param(program, mode, kind, detail, marks=marks, id=f"{program}-{mode}")


def test_every_program_has_expectations():
    assert sorted(EXPECT) == PROGRAMS and len(PROGRAMS) >= 12


@pytest.mark.parametrize("program,mode,kind,detail", list(_cases()))
def test_program(report, program, mode, kind, detail):
    run = report[program][mode]
    if kind == "fails":
        match, reason = detail
        assert not run["ok"] and match in run["error"].lower(), run
        return
    assert run["ok"], f"{program} under {mode} did not run: {run['error']} ({run.get('at')})"
    if kind == "runs":
        return
    assert run["copies"] == 2, f"{program} under {mode}: the model's weights are not distributed"
    if kind == "differs":
        assert run["equal"] is False, f"{program} under {mode} now equals one device: update EXPECT ({detail})"
    else:
        assert run["equal"], (f"{program} under {mode} differs from one device at {run['differs_at']} "
                              f"(worst relative difference {run['worst_rel']})")


def test_keras3_one_device_count_metrics_alias_validation_counts(report):   # why p14's k3md2 differs
    one, two = report["p14_imbalanced_classification"]["keras3"], report["p14_imbalanced_classification"]["k3md2"]
    keys = ("fn", "fp", "tn", "tp")
    assert all(one["results"][f"history.{k}"] == one["results"][f"history.val_{k}"] for k in keys)
    for epoch in range(2):
        assert sum(two["results"][f"history.{k}"][epoch] for k in keys) == 96
    for key, value in one["results"].items():   # everything else agrees
        if key.split(".")[-1] not in keys:
            assert value == pytest.approx(two["results"][key], rel=2e-4, abs=2e-5), key


def test_optimizer_options_give_tensorflows_one_device_numbers(report):
    """p41 in every mode gives TF 2.21's one-device losses and weights (clipping, use_ema, its overwrites)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "p41_tensorflow.json")) as f:
        tf = json.load(f)
    for mode in ("keras3", "md1", "md2", "k3md2"):
        got = report["p41_optimizer_options"][mode]["results"]
        for option, want in tf["keras3_one_device"].items():
            for key, value in want.items():   # 7 significant digits recorded
                np.testing.assert_allclose(got[f"{option}.{key}"], value, rtol=2e-6, atol=2e-7,
                                           err_msg=f"{mode} {option} {key}")
    # Where TensorFlow's own replicas differ: Keras 3 on TensorFlow clips each replica's share of the gradient
    # before summing (tf_keras 2.21 sums first, as multidev does); it refuses ema_overwrite_frequency there.
    two, legacy = tf["keras3_two_replicas_loss"], tf["tf_keras_two_replicas_loss"]
    for option in ("clipnorm", "global_clipnorm", "clipvalue"):
        assert not np.allclose(two[option], tf["keras3_one_device"][option]["loss"], rtol=1e-3), option
    assert two["ema_overwrite_frequency"]["raises"] == "RuntimeError"
    for option, loss in legacy.items():
        np.testing.assert_allclose(loss, tf["tf_keras_one_device_loss"][option], rtol=2e-6, err_msg=option)


def test_mean_teacher_trains_as_one_device_and_logs_half_the_summed_loss(report):
    # p49's md2 differs only in the logged `loss` (supervised + weighted consistency: HALF_TRACKER); the teacher's
    # in-step EMA assign writes each replica's copy (md.keras weights have TF's aggregation NONE; SUM doubled it).
    one, two = report["p49_mean_teacher"]["md1"]["results"], report["p49_mean_teacher"]["md2"]["results"]
    for key, value in one.items():
        want = np.asarray(value) / 2 if key == "history.loss" else value
        np.testing.assert_allclose(two[key], want, rtol=2e-4, atol=2e-5, err_msg=key)


def _tensorflows_numbers(report, program, refs, prefix=""):
    """Each ``(mode, reference)`` of ``program`` gives the numbers TF 2.21 recorded for that reference (``p5x_
    tensorflow.json``, 7 significant digits, written by ``_tensorflow_numbers.py``); returns the JSON."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{program[:3]}_tensorflow.json")) as f:
        tf = json.load(f)
    for mode, ref in refs:
        got = report[program][mode]["results"]
        for key, want in tf[ref].items():
            np.testing.assert_allclose(got[prefix + key], want, rtol=1e-4, atol=1e-5, err_msg=f"{mode} {key}")
    return tf


def test_pointnet_regularizers_give_tensorflows_numbers(report):
    """p53's regularized fit (activity_regularizer=OrthogonalRegularizer, kernel_regularizer=L2) gives TF 2.21's
    losses and kernel on one device and on 2 replicas: Keras scales model.losses by 1/replicas in fit, and the
    orthogonal penalty is of the pairs of examples each replica sees. Inference is not compared: Keras 3 on TF keeps
    each replica's own BatchNormalization statistics (aggregation NONE: replica 0's are read), multidev keeps the
    replicas' mean (tf_keras 2's ON_READ MEAN)."""
    tf = _tensorflows_numbers(report, "p53_pointnet_regularizers", (
        ("keras3", "one_device"), ("md1", "one_device"), ("md2", "two_replicas"), ("k3md2", "two_replicas")),
        prefix="regularized.")
    assert not np.allclose(tf["one_device"]["loss"], tf["two_replicas"]["loss"], rtol=1e-2)


def test_simsiam_gives_tensorflows_numbers(report):
    """p58 (two views, stop_gradient, SGD momentum on CosineDecay): every one-device run and Keras 3 on 2 replicas
    give TF 2.21's one-device numbers; md.keras on 2 replicas gives TF's two-replica numbers (twice the gradient)."""
    tf = _tensorflows_numbers(report, "p58_simsiam", (
        ("keras3", "one_device"), ("md1", "one_device"), ("k3md2", "one_device"), ("md2", "two_replicas")))
    assert not np.allclose(tf["one_device"]["encoder"], tf["two_replicas"]["encoder"], rtol=1e-3)


def _equal_but_half(report, program, pairs, halved=lambda key: key.startswith("history.")):
    """Each ``(two, one)`` of ``program``: every result equal, but the ``halved`` keys (the logged losses) half."""
    for two, one in pairs:
        a, b = report[program][two]["results"], report[program][one]["results"]
        assert a.keys() == b.keys() and any(map(halved, b))
        for key, value in b.items():
            want = np.asarray(value) / 2 if halved(key) else value
            np.testing.assert_allclose(a[key], want, rtol=2e-4, atol=2e-5, err_msg=f"{program} {two} {key}")


def test_endpoint_layer_logs_half_its_added_loss_on_two_replicas_as_tensorflow(report):
    # p46's md2 (ENDPOINT_LOSS): the endpoint model's logged loss is half one device's, everything else equal
    _equal_but_half(report, "p46_keras_recipes_endpoint_and_embeddings", (("md2", "md1"),),
                    halved=lambda key: key == "endpoint.loss")


def test_captcha_ocr_trains_as_one_device_and_logs_half_its_summed_loss(report):
    # p54's md2 and k3md2 differ only in the logged losses (SUMMED_ADD_LOSS): predictions, the CTC losses and the
    # greedy decoding equal one device (the LSTMs' dropout masks are one device's, each replica its rows).
    _equal_but_half(report, "p54_captcha_ocr", (("md2", "md1"), ("k3md2", "keras3")))


def test_cyclegan_trains_as_one_device_and_logs_half_its_raw_losses(report):
    # p56's md2 differs only in the raw losses its train_step returns (RAW_HALF): four optimizers, a persistent tape.
    _equal_but_half(report, "p56_cyclegan", (("md2", "md1"),))


def test_supervised_contrastive_encoder_stays_frozen_under_the_new_classifier(report):
    # p57's stage 2: `layer.trainable = False` on the encoder's layers, a classifier compiled again in the same scope
    for mode in ("keras3", "md1", "md2", "k3md2"):
        got = report["p57_supervised_contrastive"][mode]["results"]
        assert got["encoder_moved"] == 0.0 and got["trainable"] == 4, (mode, got["encoder_moved"], got["trainable"])


def test_ppo_takes_its_kl_early_stop_as_one_device(report):
    # p65: the policy loop breaks when the replicas' mean KL passes 1.5 * target_kl, at the same iteration
    one, two = (report["p65_ppo_cartpole"][m]["results"]["policy_iterations"] for m in ("keras3", "k3md2"))
    assert one == two and min(one) < 6


@pytest.mark.parametrize("program,halved", [("p79_ddpm", "history."), ("p97_consistency_training", "history.total")])
def test_trains_as_one_device_and_logs_half_its_raw_loss(report, program, halved):   # DDPM_HALF; p97: RAW_TOTAL
    _equal_but_half(report, program, (("md2", "md1"),), halved=lambda key: key.startswith(halved))
