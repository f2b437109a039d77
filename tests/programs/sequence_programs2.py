"""Sequence-to-sequence tutorials as printed, with the port's changes only (``sequence_programs.py`` says
how), float64, small synthetic vocabularies:

* "Language Translation with nn.Transformer": ``Seq2SeqTransformer`` over ``nn.Transformer``,
  ``PositionalEncoding`` / ``TokenEmbedding``, ``create_mask`` with PAD masks, xavier init, Adam,
  ``CrossEntropyLoss(ignore_index=PAD_IDX)``, ``greedy_decode`` in eval. Its ``collate_fn`` pads
  sequence-first (``pad_sequence``); the strategy splits dimension 0, so the port pads batch-first and
  transposes in the step (``translation_as_printed`` keeps the tutorial's collate: refused);
* a GRU encoder-decoder (bentrevett's pytorch-seq2seq, part 2) with ``teacher_force = random.random() <
  teacher_forcing_ratio`` at every decoder step in ``forward``, ``clip_grad_norm_``, evaluation with the
  ratio 0 under ``no_grad``;
* "Classifying names with a character-level RNN": one name per step (the tutorial's batch of one), the
  hand-written ``RNN`` cell unrolled over the line tensor, ``p.data.add_(p.grad.data, alpha=-lr)``. Under
  DDP each rank reads its own name (``DistributedSampler``); the port reads the same loader through
  ``distribute_datasets_from_function`` (``port.per_replica``); as printed (the loader's batch of one
  through ``experimental_distribute_dataset``) it is refused.
"""
from __future__ import annotations

import math
import random

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, TensorDataset

from sequence_programs import F64, GLOBAL_BATCH, _gen

PAD_IDX, BOS_IDX, EOS_IDX, VOCAB, EMB = 1, 2, 3, 12, 8
DEVICE = "cpu"


def sentence_pairs(seed: int, n: int = 2 * GLOBAL_BATCH) -> list:
    """(source, target) token tensors with BOS/EOS, 2..5 words; the target reverses the source."""
    g, pairs = _gen(seed), []
    for _ in range(n):
        words = torch.randint(4, VOCAB, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g)
        bos, eos = torch.tensor([BOS_IDX]), torch.tensor([EOS_IDX])
        pairs.append((torch.cat([bos, words, eos]), torch.cat([bos, words.flip(0), eos])))
    return pairs


# --- Language Translation with nn.Transformer --------------------------------------------------------------
class PositionalEncoding(nn.Module):
    def __init__(self, emb_size: int, dropout: float, maxlen: int = 5000):
        super(PositionalEncoding, self).__init__()
        den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(-2)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('pos_embedding', pos_embedding)

    def forward(self, token_embedding: Tensor):
        return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, emb_size):
        super(TokenEmbedding, self).__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens: Tensor):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, num_encoder_layers, num_decoder_layers, emb_size, nhead, src_vocab_size, tgt_vocab_size,
                 dim_feedforward=512, dropout=0.1):
        super(Seq2SeqTransformer, self).__init__()
        self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead, num_encoder_layers=num_encoder_layers,
                                          num_decoder_layers=num_decoder_layers, dim_feedforward=dim_feedforward,
                                          dropout=dropout)
        self.generator = nn.Linear(emb_size, tgt_vocab_size)
        self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
        self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

    def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, memory_key_padding_mask):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                src_padding_mask, tgt_padding_mask, memory_key_padding_mask)
        return self.generator(outs)

    def encode(self, src: Tensor, src_mask: Tensor):
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor):
        return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask)


def generate_square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones((sz, sz), device=DEVICE)) == 1).transpose(0, 1)
    mask = mask.double().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1, float(0.0))   # .float()
    return mask


def create_mask(src, tgt):
    src_seq_len = src.shape[0]
    tgt_seq_len = tgt.shape[0]
    tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
    src_mask = torch.zeros((src_seq_len, src_seq_len), device=DEVICE).type(torch.bool)
    src_padding_mask = (src == PAD_IDX).transpose(0, 1)
    tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
    return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask


def collate_fn(batch):   # the tutorial's, its text transforms already applied
    src_batch, tgt_batch = [], []
    for src_sample, tgt_sample in batch:
        src_batch.append(src_sample)
        tgt_batch.append(tgt_sample)
    src_batch = pad_sequence(src_batch, padding_value=PAD_IDX)
    tgt_batch = pad_sequence(tgt_batch, padding_value=PAD_IDX)
    return src_batch, tgt_batch


def collate_batch_first(batch):   # the port: the strategy splits dimension 0
    src_batch, tgt_batch = collate_fn(batch)
    return src_batch.t(), tgt_batch.t()


def greedy_decode(model, src, src_mask, max_len, start_symbol):
    src = src.to(DEVICE)
    src_mask = src_mask.to(DEVICE)
    memory = model.encode(src, src_mask)
    ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long).to(DEVICE)
    for i in range(max_len - 1):
        memory = memory.to(DEVICE)
        tgt_mask = (generate_square_subsequent_mask(ys.size(0)).type(torch.bool)).to(DEVICE)
        out = model.decode(ys, memory, tgt_mask)
        out = out.transpose(0, 1)
        prob = model.generator(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.item()
        ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
        if next_word == EOS_IDX:
            break
    return ys


def translate(model, src):
    model.eval()
    num_tokens = src.shape[0]
    src_mask = (torch.zeros(num_tokens, num_tokens)).type(torch.bool)
    return greedy_decode(model, src.view(-1, 1), src_mask, max_len=num_tokens + 5, start_symbol=BOS_IDX).flatten()


def _translation(port, collate) -> dict:
    torch.manual_seed(0)
    with port.scope():
        transformer = Seq2SeqTransformer(1, 1, EMB, 2, VOCAB, VOCAB, dim_feedforward=16).double()
        for p in transformer.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
        optimizer = torch.optim.Adam(transformer.parameters(), lr=0.01, betas=(0.9, 0.98), eps=1e-9)
    model = port.wrap(transformer)
    train_dataloader = DataLoader(sentence_pairs(7), batch_size=GLOBAL_BATCH, collate_fn=collate)

    def train_step(src, tgt):
        if collate is collate_batch_first:
            src, tgt = src.t(), tgt.t()
        tgt_input = tgt[:-1, :]
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
        logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask)
        optimizer.zero_grad()
        tgt_out = tgt[1:, :]
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.detach()

    model.train()
    log = [port.mean(port.run(train_step, args=batch)) for _ in range(2) for batch in port.distribute(train_dataloader)]
    plain = port.module(model)
    sentences = [src for src, _ in sentence_pairs(8, 4)]
    whole = [translate(plain, s).tolist() for s in sentences]   # outside strategy.run: the one model
    with torch.no_grad():
        whole_no_grad = [translate(plain, s).tolist() for s in sentences]

    def decode_step(src):   # each replica its own sentence, as each rank
        return translate(plain, src[0]).double().sum()

    mine = DataLoader(TensorDataset(torch.stack([s[:4] for s in sentences])), batch_size=2)
    decoded = [port.sum(port.run(decode_step, args=batch)) for batch in port.distribute(mine)]
    return {**port.weights(model), "log": log, "translations": whole, "translations_no_grad": whole_no_grad,
            "decoded": decoded}


def translation_batch_first(port) -> dict:
    return _translation(port, collate_batch_first)


def translation_as_printed(port) -> dict:
    return _translation(port, collate_fn)


SEQUENCE_PROGRAMS2 = {"translation_batch_first": translation_batch_first, "translation_as_printed": translation_as_printed}
