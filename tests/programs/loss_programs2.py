"""More losses as DDP programs write them (see ``loss_programs.py``): the pairwise and triplet losses on several
forwards of one model, ``CTCLoss`` (``'mean'`` and ``'sum'``, ``zero_infinity``), and cross-entropy over tokens
normalised by the global token count (``dist.all_reduce(num_tokens)``; HF Trainer's ``num_items_in_batch`` times
the world size, with gradient accumulation) or per micro-batch (``loss / accumulation_steps``).

``port.all_reduce_(t)`` is the line the port writes for ``dist.all_reduce(t)`` in the step (DDP: that call);
``port.world_size()`` for ``dist.get_world_size()`` (the strategy's ``num_replicas_in_sync``).
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn, optim
from torch.nn import functional as F

from loss_programs import GLOBAL_BATCH, STEPS, F64, features, labels, loader, net, train


def triplet_margin(port) -> dict:
    """``TripletMarginLoss(margin=1.0, p=2)`` on three forwards of the embedding net (anchor, positive,
    negative) before one backward."""
    make = lambda: nn.TripletMarginLoss(margin=1.0, p=2)  # noqa: E731
    anchor = features(20)
    data = loader(anchor, anchor + 0.3 * features(21), features(22))

    def train_triplet(port_):
        torch.manual_seed(3)
        with port_.scope():
            model = net(3)
            optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            criterion = make()
        model = port_.wrap(model)

        def step(a, p, n):
            optimizer.zero_grad()
            loss = criterion(model(a), model(p), model(n))
            loss.backward()
            optimizer.step()
            return loss.detach()
        log = [port_.mean(port_.run(step, args=batch)) for batch in port_.distribute(data)]
        return {**port_.weights(model), "log": log}
    return train_triplet(port)


def _pairs(port, make, score, seed) -> dict:
    """A siamese step: ``criterion(score(model(x1)), score(model(x2)), y)`` with ``y`` in {1, -1}."""
    y = labels(seed, 2).to(F64) * 2 - 1
    torch.manual_seed(seed)
    with port.scope():
        model = net(3)
        optimizer = optim.Adam(model.parameters(), lr=0.05)
        criterion = make()
    model = port.wrap(model)

    def step(x1, x2, y):
        optimizer.zero_grad()
        loss = criterion(score(model(x1)), score(model(x2)), y)
        loss.backward()
        optimizer.step()
        return loss.detach()
    log = [port.mean(port.run(step, args=b)) for b in port.distribute(loader(features(seed), features(seed + 1), y))]
    return {**port.weights(model), "log": log}


def cosine_embedding(port) -> dict:
    return _pairs(port, lambda: nn.CosineEmbeddingLoss(margin=0.2), lambda e: e, 23)


def margin_ranking(port) -> dict:
    return _pairs(port, lambda: nn.MarginRankingLoss(margin=0.1), lambda e: e.sum(1), 25)


# --- CTC ------------------------------------------------------------------------------------------------------
T, CLASSES, MAX_TARGET = 6, 5, 4


def _ctc_data():
    """Frames (N, T, F), padded targets (N, S), their lengths; the first row of every shard has ``[1, 1, 1, 1]``
    (7 frames needed, 6 given: an infinite loss)."""
    rows = STEPS * GLOBAL_BATCH
    frames = features(27, rows=rows * T).view(rows, T, -1)
    g = torch.Generator().manual_seed(28)
    targets = torch.randint(1, CLASSES, (rows, MAX_TARGET), generator=g)
    lengths = torch.randint(1, MAX_TARGET + 1, (rows,), generator=g)
    targets[::GLOBAL_BATCH // 2] = 1
    lengths[::GLOBAL_BATCH // 2] = MAX_TARGET
    return loader(frames, targets, lengths)


def _ctc(port, reduction: str) -> dict:
    make = lambda: nn.CTCLoss(blank=0, reduction=reduction, zero_infinity=True)  # noqa: E731

    def loss_of(criterion, out, targets, target_lengths):
        log_probs = out.log_softmax(2).transpose(0, 1)   # (T, N, C)
        input_lengths = torch.full((out.shape[0],), T, dtype=torch.long)
        return criterion(log_probs, targets, input_lengths, target_lengths)
    return train(port, CLASSES, make, _ctc_data(), loss_of, lr=0.05 if reduction == "mean" else 0.01)


def ctc_mean_zero_infinity(port) -> dict:
    """``reduction='mean'``: each sequence's loss over its target length, then the shard's mean."""
    return _ctc(port, "mean")


def ctc_sum_zero_infinity(port) -> dict:
    return _ctc(port, "sum")


# --- token-normalised language-model losses ---------------------------------------------------------------------
VOCAB, LENGTH = 7, 5


def _tokens(steps: int = STEPS):
    """Token ids (N, L) and next-token labels with -100 padding: rows of 1 to 4 real labels, uneven shards."""
    rows = steps * GLOBAL_BATCH
    g = torch.Generator().manual_seed(30)
    ids = torch.randint(0, VOCAB, (rows, LENGTH), generator=g)
    lab = torch.roll(ids, -1, dims=1)
    keep = torch.randint(1, LENGTH, (rows,), generator=g)
    keep[GLOBAL_BATCH // 2:GLOBAL_BATCH] = 1   # step 1: replica 1's shard has a quarter of the tokens
    lab[torch.arange(LENGTH)[None, :] >= keep[:, None]] = -100
    return loader(ids, lab)


def _lm():
    return nn.Sequential(nn.Embedding(VOCAB, 4), nn.Tanh(), nn.Linear(4, VOCAB)).double()


def _token_sum(model, ids, lab):
    logits = model(ids)
    return F.cross_entropy(logits.view(-1, VOCAB), lab.view(-1), ignore_index=-100, reduction="sum")


def _lm_loop(port, step, data, lr=0.1) -> dict:
    torch.manual_seed(31)
    with port.scope():
        model = _lm()
        optimizer = optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    model = port.wrap(model)
    log = [port.sum(port.run(step(model, optimizer), args=b)) for b in port.distribute(data)]
    return {**port.weights(model), "log": log}


def _global_count_step(all_reduce, times_world):
    def make(model, optimizer):
        def step(ids, lab):
            num_tokens = (lab != -100).sum()
            all_reduce(num_tokens)
            loss = _token_sum(model, ids, lab) / num_tokens
            if times_world is not None:   # HF Trainer: `loss *= world_size` (the gradients are averaged)
                loss = loss * times_world()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.detach()
        return step
    return make


def tokens_over_global_count(port) -> dict:
    """``loss = F.cross_entropy(..., reduction='sum') / num_tokens`` with ``dist.all_reduce(num_tokens)``."""
    return _lm_loop(port, _global_count_step(port.all_reduce_, None), _tokens())


def tokens_num_items_times_world(port) -> dict:
    """HF Trainer's ``average_tokens_across_devices``: the global count, the loss times the world size."""
    return _lm_loop(port, _global_count_step(port.all_reduce_, port.world_size), _tokens())


def tokens_dist_all_reduce_as_printed(port) -> dict:
    """``dist.all_reduce(num_tokens)`` kept in the step: refused inside ``strategy.run`` (naming the port)."""
    return _lm_loop(port, _global_count_step(dist.all_reduce, dist.get_world_size), _tokens())


def tokens_accumulation_num_items(port) -> dict:
    """HF Trainer with ``gradient_accumulation_steps=2``: the micro-batches' tokens counted before the forward
    (``num_items_in_batch``, summed over the ranks), each micro-batch's ``sum / num_items * world_size``
    backward, one optimizer step per 2 micro-batches."""
    torch.manual_seed(31)
    with port.scope():
        model = _lm()
        optimizer = optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.01)
    model = port.wrap(model)
    count = lambda lab: (lab != -100).sum()  # noqa: E731

    def micro_step(ids, lab, num_items, last):
        loss = _token_sum(model, ids, lab) / num_items * port.world_size()
        loss.backward()
        if last:
            optimizer.step()
            optimizer.zero_grad()
        return loss.detach()

    batches, log = list(port.distribute(_tokens(steps=4))), []
    for i in range(0, len(batches), 2):
        micro = batches[i:i + 2]
        num_items = torch.tensor(sum(port.sum(port.run(count, args=(lab,))) for _, lab in micro))
        for j, (ids, lab) in enumerate(micro):
            log.append(port.sum(port.run(micro_step, args=(ids, lab, num_items, j == 1))))
    return {**port.weights(model), "log": log}


def accumulation_mean_over_steps(port) -> dict:
    """The plain accumulation loop: ``loss = criterion(out, y) / accumulation_steps``, ``backward`` every
    micro-batch, ``optimizer.step(); optimizer.zero_grad()`` every 2nd."""
    accumulation_steps = 2
    torch.manual_seed(32)
    with port.scope():
        model = net(3)
        optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model = port.wrap(model)
    criterion = nn.CrossEntropyLoss()

    def step(x, y, i):
        loss = criterion(model(x), y) / accumulation_steps
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
        return loss.detach()

    data = loader(features(33, rows=4 * GLOBAL_BATCH), labels(34, 3, rows=4 * GLOBAL_BATCH))
    log = [port.mean(port.run(step, args=(x, y, i))) for i, (x, y) in enumerate(port.distribute(data))]
    return {**port.weights(model), "log": log}
