"""pytorch.org/tutorials' sequence-to-sequence and neural style tutorials as printed, with the port's
changes only (``pytutorials.py`` says which; runners in ``pytutorials_run.py``), float64:

* "NLP From Scratch: Translation with a Sequence to Sequence Network and Attention": ``EncoderRNN`` and
  ``AttnDecoderRNN`` fed one token at a time, ``train`` on one sentence pair per process (the tutorial's
  batch of one), teacher forcing when ``random.random() < teacher_forcing_ratio``, otherwise the ``topk``
  decoding loop that stops at EOS, two SGD optimizers, ``NLLLoss``;
* "Neural Transfer Using PyTorch": content and style loss modules inserted into a ``Sequential`` copy of
  a convolutional network, the input image itself optimised by ``LBFGS`` with a closure that clamps
  ``input_img.data``; as printed (``input_img`` a plain tensor) and with the image an ``nn.Parameter``
  of a module built in the scope.

This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import random

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from pytutorials import F64, _gen

# --- Translation with a Sequence to Sequence Network and Attention ------------------------------------------
SOS_token, EOS_token, MAX_LENGTH, VOCAB, HIDDEN = 0, 1, 6, 10, 12


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)

    def forward(self, input, hidden):
        embedded = self.embedding(input).view(1, 1, -1)
        output = embedded
        output, hidden = self.gru(output, hidden)
        return output, hidden


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1, max_length=MAX_LENGTH):
        super().__init__()
        self.hidden_size, self.output_size = hidden_size, output_size
        self.dropout_p, self.max_length = dropout_p, max_length
        self.embedding = nn.Embedding(self.output_size, self.hidden_size)
        self.attn = nn.Linear(self.hidden_size * 2, self.max_length)
        self.attn_combine = nn.Linear(self.hidden_size * 2, self.hidden_size)
        self.dropout = nn.Dropout(self.dropout_p)
        self.gru = nn.GRU(self.hidden_size, self.hidden_size)
        self.out = nn.Linear(self.hidden_size, self.output_size)

    def forward(self, input, hidden, encoder_outputs):
        embedded = self.embedding(input).view(1, 1, -1)
        embedded = self.dropout(embedded)
        attn_weights = F.softmax(self.attn(torch.cat((embedded[0], hidden[0]), 1)), dim=1)
        attn_applied = torch.bmm(attn_weights.unsqueeze(0), encoder_outputs.unsqueeze(0))
        output = torch.cat((embedded[0], attn_applied[0]), 1)
        output = self.attn_combine(output).unsqueeze(0)
        output = F.relu(output)
        output, hidden = self.gru(output, hidden)
        output = F.log_softmax(self.out(output[0]), dim=1)
        return output, hidden, attn_weights


teacher_forcing_ratio = 0.5


def train(input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion,
          max_length=MAX_LENGTH):
    encoder_hidden = torch.zeros(1, 1, HIDDEN, dtype=F64)   # encoder.initHidden()
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    input_length = input_tensor.size(0)
    target_length = target_tensor.size(0)
    encoder_outputs = torch.zeros(max_length, HIDDEN, dtype=F64)
    loss = 0
    for ei in range(input_length):
        encoder_output, encoder_hidden = encoder(input_tensor[ei], encoder_hidden)
        encoder_outputs[ei] = encoder_output[0, 0]
    decoder_input = torch.tensor([[SOS_token]])
    decoder_hidden = encoder_hidden
    use_teacher_forcing = True if random.random() < teacher_forcing_ratio else False
    if use_teacher_forcing:   # Teacher forcing: Feed the target as the next input
        for di in range(target_length):
            decoder_output, decoder_hidden, decoder_attention = decoder(decoder_input, decoder_hidden, encoder_outputs)
            loss += criterion(decoder_output, target_tensor[di])
            decoder_input = target_tensor[di]   # Teacher forcing
    else:   # Without teacher forcing: use its own predictions as the next input
        for di in range(target_length):
            decoder_output, decoder_hidden, decoder_attention = decoder(decoder_input, decoder_hidden, encoder_outputs)
            topv, topi = decoder_output.topk(1)
            decoder_input = topi.squeeze().detach()   # detach from history as input
            loss += criterion(decoder_output, target_tensor[di])
            if decoder_input.item() == EOS_token:
                break
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    return loss.detach() / target_length


def _pairs(n: int) -> TensorDataset:
    """Sentences of 2-4 words and their reversal with EOS, padded; their lengths alongside."""
    g = _gen(90)
    lengths = torch.randint(2, 5, (n,), generator=g)
    inputs = torch.full((n, MAX_LENGTH), EOS_token)
    targets = torch.full((n, MAX_LENGTH), EOS_token)
    for i, k in enumerate(lengths.tolist()):
        words = torch.randint(2, VOCAB, (k,), generator=g)
        inputs[i, :k], targets[i, :k] = words, words.flip(0)
    return TensorDataset(inputs, lengths + 1, targets, lengths + 1)


def _pair_step(encoder, decoder, encoder_optimizer, decoder_optimizer, criterion):
    def step(inputs, input_lengths, targets, target_lengths):
        """``trainIters``' loop body: this process's sentence pair, as ``tensorsFromPair`` shapes it."""
        input_tensor = inputs[0, :int(input_lengths[0])].view(-1, 1)
        target_tensor = targets[0, :int(target_lengths[0])].view(-1, 1)
        return train(input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion)
    return step


def seq2seq_translation(port) -> dict:
    random.seed(9)
    torch.manual_seed(9)
    # One pair per process and step; the loader's own generator: the ranks' default ones part ways (EOS)
    pairs = DataLoader(_pairs(12), batch_size=2, shuffle=True, generator=torch.Generator().manual_seed(9))
    with port.scope():
        encoder1 = EncoderRNN(VOCAB, HIDDEN).double()
        attn_decoder1 = AttnDecoderRNN(HIDDEN, VOCAB, dropout_p=0.1).double()
        encoder_optimizer = optim.SGD(encoder1.parameters(), lr=0.05)
        decoder_optimizer = optim.SGD(attn_decoder1.parameters(), lr=0.05)
        criterion = nn.NLLLoss()
    encoder, decoder = port.wrap(encoder1), port.wrap(attn_decoder1)
    step = _pair_step(encoder, decoder, encoder_optimizer, decoder_optimizer, criterion)
    log = [port.mean(port.run(step, args=batch)) for _ in range(2) for batch in port.distribute(pairs)]
    return {**port.weights(encoder, decoder), "log": log}


# --- Neural Transfer Using PyTorch --------------------------------------------------------------------------
def gram_matrix(input):
    a, b, c, d = input.size()   # a=batch size(=1), b=number of feature maps, (c,d)=dimensions of a f. map
    features = input.view(a * b, c * d)
    G = torch.mm(features, features.t())   # compute the gram product
    return G.div(a * b * c * d)


class ContentLoss(nn.Module):
    def __init__(self, target):
        super().__init__()
        self.target = target.detach()

    def forward(self, input):
        self.loss = F.mse_loss(input, self.target)
        return input


class StyleLoss(nn.Module):
    def __init__(self, target_feature):
        super().__init__()
        self.target = gram_matrix(target_feature).detach()

    def forward(self, input):
        G = gram_matrix(input)
        self.loss = F.mse_loss(G, self.target)
        return input


class Normalization(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.mean = torch.tensor(mean, dtype=F64).view(-1, 1, 1)
        self.std = torch.tensor(std, dtype=F64).view(-1, 1, 1)

    def forward(self, img):
        return (img - self.mean) / self.std


def get_style_model_and_losses(cnn, style_img, content_img, content_layers=("conv_2",),
                               style_layers=("conv_1", "conv_2", "conv_3")):
    normalization = Normalization([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    content_losses, style_losses = [], []
    model = nn.Sequential(normalization)
    i = 0   # increment every time we see a conv
    for layer in cnn.children():
        if isinstance(layer, nn.Conv2d):
            i += 1
            name = "conv_{}".format(i)
        elif isinstance(layer, nn.ReLU):
            name = "relu_{}".format(i)
            layer = nn.ReLU(inplace=False)
        else:
            name = "pool_{}".format(i)
        model.add_module(name, layer)
        if name in content_layers:
            target = model(content_img).detach()
            content_loss = ContentLoss(target)
            model.add_module("content_loss_{}".format(i), content_loss)
            content_losses.append(content_loss)
        if name in style_layers:
            target_feature = model(style_img).detach()
            style_loss = StyleLoss(target_feature)
            model.add_module("style_loss_{}".format(i), style_loss)
            style_losses.append(style_loss)
    return model, style_losses, content_losses


def _cnn():
    """Stands for ``vgg19(weights=...).features.eval()``."""
    torch.manual_seed(11)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
                         nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(inplace=True),
                         nn.Conv2d(6, 6, 3, padding=1), nn.ReLU(inplace=True)).double().eval()


def _run_style_transfer(port, cnn, content_img, style_img, input_img, num_steps=4, style_weight=1000, content_weight=1):
    model, style_losses, content_losses = get_style_model_and_losses(cnn, style_img, content_img)
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    optimizer = optim.LBFGS([input_img])

    def closure():
        input_img.data.clamp_(0, 1)   # correct the values of updated input image
        optimizer.zero_grad()
        model(input_img)
        style_score = 0
        content_score = 0
        for sl in style_losses:
            style_score += sl.loss
        for cl in content_losses:
            content_score += cl.loss
        style_score *= style_weight
        content_score *= content_weight
        loss = style_score + content_score
        loss.backward()
        return style_score + content_score

    def step():   # one pass of the tutorial's `while run[0] <= num_steps` loop
        return optimizer.step(closure).detach()

    log = [port.mean(port.run(step)) for _ in range(num_steps)]
    input_img.data.clamp_(0, 1)   # a last correction...
    return log


def _images():
    g = _gen(12)
    return torch.rand(1, 3, 8, 8, generator=g, dtype=F64), torch.rand(1, 3, 8, 8, generator=g, dtype=F64)


def neural_style(port) -> dict:
    """As printed: the optimised image a plain tensor (``content_img.clone()``)."""
    style_img, content_img = _images()
    with port.scope():
        cnn = _cnn()
        input_img = content_img.clone()
    log = _run_style_transfer(port, cnn, content_img, style_img, input_img)
    return {"params": input_img.detach().reshape(-1).tolist(), "spread": 0.0, "log": log}


class Canvas(nn.Module):
    """The optimised image as the parameter of a module built in the scope (mirrored, reduced)."""

    def __init__(self, img):
        super().__init__()
        self.img = nn.Parameter(img.clone())


def neural_style_parameter(port) -> dict:
    style_img, content_img = _images()
    with port.scope():
        cnn = _cnn()
        canvas = Canvas(content_img)
    log = _run_style_transfer(port, cnn, content_img, style_img, canvas.img)
    return {**port.weights(canvas), "log": log}


# neural_style_parameter runs in param_writes2.py (its loss modules' `self.loss`, written in the step, is now
# kept per replica: replica_attributes.py).
TUTORIALS3 = {"seq2seq_translation": seq2seq_translation, "neural_style": neural_style}
