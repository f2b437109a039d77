"""pytorch/examples and PyTorch tutorial programs as printed, with what ``programs.py`` left out: dropout
left on (every replica draws as its DDP rank, so DDP is the reference, never one device), data in the
examples' own layout, and the loop around the step (an evaluation with ``model.eval()`` /
``torch.no_grad()`` at each epoch's end, the learning rate annealed or adjusted from it, the best
checkpoint kept). Same ``Program`` runners (one device, DDP on 2 Gloo processes, MirroredStrategy,
MultiWorkerMirroredStrategy), float64:

* word_language_model: ``RNNModel`` (LSTM, GRU; tied weights, dropout 0.2) on sequence-first data, its
  hidden state carried from batch to batch and detached (``repackage_hidden``), the manual SGD update
  after ``clip_grad_norm_``, ``evaluate`` and ``lr /= 4.0`` when the validation loss does not improve;
  the encoder ``TransformerModel`` whose ``forward`` caches its square subsequent mask on the module
  (``self.src_mask``) and whose ``PositionalEncoding`` keeps a buffer;
* dcgan: convolutional generator and discriminator with BatchNorm2d, ``weights_init`` through
  ``.data`` after ``apply``, the noise drawn in the step, labels filled in place, ``fake.detach()``;
* imagenet's main.py: ``accuracy(output, target, topk=(1, 5))``, ``AverageMeter``s of its validation,
  ``adjust_learning_rate`` writing ``param_group["lr"]``, ``save_checkpoint`` with ``is_best``;
* the tutorials' and training scripts' idioms around them: ``pyexamples_idioms.py``.

This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile

import torch
from torch import nn
from torch.nn import functional as F

try:   # the runners put this directory on sys.path; pytest imports the package
    from programs import F64, GLOBAL_BATCH, Program, _gen
    from pyexamples_idioms import PYEXAMPLE_IDIOMS
except ImportError:
    from tests.programs.programs import F64, GLOBAL_BATCH, Program, _gen
    from tests.programs.pyexamples_idioms import PYEXAMPLE_IDIOMS

NTOKENS, BPTT, EPOCH_STEPS = 20, 5, 2


# --- word_language_model: RNNModel / TransformerModel, sequence-first ---------------------------------------
class RNNModel(nn.Module):
    def __init__(self, rnn_type, ntoken=NTOKENS, ninp=12, nhid=12, nlayers=2, dropout=0.2, tie_weights=True):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0), :])


class TransformerModel(nn.Module):
    def __init__(self, ntoken=NTOKENS, ninp=16, nhead=2, nhid=24, nlayers=2, dropout=0.2):
        super().__init__()
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(layers, nlayers, enable_nested_tensor=False)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.decoder = nn.Linear(ninp, ntoken)
        self.ninp = ninp
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def _generate_square_subsequent_mask(self, sz):
        mask = (torch.triu(torch.ones(sz, sz)) == 1).transpose(0, 1)
        return mask.double().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)

    def forward(self, src, has_mask=True):
        if has_mask:   # the example caches the mask on the module: every replica writes an equal one
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = self._generate_square_subsequent_mask(len(src)).to(src.device)
        else:
            self.src_mask = None
        src = self.pos_encoder(self.encoder(src) * math.sqrt(self.ninp))
        output = self.transformer_encoder(src, self.src_mask)
        return F.log_softmax(self.decoder(output), dim=-1)


def _stream_batches(seed: int, steps: int = 2 * EPOCH_STEPS):
    """``batchify``'s streams, one row per stream (the strategy splits rows): BPTT + 1 tokens a step."""
    def batches():
        g = _gen(seed)
        stream = torch.randint(0, NTOKENS, (GLOBAL_BATCH, BPTT * steps + 1), generator=g)
        return [(stream[:, i:i + BPTT + 1],) for i in range(0, BPTT * steps, BPTT)]
    return batches


def _val_data():
    """``batchify(corpus.valid, eval_batch_size)``: sequence-first, evaluated whole by every process."""
    return torch.randint(0, NTOKENS, (3 * BPTT + 1, 4), generator=_gen(99))


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def _wlm_build(make):
    def build():
        torch.manual_seed(1111)
        return {"model": make().double(), "criterion": nn.NLLLoss(), "lr": 5.0, "clip": 0.25,
                "best_val_loss": None, "log": []}
    return build


def _wlm_step(state, batch, carry):
    """main.py's train() body for one batch: rows -> the example's (bptt, batch) layout."""
    (rows,) = batch
    source = rows.t()
    data, targets = source[:-1], source[1:].reshape(-1)
    model, hidden = state["model"], carry
    gru = getattr(model, "module", model).__dict__.get("rnn_type") == "GRU"   # (model.module under DDP)
    model.zero_grad()
    if hidden is None:   # the Transformer
        output = model(data).view(-1, NTOKENS)
    else:
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden[0] if gru else hidden)
        hidden = (hidden,) if gru else hidden
    loss = state["criterion"](output, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), state["clip"])
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-state["lr"])
    return loss.detach(), hidden


def evaluate(state, data_source):
    model = state["model"]
    model.eval()
    total_loss = 0.0
    module = getattr(model, "module", model)
    hidden = None if isinstance(module, TransformerModel) else module.init_hidden(data_source.size(1))
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, BPTT):
            data, targets = data_source[i:i + BPTT], data_source[i + 1:i + 1 + BPTT].reshape(-1)
            if hidden is None:
                output = model(data).view(-1, NTOKENS)
            else:
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
            total_loss += len(data) * state["criterion"](output, targets).item()
    return total_loss / (len(data_source) - 1)


def _wlm_epoch_end(state, i):
    """The epoch loop: evaluate, keep the best, anneal the learning rate, back to training mode."""
    if (i + 1) % EPOCH_STEPS:
        return
    val_loss = evaluate(state, _val_data())
    if not state["best_val_loss"] or val_loss < state["best_val_loss"]:
        state["best_val_loss"] = val_loss
    else:
        state["lr"] /= 4.0
    state["log"] = [val_loss, state["lr"]]
    state["model"].train()


def _hidden_carry(rnn_type):
    def carry(bsz):
        zeros = lambda: torch.zeros(2, bsz, 12, dtype=F64)   # noqa: E731 - init_hidden(bsz)
        return (zeros(), zeros()) if rnn_type == "LSTM" else (zeros(),)
    return carry


# --- dcgan: ConvTranspose2d / Conv2d with BatchNorm2d, weights_init, noise drawn in the step ---------------
NZ, NGF, NDF = 4, 4, 4


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(NGF * 2), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, 1, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(NDF * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Flatten(), nn.Linear(NDF * 2, 1), nn.Sigmoid())

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


def _dcgan_build():
    torch.manual_seed(999)
    netG, netD = Generator().double(), Discriminator().double()
    netG.apply(weights_init)
    netD.apply(weights_init)
    return {"netG": netG, "netD": netD, "criterion": nn.BCELoss(),
            "optimizerD": torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999)),
            "optimizerG": torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999)),
            "fixed_noise": torch.randn(4, NZ, 1, 1, dtype=F64)}


def _image_batches():
    g = _gen(98)
    return [(torch.rand(GLOBAL_BATCH, 1, 8, 8, generator=g, dtype=F64) * 2 - 1,) for _ in range(3)]


def _dcgan_step(state, batch, carry):
    """dcgan/main.py's loop body (real_label 1, fake_label 0)."""
    (real_cpu,) = batch
    netG, netD, criterion = state["netG"], state["netD"], state["criterion"]
    netD.zero_grad()
    batch_size = real_cpu.size(0)
    label = torch.full((batch_size,), 1, dtype=real_cpu.dtype)
    errD_real = criterion(netD(real_cpu), label)
    errD_real.backward()
    noise = torch.randn(batch_size, NZ, 1, 1, dtype=real_cpu.dtype)
    fake = netG(noise)
    label.fill_(0)
    output = netD(fake.detach())
    errD_fake = criterion(output, label)
    errD_fake.backward()
    state["optimizerD"].step()
    netG.zero_grad()
    label.fill_(1)   # fake labels are real for generator cost
    errG = criterion(netD(fake), label)
    errG.backward()
    state["optimizerG"].step()
    return (errD_real + errD_fake + errG).detach(), carry


def _dcgan_observe(state) -> list:
    """The fixed noise's images (the example saves them), training-mode batch statistics: the weights'."""
    with torch.no_grad():
        return [float(state["netG"](state["fixed_noise"]).sum())]


# --- imagenet main.py: accuracy(topk), AverageMeter, adjust_learning_rate, save_checkpoint(is_best) ---------
class AverageMeter:
    """Computes and stores the average and current value."""

    def __init__(self, name):
        self.name = name
        self.reset()

    def reset(self):
        self.val, self.avg, self.sum, self.count = 0, 0, 0, 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def all_reduce(self):
        """The newer main.py's ``Summary`` support: every process's sums (``validate`` under DDP)."""
        import torch.distributed as dist
        total = torch.tensor([self.sum, self.count], dtype=torch.float32)
        dist.all_reduce(total, dist.ReduceOp.SUM, async_op=False)
        self.sum, self.count = total.tolist()
        self.avg = self.sum / self.count


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k."""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def adjust_learning_rate(optimizer, epoch, lr=0.1):
    """Sets the learning rate to the initial LR decayed by 10 every epoch (every 30 in the example)."""
    lr = lr * (0.1 ** epoch)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


def save_checkpoint(state, is_best, directory, filename="checkpoint.pth.tar"):
    path = os.path.join(directory, filename)
    torch.save(state, path)
    if is_best:
        shutil.copyfile(path, os.path.join(directory, "model_best.pth.tar"))


def _imagenet_build():
    torch.manual_seed(7)
    model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(6, 10)).double()
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
    return {"model": model, "criterion": nn.CrossEntropyLoss(), "optimizer": optimizer, "best_acc1": 0.0,
            "dir": tempfile.TemporaryDirectory(prefix="imagenet_"), "log": []}


def _labelled_images(g, n):
    """Images whose class follows from their mean colour (something to learn, for the accuracies)."""
    images = torch.randn(n, 3, 6, 6, generator=g, dtype=F64)
    return images, (images.mean((2, 3)) @ torch.randn(3, 10, generator=_gen(5), dtype=F64)).argmax(1)


def _imagenet_batches():
    g = _gen(97)
    return [_labelled_images(g, GLOBAL_BATCH) for _ in range(2 * EPOCH_STEPS)]


def _imagenet_step(state, batch, carry):
    images, target = batch
    output = state["model"](images)
    loss = state["criterion"](output, target)
    acc1, acc5 = accuracy(output, target, topk=(1, 5))
    state["optimizer"].zero_grad()
    loss.backward()
    state["optimizer"].step()
    return loss.detach(), carry


def validate(state):
    """validate() on every process's whole validation set (the example's meters, without a sampler)."""
    images, target = _labelled_images(_gen(96), 12)
    losses, top1, top5 = AverageMeter("Loss"), AverageMeter("Acc@1"), AverageMeter("Acc@5")
    model = state["model"]
    model.eval()
    with torch.no_grad():
        for x, y in zip(images.split(5), target.split(5)):   # batches of 5, the last one of 2
            output = model(x)
            acc1, acc5 = accuracy(output, y, topk=(1, 5))
            losses.update(state["criterion"](output, y).item(), x.size(0))
            top1.update(acc1[0], x.size(0))
            top5.update(acc5[0], x.size(0))
    return float(top1.avg), float(top5.avg), losses.avg


def _imagenet_epoch_end(state, i):
    if (i + 1) % EPOCH_STEPS:
        return
    epoch = (i + 1) // EPOCH_STEPS
    acc1, acc5, loss = validate(state)
    is_best = acc1 > state["best_acc1"]
    state["best_acc1"] = max(acc1, state["best_acc1"])
    model = state["model"]
    save_checkpoint({"epoch": epoch, "state_dict": getattr(model, "module", model).state_dict(),
                     "best_acc1": state["best_acc1"], "optimizer": state["optimizer"].state_dict()},
                    is_best, state["dir"].name)
    best = os.path.join(state["dir"].name, "model_best.pth.tar")
    saved = torch.load(best, weights_only=True) if os.path.exists(best) else {"epoch": -1, "state_dict": {}}
    state["log"] = [acc1, acc5, loss, saved["epoch"], float(saved["state_dict"].get("4.weight", torch.zeros(())).sum())]
    model.train()
    adjust_learning_rate(state["optimizer"], epoch)


PYEXAMPLES = [
    *(Program(f"wlm_{kind.lower()}_dropout", _wlm_build(lambda kind=kind: RNNModel(kind)), _stream_batches(95), _wlm_step,
              initial_carry=_hidden_carry(kind), after_step=_wlm_epoch_end, compare_one_device=False,
              observe=lambda state: list(state["log"])) for kind in ("LSTM", "GRU")),
    Program("wlm_transformer_dropout", _wlm_build(TransformerModel), _stream_batches(94), _wlm_step,
            after_step=_wlm_epoch_end, compare_one_device=False, observe=lambda state: list(state["log"]),
            ddp_kwargs={"broadcast_buffers": False}),   # DDP cannot broadcast the transposed `pe` buffer
    Program("dcgan_as_printed", _dcgan_build, _image_batches, _dcgan_step, models=("netG", "netD"),
            compare_one_device=False, observe=_dcgan_observe),
    Program("imagenet_main_idioms", _imagenet_build, _imagenet_batches, _imagenet_step,
            after_step=_imagenet_epoch_end, observe=lambda state: list(state["log"])),
]
PYEXAMPLES += PYEXAMPLE_IDIOMS
