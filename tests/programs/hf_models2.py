"""Modern Hugging Face fine-tuning programs, the loop as HF's docs print it (``outputs = model(**batch);
loss = outputs.loss; loss.backward()``, ``clip_grad_norm_``, ``AdamW``, ``get_scheduler("linear", ...)``),
on tiny models from configs with a fixed seed (never downloaded), float64:

* ``hf_llama_untied`` / ``hf_llama_tied``: ``LlamaForCausalLM`` (RoPE, RMSNorm, grouped-query attention,
  no dropout), its head untied or tied to the token embedding, batches padded on the left (a decoder's
  tokenizer's ``padding_side="left"``) with their ``attention_mask`` and -100 labels on the padding;
* ``hf_mixtral_moe`` / ``hf_qwen2_moe``: Mixture-of-Experts decoders with ``output_router_logits=True``:
  ``outputs.loss`` includes ``router_aux_loss_coef`` times the load-balancing loss of the replica's own
  tokens (the step also returns ``outputs.aux_loss``: each DDP rank's, per replica);
* ``hf_lora``: ``peft``'s LoRA on a "pretrained" Llama (``from_pretrained`` of a local ``save_pretrained``
  directory): ``get_peft_model(model, LoraConfig(...))``, the base frozen, only the adapters (and the
  ``modules_to_save`` head) in the optimizer, ``lora_dropout`` on, gradient checkpointing,
  ``print_trainable_parameters()``; ``hf_lora_reference``: its step also takes a reference pass through
  the base model under ``disable_adapter()`` (DPO without a reference model);
* ``hf_vit``: ``ViTForImageClassification`` (dropout 0.1) with ``model.vit`` frozen for the first step
  (``model.vit.requires_grad_(step >= 1)`` before each step), the optimizer holding every parameter;
* ``hf_vit_param_group``: gradual unfreezing, the optimizer built over the head, the backbone unfrozen
  and added with ``optimizer.add_param_group`` before the second step;
* ``hf_vit_eval_pass``: the same model, each step first a reference pass after ``model.eval()`` (under
  ``torch.no_grad()``), then ``model.train()`` and the training pass with a consistency loss.

This module imports only torch, transformers and (for ``hf_lora``) peft: the DDP runner imports no multidev.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Callable

import torch
from transformers import (LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM, Qwen2MoeConfig,
                          Qwen2MoeForCausalLM, ViTConfig, ViTForImageClassification)

import hf_models   # noqa: E402 - the programs' directory is on sys.path (hf_run2.py)
from hf_models import F64, GLOBAL_BATCH, PAD, STEPS, VOCAB  # noqa: E402


@dataclass(frozen=True)
class HFProgram2:
    """``build() -> (model, optimizer, lr_scheduler)``; global batches (dicts split along dimension 0);
    an evaluation batch; whether ``evaluate`` generates; ``before_step(state, step)`` (the loop's lines
    before each step: ViT's unfreezing); whether DDP needs ``find_unused_parameters`` (a parameter
    without a gradient on some step); what ``from_pretrained`` needs to load it back."""

    name: str
    build: Callable[[], tuple]
    batches: Callable[[], list]
    eval_batch: Callable[[], dict]
    generates: bool = True
    before_step: Callable[[tuple, int], None] | None = None
    find_unused_parameters: bool = False
    step: Callable[[tuple, dict], dict] | None = None   # None: train_step
    peft: bool = False   # a peft model: save_pretrained writes the adapter; merge_and_unload
    load_kwargs: tuple = ()   # (name, value) pairs ``from_pretrained`` needs to load the saved model back


def train_step(state: tuple, batch: dict) -> dict:
    """HF's loop body, unchanged between DDP and ``strategy.run``; the numbers it logs."""
    outputs = state[0](**batch)
    return _update(state, outputs, outputs.loss)


def train_step_with_reference(state: tuple, batch: dict) -> dict:
    """A reference pass in eval mode (dropout off, no gradient) before the training pass, its
    predictions a consistency target (self-distillation, R-Drop's clean variant): ``model.eval()`` and
    ``model.train()`` inside the step."""
    model = state[0]
    model.eval()
    with torch.no_grad():
        reference = model(**batch).logits.log_softmax(-1)
    model.train()
    outputs = model(**batch)
    consistency = torch.nn.functional.kl_div(outputs.logits.log_softmax(-1), reference, log_target=True,
                                             reduction="batchmean")
    return _update(state, outputs, outputs.loss + consistency)


def train_step_against_base(state: tuple, batch: dict) -> dict:
    """DPO's reference pass without a second model: the base model's predictions under peft's
    ``disable_adapter()`` (TRL's ``ref_model=None``), a KL term against them keeping the adapted model
    close. ``getattr(model, "module", model)``: the model under DDP's wrapper, as accelerate's
    ``unwrap_model``."""
    model = state[0]
    with torch.no_grad(), getattr(model, "module", model).disable_adapter():
        reference = model(**batch).logits.log_softmax(-1)
    outputs = model(**batch)
    kl = torch.nn.functional.kl_div(outputs.logits.log_softmax(-1), reference, log_target=True, reduction="batchmean")
    return _update(state, outputs, outputs.loss + kl)


def _update(state: tuple, outputs, loss: torch.Tensor) -> dict:
    model, optimizer, lr_scheduler = state
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    lr_scheduler.step()
    optimizer.zero_grad()
    logged = {"loss": loss.detach()}
    if getattr(outputs, "aux_loss", None) is not None:   # MoE: the router's load-balancing loss
        logged["aux_loss"] = outputs.aux_loss.detach()
    return logged


def _left_padded(g: torch.Generator, rows: int, length: int, shortest: int) -> tuple:
    """Token ids padded before each row's own length (``padding_side="left"``), and the attention mask."""
    ids = torch.randint(2, VOCAB, (rows, length), generator=g)
    lengths = torch.randint(shortest, length + 1, (rows,), generator=g)
    mask = (torch.arange(length)[None, :] >= length - lengths[:, None]).long()
    return ids.masked_fill(mask == 0, PAD), mask


def _lm_batches(seed: int) -> Callable[[], list]:
    return hf_models._lm_batches(seed, _left_padded, 3)


def _prompts() -> dict:
    ids, mask = _left_padded(torch.Generator().manual_seed(13), 4, 6, 2)
    return {"input_ids": ids, "attention_mask": mask}


# --- Llama: RoPE, RMSNorm, GQA; tied or untied head ------------------------------------------------------------
LLAMA = dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=VOCAB, max_position_embeddings=64, pad_token_id=PAD, bos_token_id=1, eos_token_id=1)


def _llama_build(tied: bool) -> Callable[[], tuple]:
    def build() -> tuple:
        torch.manual_seed(4)
        return hf_models._optimize(LlamaForCausalLM(LlamaConfig(**LLAMA, tie_word_embeddings=tied)).to(F64))
    return build


# --- Mixture of experts: the router's auxiliary loss ------------------------------------------------------------
MOE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
           max_position_embeddings=64, pad_token_id=PAD, bos_token_id=1, eos_token_id=1, num_experts_per_tok=2,
           output_router_logits=True, router_aux_loss_coef=0.1,
           experts_implementation="eager")   # the experts' loop: torch's grouped_mm takes no float64 on CPU
EAGER_EXPERTS = (("experts_implementation", "eager"),)   # not saved with the config


def _mixtral_build() -> tuple:
    torch.manual_seed(5)
    config = MixtralConfig(**MOE, intermediate_size=37, num_local_experts=4)
    return hf_models._optimize(MixtralForCausalLM(config).to(F64))


def _qwen2_moe_build() -> tuple:
    torch.manual_seed(6)
    config = Qwen2MoeConfig(**MOE, intermediate_size=37, moe_intermediate_size=19, shared_expert_intermediate_size=23,
                            num_experts=4, decoder_sparse_step=1, norm_topk_prob=True)
    return hf_models._optimize(Qwen2MoeForCausalLM(config).to(F64))


# --- LoRA with peft on a "pretrained" Llama ------------------------------------------------------------------------
_saved: dict[str, str] = {}


def pretrained_llama() -> str:
    """The "pretrained" base model: a Llama from its config (seed 0) saved locally."""
    if not _saved:
        torch.manual_seed(0)
        _saved["llama"] = os.path.join(tempfile.mkdtemp(prefix="hf_llama_"), "pretrained")
        LlamaForCausalLM(LlamaConfig(**LLAMA)).save_pretrained(_saved["llama"])
    return _saved["llama"]


def lora_config():
    from peft import LoraConfig
    return LoraConfig(r=4, lora_alpha=8, lora_dropout=0.1, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM",
                      modules_to_save=["lm_head"])


def load_base() -> torch.nn.Module:
    return LlamaForCausalLM.from_pretrained(pretrained_llama(), dtype=F64)


def _lora_build() -> tuple:
    """peft's quicktour: ``get_peft_model`` on the loaded model, with gradient checkpointing and
    ``enable_input_require_grads()`` (what ``prepare_model_for_kbit_training`` sets up) and the head
    trained whole (``modules_to_save``: a copy of ``lm_head``); the adapters' A matrices drawn from
    torch's generator (B starts at zero); the optimizer over the trainable parameters."""
    from peft import get_peft_model
    pretrained_llama()   # "downloaded" first: saving it draws from torch's generator
    torch.manual_seed(7)
    base = load_base()
    base.gradient_checkpointing_enable()
    base.enable_input_require_grads()
    model = get_peft_model(base, lora_config())
    model.print_trainable_parameters()
    return hf_models._optimize(model, [p for p in model.parameters() if p.requires_grad])


# --- ViT: the backbone frozen for the first step ------------------------------------------------------------------
def _vit() -> torch.nn.Module:
    torch.manual_seed(8)
    config = ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=37, hidden_dropout_prob=0.1,
                       attention_probs_dropout_prob=0.1, num_labels=3)
    return ViTForImageClassification(config).to(F64)


def _vit_build() -> tuple:
    return hf_models._optimize(_vit())


def _vit_unfreeze(state: tuple, step: int) -> None:
    """Warm the head up first: the backbone trains from the second step on."""
    state[0].vit.requires_grad_(step >= 1)


class _Constant:
    """No schedule (torch's schedulers refuse a parameter group added after them)."""

    def step(self) -> None:
        pass


def _vit_head_build() -> tuple:
    """Gradual unfreezing: the optimizer starts with the head alone."""
    model = _vit().train()
    return model, torch.optim.AdamW(model.classifier.parameters(), lr=5e-3), _Constant()


def _vit_add_backbone(state: tuple, step: int) -> None:
    """The backbone unfrozen at the second step and given to the optimizer as a group of its own."""
    _vit_unfreeze(state, step)
    if step == 1:
        state[1].add_param_group({"params": list(state[0].vit.parameters()), "lr": 1e-3})


def _vit_batches() -> list:
    g = torch.Generator().manual_seed(18)
    return [{"pixel_values": torch.randn(GLOBAL_BATCH, 3, 16, 16, generator=g, dtype=F64),
             "labels": torch.randint(0, 3, (GLOBAL_BATCH,), generator=g)} for _ in range(STEPS)]


def _vit_eval_batch() -> dict:
    return {"pixel_values": torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(19), dtype=F64)}


def evaluate(program: HFProgram2, model: torch.nn.Module, batch: dict) -> tuple:
    """After training: ``model.eval()``, then under ``torch.no_grad()`` the evaluation batch's logits
    and, for the decoders, greedy ``generate`` (5 new tokens) from its left-padded prompts."""
    model.eval()
    with torch.no_grad():
        logits = model(**batch).logits
        if not program.generates:
            return logits, None
        # transformers computes the router's loss at each generated token too, and fails on the cache's
        # attention mask: MoE programs turn it off for generation
        quiet = {"output_router_logits": False} if getattr(model.config, "output_router_logits", False) else {}
        return logits, model.generate(**batch, max_new_tokens=5, do_sample=False, pad_token_id=PAD, **quiet)


HF_PROGRAMS2 = [
    HFProgram2("hf_llama_untied", _llama_build(False), _lm_batches(21), _prompts),
    HFProgram2("hf_llama_tied", _llama_build(True), _lm_batches(22), _prompts),
    HFProgram2("hf_mixtral_moe", _mixtral_build, _lm_batches(23), _prompts, load_kwargs=EAGER_EXPERTS),
    HFProgram2("hf_qwen2_moe", _qwen2_moe_build, _lm_batches(24), _prompts, load_kwargs=EAGER_EXPERTS),
    HFProgram2("hf_lora", _lora_build, _lm_batches(25), _prompts, peft=True),
    HFProgram2("hf_lora_reference", _lora_build, _lm_batches(26), _prompts, step=train_step_against_base, peft=True),
    HFProgram2("hf_vit", _vit_build, _vit_batches, _vit_eval_batch, generates=False, before_step=_vit_unfreeze,
               find_unused_parameters=True),
    HFProgram2("hf_vit_param_group", _vit_head_build, _vit_batches, _vit_eval_batch, generates=False,
               before_step=_vit_add_backbone, find_unused_parameters=True),
    HFProgram2("hf_vit_eval_pass", _vit_build, _vit_batches, _vit_eval_batch, generates=False,
               step=train_step_with_reference),
]
