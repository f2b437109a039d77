"""Tiny Hugging Face ``transformers`` models fine-tuned as HF's "Fine-tune a pretrained model in native
PyTorch" tutorial writes the loop: ``outputs = model(**batch); loss = outputs.loss; loss.backward()``,
``clip_grad_norm_``, ``AdamW``, ``get_scheduler("linear", ...)``, ``model.train()``, dropout on (0.1),
attention masks over padded batches, labels padded with -100. Models come from configs with a fixed
seed (never downloaded); "pretrained" weights are a local ``save_pretrained`` directory, loaded with
``from_pretrained`` where the tutorial does (so in ``strategy.scope()`` under multidev). float64.

* ``hf_bert_cls``: ``BertForSequenceClassification.from_pretrained`` of a saved ``BertModel`` (its
  classifier head is a missing key: HF initialises it after loading), padded sequences;
* ``hf_gpt2_lm``: ``GPT2LMHeadModel.from_pretrained`` (its head tied to the token embedding) with
  ``resize_token_embeddings`` and ``gradient_checkpointing_enable()``, causal-LM labels with -100 on
  padding (each replica's mean over its own tokens, as each DDP rank's), greedy ``generate``;
* ``hf_gpt2_global_tokens``: the same without dropout, the loss normalised as HF's Trainer does it
  across devices (``num_items_in_batch``: the labelled tokens of the whole global batch): one device's
  weights too;
* ``hf_t5``: ``T5ForConditionalGeneration`` built from its config in the scope (encoder-decoder,
  relative attention bias), padded targets with -100, greedy ``generate``.

``evaluate`` is what a script does after training: ``model.eval()`` and, under ``torch.no_grad()``,
logits of an evaluation batch and greedy generations. This module imports only torch and transformers:
the DDP runner must not import multidev.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Callable

import torch
from transformers import (BertConfig, BertForSequenceClassification, BertModel, GPT2Config, GPT2LMHeadModel,
                          T5Config, T5ForConditionalGeneration, get_scheduler)

F64 = torch.float64
GLOBAL_BATCH, SEQ, VOCAB, STEPS = 8, 12, 100, 3
PAD = 0
DROPOUT = 0.1   # the configs' default: on, so every replica must draw its DDP rank's masks


@dataclass(frozen=True)
class HFProgram:
    """``build() -> (model, optimizer, lr_scheduler)``; the global batches (dicts of tensors, split
    along dimension 0); an evaluation batch; whether ``evaluate`` also generates; the loop body
    (``train_step``, or ``train_step_global_tokens``, which sums across ranks: one device's result)."""

    name: str
    model_class: type
    build: Callable[[], tuple]
    batches: Callable[[], list]
    eval_batch: Callable[[], dict]
    generates: bool
    step: Callable[..., torch.Tensor] | None = None   # None: train_step
    one_device_equal: bool = False   # no dropout, a global mean: one device gives the same weights


def train_step(state: tuple, batch: dict) -> torch.Tensor:
    """The tutorial's loop body, unchanged between one device, DDP and ``strategy.run``."""
    model, optimizer, lr_scheduler = state
    outputs = model(**batch)
    loss = outputs.loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    lr_scheduler.step()
    optimizer.zero_grad()
    return loss.detach()


def train_step_global_tokens(state: tuple, batch: dict, sum_across: Callable, replicas: int) -> torch.Tensor:
    """HF Trainer's ``average_tokens_across_devices``: the summed token loss over the global batch's
    count of labelled tokens (``num_items_in_batch``, summed across ranks), times the ranks DDP's
    gradient averages over: one device's gradient whatever each rank's count. ``sum_across`` and
    ``replicas``: ``dist.all_reduce`` and the world size under DDP; in ``strategy.run`` the replica
    context's ``all_reduce("sum", ...)`` and ``num_replicas_in_sync``."""
    model, optimizer, lr_scheduler = state
    num_items_in_batch = sum_across((batch["labels"][:, 1:] != -100).sum())
    outputs = model(**batch, num_items_in_batch=num_items_in_batch)
    loss = outputs.loss * replicas
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    lr_scheduler.step()
    optimizer.zero_grad()
    return loss.detach()   # its mean over the ranks: the global batch's loss


def _optimize(model: torch.nn.Module, params=None) -> tuple:
    """``model.train()``, AdamW over ``params`` (default: every parameter) and the linear schedule."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters() if params is None else params, lr=5e-3)
    lr_scheduler = get_scheduler("linear", optimizer=optimizer, num_warmup_steps=1, num_training_steps=STEPS)
    return model, optimizer, lr_scheduler


def _padded(g: torch.Generator, rows: int, length: int, shortest: int) -> tuple:
    """Token ids padded after each row's own length, and the attention mask (uneven counts per row)."""
    ids = torch.randint(2, VOCAB, (rows, length), generator=g)
    lengths = torch.randint(shortest, length + 1, (rows,), generator=g)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    return ids.masked_fill(mask == 0, PAD), mask


# --- BERT: sequence classification from a "pretrained" base model -----------------------------------------------
BERT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, vocab_size=VOCAB,
            max_position_embeddings=64, hidden_dropout_prob=DROPOUT, attention_probs_dropout_prob=DROPOUT,
            pad_token_id=PAD)
GPT2 = dict(n_embd=32, n_layer=2, n_head=2, vocab_size=VOCAB, n_positions=64, bos_token_id=1, eos_token_id=1,
            pad_token_id=PAD, resid_pdrop=DROPOUT, embd_pdrop=DROPOUT, attn_pdrop=DROPOUT)
_saved: dict[str, str] = {}


def pretrained_dirs() -> dict:
    """Models from their configs (seed 0) saved locally: the tutorial's ``"bert-base-cased"`` (a
    ``BertModel``) and a ``"gpt2"`` (``GPT2LMHeadModel``, its head tied to the token embedding)."""
    if not _saved:
        torch.manual_seed(0)
        for name, model in (("bert", BertModel(BertConfig(**BERT))), ("gpt2", GPT2LMHeadModel(GPT2Config(**GPT2)))):
            _saved[name] = os.path.join(tempfile.mkdtemp(prefix=f"hf_{name}_"), "pretrained")
            model.save_pretrained(_saved[name])
    return _saved


def _bert_build() -> tuple:
    path = pretrained_dirs()["bert"]
    torch.manual_seed(1)   # the classifier head (a missing key) is initialised from torch's generator
    model = BertForSequenceClassification.from_pretrained(path, num_labels=3, dtype=F64)
    return _optimize(model)


def _bert_batches() -> list:
    g = torch.Generator().manual_seed(11)
    out = []
    for _ in range(STEPS):
        ids, mask = _padded(g, GLOBAL_BATCH, SEQ, 3)
        labels = torch.randint(0, 3, (GLOBAL_BATCH,), generator=g)
        out.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return out


def _bert_eval_batch() -> dict:
    ids, mask = _padded(torch.Generator().manual_seed(12), 4, SEQ, 3)
    return {"input_ids": ids, "attention_mask": mask}


# --- GPT-2: causal LM, gradient checkpointing, -100 on padding, generate ----------------------------------------
def _gpt2_build(dropout: float) -> Callable[[], tuple]:
    def build() -> tuple:
        """``from_pretrained`` (tied weights: transformers ties the head after loading), then the
        tokenizer's added tokens (``resize_token_embeddings``: new rows drawn around the old ones' mean)."""
        torch.manual_seed(2)
        model = GPT2LMHeadModel.from_pretrained(pretrained_dirs()["gpt2"], dtype=F64, resid_pdrop=dropout,
                                                embd_pdrop=dropout, attn_pdrop=dropout)
        model.resize_token_embeddings(VOCAB + 4)
        model.gradient_checkpointing_enable()
        return _optimize(model)
    return build


def _lm_batches(seed: int, padded: Callable = None, shortest: int = 2) -> Callable[[], list]:
    """Causal-LM batches: ids padded by ``padded`` (``_padded``: on the right), -100 labels on the padding."""
    def batches() -> list:
        g = torch.Generator().manual_seed(seed)
        out = []
        for _ in range(STEPS):
            ids, mask = (padded or _padded)(g, GLOBAL_BATCH, SEQ, shortest)
            out.append({"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)})
        return out
    return batches


def _gpt2_eval_batch() -> dict:
    return {"input_ids": torch.randint(2, VOCAB, (4, 4), generator=torch.Generator().manual_seed(13))}


def evaluate(program: "HFProgram", model: torch.nn.Module, batch: dict) -> tuple:
    """After training: ``model.eval()``, then under ``torch.no_grad()`` the logits of an evaluation
    batch and, for generative models, greedy ``generate`` (5 new tokens) from its prompts."""
    model.eval()
    with torch.no_grad():
        logits = model(**batch).logits
        if not program.generates:
            return logits, None
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        return logits, model.generate(**inputs, max_new_tokens=5, do_sample=False)


# --- T5: encoder-decoder, padded targets ------------------------------------------------------------------------
def _t5_build() -> tuple:
    torch.manual_seed(3)
    config = T5Config(d_model=32, d_ff=37, d_kv=16, num_layers=2, num_decoder_layers=2, num_heads=2, vocab_size=VOCAB,
                      dropout_rate=DROPOUT, pad_token_id=PAD, eos_token_id=1, decoder_start_token_id=PAD)
    return _optimize(T5ForConditionalGeneration(config).to(F64))


def _t5_eval_batch() -> dict:
    g = torch.Generator().manual_seed(16)
    ids, mask = _padded(g, 4, SEQ, 3)
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.randint(2, VOCAB, (4, 4), generator=g)}


def _t5_batches() -> list:
    g = torch.Generator().manual_seed(14)
    out = []
    for _ in range(STEPS):
        ids, mask = _padded(g, GLOBAL_BATCH, SEQ, 3)
        target, target_mask = _padded(g, GLOBAL_BATCH, 6, 1)
        out.append({"input_ids": ids, "attention_mask": mask, "labels": target.masked_fill(target_mask == 0, -100)})
    return out


HF_PROGRAMS = [
    HFProgram("hf_bert_cls", BertForSequenceClassification, _bert_build, _bert_batches, _bert_eval_batch, False),
    HFProgram("hf_gpt2_lm", GPT2LMHeadModel, _gpt2_build(DROPOUT), _lm_batches(15), _gpt2_eval_batch, True),
    HFProgram("hf_gpt2_global_tokens", GPT2LMHeadModel, _gpt2_build(0.0), _lm_batches(17), _gpt2_eval_batch, True,
              step=train_step_global_tokens, one_device_equal=True),
    HFProgram("hf_t5", T5ForConditionalGeneration, _t5_build, _t5_batches, _t5_eval_batch, True),
]
