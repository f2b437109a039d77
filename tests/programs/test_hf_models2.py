"""Modern Hugging Face fine-tuning programs (``hf_models2.py``: Llama with a tied or untied head and
left-padded batches, Mixtral and Qwen2-MoE with the router's auxiliary loss, peft's LoRA with the adapter
saved and reloaded and with a DPO-style reference pass under ``disable_adapter()``, ViT with its backbone
frozen for the first step and with an eval-mode reference pass in the step) typed as HF's docs print
them with the port's two changes: on MirroredStrategy (2 logical CPUs) and under ``multidev launch
--workers 2`` (MultiWorkerMirroredStrategy, one replica per worker) they give DDP's weights on 2 Gloo
processes (float64; bit for bit here), each replica logging its DDP rank's losses. (The two reference
passes switch state the replicas share: before ``replica_attributes`` and ``integrations/peft.py`` they
were off DDP's depending on the threads' timing.)

The MirroredStrategy cases run in one fresh interpreter, the DDP ranks in one 2-process job and the
launched workers in another, all started together (``hf_run2.py``). transformers and peft are in the
``test`` extra; without transformers every test skips, without peft the LoRA tests do.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.programs.test_hf_models import QUIET, start_runs
from tests.programs.test_programs import HERE, _finish, _params_difference

# Only the runners import transformers: collecting this file costs nothing.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers is not installed (pip install transformers)")
needs_peft = pytest.mark.skipif(importlib.util.find_spec("peft") is None,
                                reason="peft is not installed (pip install peft)")
PROGRAMS = ("hf_llama_untied", "hf_llama_tied", "hf_mixtral_moe", "hf_qwen2_moe", "hf_lora", "hf_lora_reference",
            "hf_vit", "hf_vit_param_group", "hf_vit_eval_pass")
CASES = [pytest.param(p, marks=needs_peft) if p.startswith("hf_lora") else p for p in PROGRAMS]
TIMEOUT_S = 240
# Both sides run the same ops on the same slices and average 2 gradients (exact in any order): 0.0 here;
# the margin is for AdamW's division by near-zero running norms on another CPU's kernels.
TOLERANCE = 1e-10


def _launch(out: str) -> subprocess.Popen:
    """``multidev launch --workers 2 hf_run2.py OUT`` (MultiWorkerMirroredStrategy, 1 replica a worker)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
               **QUIET)
    for name in ("TF_CONFIG", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return subprocess.Popen([sys.executable, "-m", "multidev.cli.main", "launch", "--workers", "2",
                             os.path.join(HERE, "hf_run2.py"), out], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("hf_models2"))
    procs = start_runs("hf_run2.py", out) + [_launch(out)]
    logs = _finish(procs, TIMEOUT_S)
    failed = [(p.returncode, log[-4000:]) for p, log in zip(procs, logs) if p.returncode != 0]
    assert not failed, failed
    loaded = {}
    for name in ("multidev", "ddp", "worker0", "worker1"):
        with open(os.path.join(out, f"hf2_{name}.json")) as f:
            loaded[name] = json.load(f)
        assert sorted(loaded[name]) == sorted(PROGRAMS), "every program of hf_models2.py is tested"
    return loaded, {"multidev": logs[0], "ddp": logs[1] + logs[2], "workers": logs[3]}


def _ok(results, side: str, program: str) -> dict:
    loaded, logs = results
    result = loaded[side][program]
    assert "error" not in result, (result["error"], logs["workers" if side.startswith("worker") else side][-4000:])
    return result


def _close(a, b) -> bool:
    return a == pytest.approx(b, rel=TOLERANCE, abs=TOLERANCE)


@pytest.mark.parametrize("program", CASES)
def test_hf_model2_trains_as_ddp(results, program):
    """Replica r logs rank r's losses (the MoE's auxiliary loss too) at every step; replica 0's weights,
    every parameter's count of AdamW updates, which parameters train, whether the head is tied and the
    evaluation after training (logits, greedy generation from left-padded prompts) are DDP's."""
    got, theirs = _ok(results, "multidev", program), _ok(results, "ddp", program)
    assert got["replica_spread"] == 0.0, "every replica's copy is the same"
    assert _params_difference(got["params"], theirs["params"]) <= TOLERANCE
    assert [sorted(s) for s in got["logged"]] == [sorted(s) for s in theirs["logged"]]
    for mine, ranks in zip(got["logged"], theirs["logged"]):
        assert all(_close(mine[k], ranks[k]) for k in ranks), (mine, ranks)
    assert got["adam_steps"] == theirs["adam_steps"] and got["trainable"] == theirs["trainable"]
    assert got["tied"] == theirs["tied"] and got["printed"] == theirs["printed"]
    assert _close(got["evaluation"]["logits"], theirs["evaluation"]["logits"])
    assert got["evaluation"]["tokens"] == theirs["evaluation"]["tokens"]
    assert (got["evaluation"]["tokens"] is not None) == (not program.startswith("hf_vit"))   # decoders generated


@pytest.mark.parametrize("program", CASES)
def test_hf_model2_under_multidev_launch(results, program):
    """``multidev launch --workers 2``: worker w logs rank w's losses; both hold DDP's weights."""
    theirs = _ok(results, "ddp", program)
    for w in range(2):
        got = _ok(results, f"worker{w}", program)
        assert _params_difference(got["params"], theirs["params"]) <= TOLERANCE, w
        assert all(_close(mine[k], [ranks[k][w]]) for mine, ranks in zip(got["logged"], theirs["logged"])
                   for k in ranks), w
        assert got["adam_steps"] == theirs["adam_steps"]


@pytest.mark.parametrize("program", [p for p in PROGRAMS if not p.startswith("hf_lora")])
def test_hf_model2_reloads(results, program):
    """``save_pretrained`` of the trained model, ``from_pretrained`` outside the scope: the same weights
    and evaluation, bit for bit; a tied head is tied again."""
    got = _ok(results, "multidev", program)
    assert got["reloaded_params"] == got["params"]
    assert got["reloaded_evaluation"] == got["evaluation"]
    assert got["reloaded_tied"] == got["tied"] == (program == "hf_llama_tied")


def test_moe_aux_loss_is_each_replicas(results):
    """``output_router_logits=True``: each replica's ``aux_loss`` is its own tokens' load-balancing loss
    (the replicas' differ, as the ranks' do), the one its DDP rank computes."""
    for program in ("hf_mixtral_moe", "hf_qwen2_moe"):
        got = _ok(results, "multidev", program)
        assert all(len(s["aux_loss"]) == 2 and s["aux_loss"][0] != s["aux_loss"][1] for s in got["logged"])


@needs_peft
def test_lora_saves_exactly_the_trained_adapter(results):
    """``print_trainable_parameters()`` prints DDP's counts; only adapters and the ``modules_to_save``
    head train; ``save_pretrained`` writes exactly their trained values (float64, replica 0's = every
    replica's), and ``PeftModel.from_pretrained`` on a freshly loaded base gives back every weight (the
    base untouched by training) and the evaluation; ``merge_and_unload()`` evaluates as DDP's."""
    got, theirs = _ok(results, "multidev", "hf_lora"), _ok(results, "ddp", "hf_lora")
    assert got["printed"].startswith("trainable params: ") and got["printed"] == theirs["printed"]
    assert got["trainable"] and all(".lora_" in n or ".modules_to_save." in n for n in got["trainable"])
    assert got["adapter_exact"] and len(got["adapter_keys"]) == len(got["trainable"])
    assert got["reloaded_params"] == got["params"] and got["reloaded_evaluation"] == got["evaluation"]
    assert _close(got["merged_evaluation"]["logits"], theirs["merged_evaluation"]["logits"])
    assert got["merged_evaluation"]["tokens"] == theirs["merged_evaluation"]["tokens"]


@pytest.mark.parametrize("program", ["hf_vit", "hf_vit_param_group"])
def test_vit_backbone_trains_from_the_second_step(results, program):
    """``model.vit.requires_grad_(step >= 1)`` before each step, the optimizer holding every parameter
    from the start (or the backbone added with ``add_param_group`` at the second step): the backbone is
    updated on steps 2 and 3 only, the head on all 3 (as under DDP built with
    ``find_unused_parameters=True`` before the freeze)."""
    got = _ok(results, "multidev", program)
    steps = dict(zip(got["trainable"], got["adam_steps"]))
    assert len(steps) == len(got["params"])
    assert {s for n, s in steps.items() if n.startswith("vit.")} == {2.0}
    assert {s for n, s in steps.items() if not n.startswith("vit.")} == {3.0}
