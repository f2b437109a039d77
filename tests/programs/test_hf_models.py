"""Hugging Face ``transformers`` models (``hf_models.py``: BERT classification and GPT-2 loaded with
``from_pretrained`` in the scope, GPT-2 with added tokens and gradient checkpointing, T5 from its
config) fine-tuned with the tutorial's native PyTorch loop, dropout on, padded batches and -100
labels: on MirroredStrategy (2 logical CPUs) they give DDP's result on 2 Gloo processes (float64;
bit for bit here), every replica holding the same weights; after training, the evaluation
(``model.eval()``, ``torch.no_grad()``, logits and greedy ``generate``) outside ``strategy.run`` is
DDP's, inside it on each replica's share it is the same, and ``save_pretrained`` /
``from_pretrained`` of the trained model gives it back.

The multidev case runs in one fresh interpreter and the DDP ranks in two processes, started together
(about 20 s of CPU in all). transformers is in the ``test`` extra; without it the tests skip.
"""
from __future__ import annotations

import importlib.util
import json
import os

import pytest

from tests.programs.test_programs import _finish, _free_port, _params_difference, _start

# Only the runners import transformers (about 1.5 s): collecting this file costs nothing.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers is not installed (pip install transformers)")
PROGRAMS = ("hf_bert_cls", "hf_gpt2_lm", "hf_gpt2_global_tokens", "hf_t5")   # hf_models.HF_PROGRAMS' names

QUIET = dict(HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", HF_HUB_DISABLE_PROGRESS_BARS="1")
TIMEOUT_S = 240
# Both sides run the same ops on the same slices and sum 2 gradients (exact in any order): 0.0 here;
# the margin is for AdamW's division by near-zero running norms on another CPU's kernels.
TOLERANCE = 1e-10


def start_runs(script: str, out: str) -> list:
    """``script``'s MirroredStrategy process (2 logical CPUs) and its 2 DDP ranks (Gloo), started together."""
    port = str(_free_port())
    procs = [_start(script, out, MULTIDEV_LOGICAL_CPUS="2", **QUIET)]
    return procs + [_start(script, out, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                           MASTER_PORT=port, **QUIET) for r in range(2)]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("hf_models"))
    procs = start_runs("hf_run.py", out)
    logs = _finish(procs, TIMEOUT_S)
    failed = [(p.returncode, log) for p, log in zip(procs, logs) if p.returncode != 0]
    assert not failed, failed
    loaded = []
    for name in ("hf_multidev.json", "hf_ddp.json"):
        with open(os.path.join(out, name)) as f:
            loaded.append(json.load(f))
    assert sorted(loaded[0]) == sorted(loaded[1]) == sorted(PROGRAMS), "every program of hf_models.py is tested"
    return loaded, {"multidev": logs[0], "ddp": logs[1] + logs[2]}


def _ok(result: dict, logs: str) -> dict:
    assert "error" not in result, (result["error"], logs[-4000:])
    return result


@pytest.mark.parametrize("program", PROGRAMS)
def test_hf_model_trains_as_ddp(results, program):
    (ours, ddp), logs = results
    got, theirs = _ok(ours[program]["multidev"], logs["multidev"]), _ok(ddp[program], logs["ddp"])
    assert got["replica_spread"] == 0.0, "every replica's copy is the same"
    assert got["tied"] == theirs["tied"] and (got["tied"] or "gpt2" not in program)   # GPT-2's head stays tied
    assert _params_difference(got["params"], theirs["params"]) <= TOLERANCE
    assert got["losses"] == pytest.approx(theirs["losses"], rel=TOLERANCE, abs=TOLERANCE)
    ev, ev_ddp = got["evaluation"], theirs["evaluation"]
    assert ev["logits"] == pytest.approx(ev_ddp["logits"], rel=TOLERANCE, abs=TOLERANCE)
    assert ev["tokens"] == ev_ddp["tokens"]
    assert (ev["tokens"] is not None) == (program != "hf_bert_cls")   # the generative models generated


@pytest.mark.parametrize("program", PROGRAMS)
def test_hf_model_evaluates_in_run_and_reloads(results, program):
    """Each replica's share of the evaluation batch in strategy.run (eval mode, no_grad, generate),
    gathered: the whole batch's numbers (rows are independent; 1e-12 for the matmuls' blocking); the
    trained model saved with save_pretrained and loaded with from_pretrained outside the scope: the
    same weights and evaluation, bit for bit."""
    (ours, _), logs = results
    got = _ok(ours[program]["multidev"], logs["multidev"])
    in_run, whole = got["evaluation_in_run"], got["evaluation"]
    assert in_run["logits"] == pytest.approx(whole["logits"], rel=1e-12, abs=1e-12)
    assert in_run["tokens"] == whole["tokens"]
    assert got["reloaded_params"] == got["params"]
    assert got["reloaded_evaluation"] == whole


def test_hf_global_token_count_gives_one_device(results):
    """HF Trainer's ``average_tokens_across_devices`` in the step (``num_items_in_batch`` summed with
    the replica context's ``all_reduce``, the loss times ``num_replicas_in_sync``): one device's weights,
    loss and evaluation (the tutorial's loss, each replica's mean over its own labelled tokens, gives DDP's
    result instead: test_hf_model_trains_as_ddp)."""
    (ours, _), logs = results
    got = _ok(ours["hf_gpt2_global_tokens"]["multidev"], logs["multidev"])
    reference = _ok(ours["hf_gpt2_global_tokens"]["one_device"], logs["multidev"])
    assert _params_difference(got["params"], reference["params"]) <= TOLERANCE
    assert got["losses"] == pytest.approx(reference["losses"], rel=TOLERANCE, abs=TOLERANCE)
    assert got["evaluation"]["logits"] == pytest.approx(reference["evaluation"]["logits"], rel=TOLERANCE, abs=TOLERANCE)
    assert got["evaluation"]["tokens"] == reference["evaluation"]["tokens"]
