"""The GRU encoder-decoder with teacher forcing and the character-level RNN of ``sequence_programs2.py``'s
list, as printed with the port's changes only. This module imports only torch (the DDP runner imports it).
"""
from __future__ import annotations

import random

import torch
from torch import nn, optim
from torch.utils.data import DataLoader, Dataset

from sequence_programs import F64, GLOBAL_BATCH, _gen
from sequence_programs2 import PAD_IDX, VOCAB, collate_batch_first, sentence_pairs


# --- bentrevett/pytorch-seq2seq part 2: GRU encoder-decoder, teacher forcing in forward ---------------------
class Encoder(nn.Module):
    def __init__(self, input_dim, emb_dim, hid_dim, dropout):
        super().__init__()
        self.hid_dim = hid_dim
        self.embedding = nn.Embedding(input_dim, emb_dim)
        self.rnn = nn.GRU(emb_dim, hid_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src):
        embedded = self.dropout(self.embedding(src))
        outputs, hidden = self.rnn(embedded)
        return hidden


class Decoder(nn.Module):
    def __init__(self, output_dim, emb_dim, hid_dim, dropout):
        super().__init__()
        self.hid_dim = hid_dim
        self.output_dim = output_dim
        self.embedding = nn.Embedding(output_dim, emb_dim)
        self.rnn = nn.GRU(emb_dim + hid_dim, hid_dim)
        self.fc_out = nn.Linear(emb_dim + hid_dim * 2, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, context):
        input = input.unsqueeze(0)
        embedded = self.dropout(self.embedding(input))
        emb_con = torch.cat((embedded, context), dim=2)
        output, hidden = self.rnn(emb_con, hidden)
        output = torch.cat((embedded.squeeze(0), hidden.squeeze(0), context.squeeze(0)), dim=1)
        prediction = self.fc_out(output)
        return prediction, hidden


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, device):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.device = device

    def forward(self, src, trg, teacher_forcing_ratio=0.5):
        batch_size = trg.shape[1]
        trg_len = trg.shape[0]
        trg_vocab_size = self.decoder.output_dim
        outputs = torch.zeros(trg_len, batch_size, trg_vocab_size, dtype=F64).to(self.device)
        context = self.encoder(src)
        hidden = context
        input = trg[0, :]
        for t in range(1, trg_len):
            output, hidden = self.decoder(input, hidden, context)
            outputs[t] = output
            teacher_force = random.random() < teacher_forcing_ratio
            top1 = output.argmax(1)
            input = trg[t] if teacher_force else top1
        return outputs


def init_weights(m):
    for name, param in m.named_parameters():
        nn.init.normal_(param.data, mean=0, std=0.01)


def gru_seq2seq_teacher_forcing(port) -> dict:
    random.seed(1234)
    torch.manual_seed(1234)
    with port.scope():
        model = Seq2Seq(Encoder(VOCAB, 6, 8, 0.5), Decoder(VOCAB, 6, 8, 0.5), "cpu").double()
        model.apply(init_weights)
        optimizer = optim.Adam(model.parameters(), lr=0.01)
        criterion = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    model = port.wrap(model)
    iterator = DataLoader(sentence_pairs(11), batch_size=GLOBAL_BATCH, collate_fn=collate_batch_first)

    def train_step(src, trg, clip=1):
        src, trg = src.t(), trg.t()   # the port: batch-first through the strategy, sequence-first here
        optimizer.zero_grad()
        output = model(src, trg)
        output_dim = output.shape[-1]
        output = output[1:].view(-1, output_dim)
        trg = trg[1:].reshape(-1)
        loss = criterion(output, trg)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        return loss.detach()

    def evaluate_step(src, trg):
        src, trg = src.t(), trg.t()
        with torch.no_grad():
            output = model(src, trg, 0)   # turn off teacher forcing
            return criterion(output[1:].view(-1, output.shape[-1]), trg[1:].reshape(-1))

    log, valid = [], []
    for epoch in range(2):
        model.train()
        log += [port.mean(port.run(train_step, args=batch)) for batch in port.distribute(iterator)]
        model.eval()
        valid += [port.mean(port.run(evaluate_step, args=batch)) for batch in port.distribute(iterator)]
    return {**port.weights(model), "log": log, "valid": valid, "after": random.random()}


# --- Classifying names with a character-level RNN ----------------------------------------------------------
N_LETTERS, N_HIDDEN, N_CATEGORIES = 7, 8, 3


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = self.i2h(combined)
        output = self.i2o(combined)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size, dtype=F64)


class Names(Dataset):
    """``(category_tensor, line_tensor)`` as ``randomTrainingExample`` makes them: names of 2..6 letters."""

    def __init__(self, seed: int, n: int = 8):
        g = _gen(seed)
        self.items = []
        for _ in range(n):
            letters = torch.randint(0, N_LETTERS, (int(torch.randint(2, 7, (1,), generator=g)),), generator=g)
            line_tensor = torch.zeros(len(letters), 1, N_LETTERS, dtype=F64)
            line_tensor[torch.arange(len(letters)), 0, letters] = 1
            self.items.append((torch.tensor([int(torch.randint(0, N_CATEGORIES, (1,), generator=g))]), line_tensor))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def _char_rnn(port, loader_of) -> dict:
    torch.manual_seed(2)
    with port.scope():
        rnn = RNN(N_LETTERS, N_HIDDEN, N_CATEGORIES).double()
    model = port.wrap(rnn)
    criterion = nn.NLLLoss()
    learning_rate = 0.005

    def train(category_tensor, line_tensor):
        category_tensor, line_tensor = category_tensor[0], line_tensor[0]   # the loader's batch of one
        hidden = rnn.initHidden()
        model.zero_grad()
        for i in range(line_tensor.size()[0]):
            output, hidden = model(line_tensor[i], hidden)
        loss = criterion(output, category_tensor)
        loss.backward()
        for p in rnn.parameters():   # Add parameters' gradients to their values, multiplied by learning rate
            p.data.add_(p.grad.data, alpha=-learning_rate)
        return output.detach(), loss.detach()

    all_losses = []
    for epoch in range(2):
        for category_tensor, line_tensor in loader_of(Names(3)):
            output, loss = port.run(train, args=(category_tensor, line_tensor))
            all_losses.append(port.mean(loss))
    return {**port.weights(rnn), "log": all_losses}


def char_rnn_per_replica(port) -> dict:
    """DDP: ``DataLoader(names, batch_size=1, sampler=DistributedSampler(names))``; the port: the same loader
    through ``distribute_datasets_from_function`` (``port.per_replica``)."""
    return _char_rnn(port, port.per_replica)


def char_rnn_as_printed(port) -> dict:
    """The DDP program's loader without its sampler, through ``experimental_distribute_dataset``."""
    return _char_rnn(port, lambda names: port.distribute(DataLoader(names, batch_size=1)))


SEQUENCE_PROGRAMS3 = {"gru_seq2seq_teacher_forcing": gru_seq2seq_teacher_forcing,
                      "char_rnn_per_replica": char_rnn_per_replica, "char_rnn_as_printed": char_rnn_as_printed}
