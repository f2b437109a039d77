"""The conformance suite: TensorFlow's own tf.distribute tests, ported, give TensorFlow's answers.

Every case in ``cases/`` runs on multidev in one fresh interpreter (two logical CPUs, as the
recorder configures TensorFlow) and its observation is compared with TensorFlow 2.21's, recorded
in ``tf_2.21.json`` by ``record_tf.py``. A case multidev cannot pass yet is listed in ``KNOWN``
with the reason (and in docs/architecture.md, "Where multidev differs"); it must still fail, so a
fix shows up as an unexpected pass to move out of the table.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import run_fresh
from harness import all_cases, same

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = os.path.join(HERE, "tf_2.21.json")

#: case id -> why multidev differs (each also in docs/architecture.md).
KNOWN: dict[str, str] = {
    "cross_device.bad_cross_device_ops": "MirroredStrategy refuses a cross_device_ops that is no CrossDeviceOps at "
                                         "construction (TypeError); TF 2.21 accepts it and fails when reducing",
    "cross_device.unknown_device": "MirroredStrategy refuses a device that does not exist at construction "
                                   "(ValueError); TF 2.21 accepts it and fails when placing",
    "cross_device.gather_nested": "gather of a nested structure gathers each PerReplica leaf; TF 2.21 returns the "
                                  "first replica's value of each",
    "aggregation.sum_assign_python_zero_in_replicas": "a SUM write of the constant 0 in replicas writes 0 (the "
                                                      "exception TF's reduce makes for zero); TF 2.21 then fails "
                                                      "with AttributeError",
    "merge_call.get_cross_replica_context": "multidev offers md.distribute.get_cross_replica_context; tf.distribute "
                                            "2.21 has no public one (AttributeError)",
    "reduce.all_reduce_plain_python": "multidev all-reduces Python numbers; TF 2.21 fails on them (AttributeError: "
                                      "no dtype)",
    "reduce.reduce_mirrored_variable": "multidev reduces a MirroredVariable's copies; TF 2.21 fails an internal "
                                       "assertion",
    "run.mismatched_structures": "multidev refuses every mismatched replica structure (ValueError and "
                                 "AssertionError); TF 2.21 wraps a leaf and a tuple into one PerReplica",
    "variables.assign_returns": "a cross-replica assign returns the variable (same values, chaining works); TF "
                                "returns a Mirrored of the copies that delegates to the first",
    "variables.float_of_variable": "float() of a MirroredVariable gives its value, as of any md.Variable; TF 2.21 "
                                   "raises TypeError",
    "variables.names_of_copies": "a distributed variable's copies are plain torch tensors (torch's Tensor.name is "
                                 "read-only), not variables named 'w/replica_1:0'",
    "loop_train.slots_made_in_function": "a Keras optimizer whose slots are first made inside a tf.function step on "
                                         "a MirroredStrategy fails in TF 2.21 (InvalidArgumentError: 'You must feed a "
                                         "value for placeholder tensor'); multidev trains (see SAME_AS)",
    "checkpoint_guide.distributed_iterator_position": "md.train.Checkpoint saves a distributed iterator's position "
                                                      "and resumes it; TF 2.21 refuses the eager DistributedIterator "
                                                      "(ValueError: not a trackable object)",
    "loop_values.replica_id_times_float": "replica_id_in_sync_group is an int32 torch tensor and torch promotes "
                                          "int32 * float32 to float32; TF 2.21 refuses the mixed dtypes "
                                          "(InvalidArgumentError)",
    "data_pipeline.reduce_python_initial": "a Python-number initial state of reduce/scan takes the dtype of the "
                                           "result (reduce(0, add) of int64 works); TF 2.21 fixes it at int32 and "
                                           "raises TypeError",
    # the tf.data guide, the Dataset API examples and the Distributed input tutorial, typed as printed
    "data_guide.generator_without_signature": "from_generator without output_signature/output_types reads the "
                                              "structure and dtypes off the first element; TF 2.21 raises TypeError",
    "data_api.bucket_python_int_padding_of_int64": "a Python number as padding_values takes the elements' dtype; "
                                                     "TF 2.21 makes -1 an int32 and raises TypeError for int64 "
                                                     "elements (as data_pipeline.reduce_python_initial)",
    "data_api.bucket_longer_than_last_boundary": "an element too long for pad_to_bucket_boundary raises "
                                                   "InvalidArgumentError (TF's assertion); TF 2.21 wraps it in "
                                                   "InternalError from the group_by_window function",
    "data_api.interleave_map_func_not_a_dataset": "interleave's map_func returning a tensor raises TypeError that "
                                                    "says so; TF 2.21 fails with AttributeError ('_variant_tensor')",
    "data_api.bad_arguments_tf_accidents": "wrong arguments where TF 2.21 fails by accident (rebatch([]): "
                                           "IndexError; concatenate([1]), take_while returning a tuple, "
                                           "with_options(3): AttributeError) or not at all (unsorted "
                                           "bucket_boundaries) raise multidev's InvalidArgumentError/TypeError/"
                                           "ValueError that say what is wrong",
    "input_tutorial.distributed_unbatched_dataset": "experimental_distribute_dataset of an unbatched dataset raises "
                                                "ValueError asking for batch(); TF 2.21 fails with IndexError",
    **{f"distributed_pipeline.{case}": "Keras fit on an uneven last batch ([3, 2], or [4, 1] with auto-sharding "
       "OFF): TF 2.21 averages the replicas' mean losses as equals; md.keras divides by the global batch size, so "
       "the weights are one device's (see SAME_AS; docs/keras3_parity.md)"
       for case in ("fit_partial_batch", "fit_partial_batch_auto_shard_off")},
    "distributed_pipeline.enumerate_after_batch": "experimental_distribute_dataset of batch().enumerate() (a scalar "
                                                  "index per global batch) raises ValueError saying to enumerate "
                                                  "before batch(); TF 2.21 fails with IndexError",
    # guides typed as printed: function, mixed_precision, advanced_autodiff, keras.io's TF training-loop guides
    **{f"function_guide.{case}": "md.function runs its Python body on every call, as tf.config."
       "run_functions_eagerly(True) does (experimental_get_tracing_count still counts TF's traces): " + why
       for case, why in {
           "python_side_effect_once_per_trace": "print runs on each call; TF prints once per trace",
           "external_list_side_effect": "a list.append in the body runs on each call; TF appends once per trace",
           "variable_created_every_call": "a function that makes a variable on every call is refused with "
                                          "ValueError from its second call; TF refuses the first call already "
                                          "(it traces twice to find out)",
           "unused_gather_in_function": "an op whose result is unused still runs (its out-of-range gather raises "
                                        "InvalidArgumentError); TF prunes it from the graph and returns x"}.items()},
    **{case: "Keras 3 on TensorFlow divides a loss computed in a replica by the replica "
       "count (keras/src/losses/loss.py scale_loss_for_distribution) and sums the replicas' gradients; md.keras "
       "keeps the replica's loss (Keras 3 on torch's value) and averages the gradients: the same weights (the "
       "case without _reported_loss), but a custom step's loss metric shows TF's value times the replica count"
       for case in ("keras_loop_guide.fit_compute_loss_two_replicas_reported_loss",
                    "keras_loop_guide.custom_test_step_two_replicas_reported_loss",
                    "keras_gan_guide.gan_two_replicas_reported_loss")},
    **{f"keras_loop_guide.{case}": "model.metrics lists the compiled metrics one by one once they are built "
       "(tests/keras/test_custom_train_step.py asserts it); Keras 3 keeps one compile_metrics entry, which applies "
       "sample_weight only to weighted_metrics: the guide's loop passes sample_weight to every listed metric, so "
       "md's 'mae' is weighted and TF's is not"
       for case in ("fit_sample_weight", "fit_sample_weight_two_replicas")},
    "keras_gan_guide.gan_two_replicas": "TF 2.21 (Keras 3) cannot fit the guide's GAN on a MirroredStrategy "
                                         "(RuntimeError: it builds the model by calling it, and the GAN has no "
                                         "call()); multidev trains it (see SAME_AS)",
    **{f"keras_transfer_guide.{case}": "a base model called with training=False in a functional model stays in "
       "inference mode when fit trains the model, as the guide says and tf.keras 2 does (cases *_tf_keras2: "
       "BatchNormalization's moving statistics kept); Keras 3's functional call overrides the node's training=False "
       "with fit's training=True (keras-team/keras#20285), so TF 2.21 updates them once the base is unfrozen"
       for case in ("typical_workflow_then_fine_tuning", "typical_workflow_then_fine_tuning_two_replicas")},
    "keras_distributed_tutorial.keras3_refuses_the_printed_checkpoint_prefix": "md.keras's ModelCheckpoint accepts "
        "the tutorial's save_weights_only prefix 'ckpt_{epoch}' (tf.keras 2's: a checkpoint that "
        "md.train.latest_checkpoint finds, case tutorial_as_printed_tf_keras2); Keras 3 refuses it (ValueError)",
    "modules_variables_guide.assign_lenient_broadcast_and_tensor_dtype": "md.Variable.assign/assign_add broadcast "
        "a scalar and convert a torch tensor of another dtype (tests/fuzz/test_errors_state.py and the seed "
        "notebook's int64 sums into an int32 variable in tests/distribute/test_variables.py pin it; md.keras's "
        "internals rely on it); TF 2.21 refuses both (ValueError, InvalidArgumentError)",
    # tensorflow.org's generative, customization and text tutorials (cvae, dcgan, autoencoder, custom_layers, word2vec)
    **{f"autoencoder_tutorial.{case}": "a numpy array as the left operand of a Python operator with a tensor on the "
       "right raises TypeError: torch's reflected operators refuse numpy arrays (numpy then says 'Concatenation "
       "operation is not implemented' for +, 'unsupported operand' for -); TF converts the array. Convert it first "
       "(md.constant(x_train) + noise); the other autoencoder cases do"
       for case in ("noise_added_to_numpy_images", "anomaly_normalization_numpy_minus_tensor")},
    "custom_layers_tutorial.my_dense_layer_as_printed": "md.keras's add_weight takes tf.keras 2's name-first "
        "signature (add_weight('kernel', shape=...): case _tf_keras2 gives tf_keras's names) and Keras 3's; Keras 3 "
        "refuses the name given first (ValueError)",
    "custom_layers_tutorial.resnet_block_trained_on_two_replicas": "md.keras's BatchNormalization keeps its moving "
        "statistics ON_READ with MEAN aggregation, as tf.keras 2 (the replicas' mean: case _tf_keras2), moving the "
        "variance toward the biased batch variance as Keras 3; Keras 3 on TF 2.21 writes each replica's own copy "
        "(ON_WRITE, NONE) and reads replica 0's",
    "distributed_pipeline.fit_partial_batch": "distributed_pipeline.fit_partial_batch_one_device",
    "distributed_pipeline.fit_partial_batch_auto_shard_off": "distributed_pipeline.fit_partial_batch_one_device",
    "autoencoder_tutorial.anomaly_detection_25_normal_two_replicas": "TF 2.21 cannot fit tensors of 25 examples "
        "on 2 replicas (InvalidArgumentError: AddN of [13,140] and [12,140]); multidev trains as one device does "
        "(see SAME_AS)",
    "word2vec_tutorial.word2vec_model_repeated_indices": "an index repeated in a batch: TF's Adam gets the "
        "Embedding gradient as IndexedSlices and squares each occurrence before summing (second moment: sum of "
        "squares); md.keras's Adam gets torch's dense gradient (square of the sum). Batches without repeats train "
        "alike (word2vec_model)",
    # resuming (cases/resume.py): multidev gives the uninterrupted run's result (SAME_AS)
    "resume.loop_distributed_iterator_mid_pass": "a distributed iterator in the checkpoint resumes mid-pass; TF 2.21 "
                                                 "refuses the eager DistributedIterator (ValueError)",
    "resume.fit_backup_and_restore_mid_epoch": "BackupAndRestore(save_freq=<int>) resumes fit at the step it backed "
                                               "up; TF 2.21's Keras 3 restarts the interrupted epoch (other weights)",
}

#: case that TF 2.21 fails -> the case whose TF result multidev must give instead (the idiom with TF's
#: workaround: the optimizer's slots built in the scope before the first step).
SAME_AS: dict[str, str] = {
    "loop_train.slots_made_in_function": "loop_train.sgd_momentum_two_replicas",
    "keras_gan_guide.gan_two_replicas": "keras_gan_guide.gan_two_replicas_built",
    "resume.loop_distributed_iterator_mid_pass": "resume.loop_uninterrupted",
    "resume.fit_backup_and_restore_mid_epoch": "resume.fit_uninterrupted",
    "distributed_pipeline.fit_partial_batch": "distributed_pipeline.fit_partial_batch_one_device",
    "distributed_pipeline.fit_partial_batch_auto_shard_off": "distributed_pipeline.fit_partial_batch_one_device",
    "autoencoder_tutorial.anomaly_detection_25_normal_two_replicas":
        "autoencoder_tutorial.anomaly_detection_25_normal",
}


@pytest.fixture(scope="module")
def observed() -> dict:
    """Every case's multidev observation, from one fresh interpreter."""
    proc = run_fresh(f"import runpy, sys; sys.argv = ['run_md.py']; runpy.run_path({os.path.join(HERE, 'run_md.py')!r}, "
                     "run_name='__main__')", timeout=240, env={"MULTIDEV_COLLECTIVE_TIMEOUT": "10"})
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _recorded() -> dict:
    with open(RECORD) as f:
        return json.load(f)["cases"]


CASE_IDS = [case_id for case_id, _ in all_cases()]


def test_every_case_is_recorded():
    """A case added without recording TensorFlow's side would compare against nothing."""
    assert sorted(set(CASE_IDS) - set(_recorded())) == []


def test_known_differences_are_cases():
    assert sorted(set(KNOWN) - set(CASE_IDS)) == []


@pytest.mark.parametrize("case_id", sorted(SAME_AS))
def test_where_tf_fails_multidev_gives_the_workaround_result(case_id, observed):
    expected = _recorded()[SAME_AS[case_id]]
    assert same(observed[case_id], expected), f"{case_id}: multidev gives {json.dumps(observed[case_id])}"


@pytest.mark.parametrize("case_id", [pytest.param(c, marks=pytest.mark.xfail(reason=KNOWN[c], strict=True))
                                     if c in KNOWN else c for c in CASE_IDS])
def test_case(case_id, observed):
    expected = _recorded()[case_id]
    got = observed[case_id]
    assert same(got, expected), f"{case_id}: multidev gives {json.dumps(got)}, TensorFlow 2.21 gives {json.dumps(expected)}"
