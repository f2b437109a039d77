"""Recommender and word-embedding programs as their public sources print them, ported with two lines:

* a DLRM-style click model: ``nn.EmbeddingBag(mode="sum", sparse=True)`` with ``per_sample_weights`` and
  ``nn.EmbeddingBag(mode="mean", sparse=True)`` fed flat ids and ``offsets``, an MLP on top; ``SparseAdam``
  over the embedding tables and ``Adam`` over the rest (two optimizers); the bags collated by a ``collate_fn``
  (each rank's loader its own examples), or built in the step from padded histories and their lengths, with
  negatives drawn by ``torch.multinomial`` from item popularity;
* matrix factorisation with the BPR loss (``nn.Embedding(sparse=True)`` users, items, item biases;
  ``SparseAdam``; one negative item per pair from ``torch.randint`` in the step);
* graphsage-simple's supervised GraphSAGE (``MeanAggregator`` samples each node's neighbours with Python's
  ``random.sample`` when it has more than ``num_sample``: each replica, as each rank, draws as many numbers as
  its batch's nodes ask), node batches through the distributed dataset;
* word2vec's skip-gram with negative sampling (Adoni/word2vec-pytorch's ``SkipGramModel``: ``u_embeddings`` /
  ``v_embeddings`` sparse, ``SparseAdam`` + ``CosineAnnealingLR``; and with plain ``SGD``), negatives from the
  unigram distribution to the 3/4 by ``torch.multinomial`` in the step.

Each is ``case(port) -> dict`` over ``graph_run``'s ports. Float64, synthetic seeded data. Imports only torch.
"""
from __future__ import annotations

import random

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
USERS, ITEMS, HISTORY = 10, 16, 4


def _histories(n: int, seed: int):
    """Padded item histories (n, HISTORY), their lengths (1..HISTORY), weights, a target item and a click."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, HISTORY + 1, (n,), generator=g)
    ids = torch.randint(0, ITEMS, (n, HISTORY), generator=g) * (torch.arange(HISTORY) < lengths[:, None])
    weights = torch.rand(n, HISTORY, generator=g, dtype=F64)
    target = torch.randint(0, ITEMS, (n,), generator=g)
    click = (torch.rand(n, generator=g) < 0.5).to(F64)
    return ids, lengths, weights, target, click


class ClickModel(nn.Module):
    """Bags of the user's history (weighted sum) and of the target's (mean), an MLP over both."""

    def __init__(self, dim: int = 4):
        super().__init__()
        self.history = nn.EmbeddingBag(ITEMS, dim, mode="sum", sparse=True)
        self.items = nn.EmbeddingBag(ITEMS, dim, mode="mean", sparse=True)
        self.mlp = nn.Sequential(nn.Linear(2 * dim, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, flat_ids, offsets, per_sample_weights, target_ids):
        h = self.history(flat_ids, offsets, per_sample_weights=per_sample_weights)
        t = self.items(target_ids.unsqueeze(1))
        return self.mlp(torch.cat([h, t], dim=1)).squeeze(1)


def _two_optimizers(model):
    sparse = list(model.history.parameters()) + list(model.items.parameters())
    dense = list(model.mlp.parameters())
    return torch.optim.SparseAdam(sparse, lr=0.05), torch.optim.Adam(dense, lr=0.01)


def _train_clicks(port, batches, with_negatives: bool) -> dict:
    torch.manual_seed(17)
    popularity = torch.arange(1, ITEMS + 1, dtype=F64)
    with port.scope():
        model = ClickModel().double()
        sparse_opt, dense_opt = _two_optimizers(model)
    net = port.wrap(model)

    def train_step(flat_ids, offsets, per_sample_weights, target, click):
        sparse_opt.zero_grad()
        dense_opt.zero_grad()
        logits = net(flat_ids, offsets, per_sample_weights, target)
        loss = F.binary_cross_entropy_with_logits(logits, click)
        if with_negatives:   # one popularity-sampled negative item per example, label 0
            negatives = torch.multinomial(popularity, target.numel(), replacement=True)
            neg_logits = net(flat_ids, offsets, per_sample_weights, negatives)
            loss = loss + F.binary_cross_entropy_with_logits(neg_logits, torch.zeros_like(click))
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        return loss.detach()

    log = [port.mean(port.run(train_step, args=batch)) for _ in range(2) for batch in batches()]
    return {**port.weights(net), "log": log}


def collate_bags(batch):
    """DLRM / torchtext's ``collate_batch``: flat ids, offsets of each bag, weights, targets, clicks."""
    flat, offsets, weights, targets, clicks = [], [0], [], [], []
    for ids, length, w, target, click in batch:
        flat.append(ids[:length])
        weights.append(w[:length])
        offsets.append(int(length))
        targets.append(target)
        clicks.append(click)
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    return torch.cat(flat), offsets, torch.cat(weights), torch.stack(targets), torch.stack(clicks)


def embedding_bag_collate_per_rank(port) -> dict:
    """Each rank's loader over its own examples (``DistributedSampler``'s layout) collates its bags."""
    data = list(zip(*_histories(24, 4)))

    def loader(num_replicas, rank):
        return DataLoader(data[rank::num_replicas], batch_size=4, collate_fn=collate_bags)
    return _train_clicks(port, lambda: port.per_rank(loader), with_negatives=False)


def embedding_bag_collate_as_printed(port) -> dict:
    """The global loader's bags through ``experimental_distribute_dataset``: flat ids and offsets are no
    batch to cut along dimension 0 (refused; strategies only)."""
    loader = DataLoader(list(zip(*_histories(24, 4))), batch_size=8, collate_fn=collate_bags)
    return _train_clicks(port, lambda: port.distribute(loader), with_negatives=False)


def embedding_bag_offsets_in_step(port) -> dict:
    """Padded histories through the distributed dataset; the step makes the flat ids and offsets."""
    loader = DataLoader(TensorDataset(*_histories(24, 5)), batch_size=8)

    def batches():
        for ids, lengths, weights, target, click in port.distribute(loader):
            yield ids, lengths, weights, target, click

    torch.manual_seed(17)
    popularity = torch.arange(1, ITEMS + 1, dtype=F64)
    with port.scope():
        model = ClickModel().double()
        sparse_opt, dense_opt = _two_optimizers(model)
    net = port.wrap(model)

    def train_step(ids, lengths, weights, target, click):
        mask = torch.arange(ids.size(1)) < lengths.unsqueeze(1)
        offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)[:-1]])
        sparse_opt.zero_grad()
        dense_opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(net(ids[mask], offsets, weights[mask], target), click)
        negatives = torch.multinomial(popularity, target.numel(), replacement=True)
        neg = net(ids[mask], offsets, weights[mask], negatives)
        loss = loss + F.binary_cross_entropy_with_logits(neg, torch.zeros_like(click))
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        return loss.detach()

    log = [port.mean(port.run(train_step, args=batch)) for _ in range(2) for batch in batches()]
    return {**port.weights(net), "log": log}


# --- matrix factorisation with BPR --------------------------------------------------------------------------
class BPRMF(nn.Module):
    def __init__(self, n_users, n_items, dim=4):
        super().__init__()
        self.user = nn.Embedding(n_users, dim, sparse=True)
        self.item = nn.Embedding(n_items, dim, sparse=True)
        self.item_bias = nn.Embedding(n_items, 1, sparse=True)
        nn.init.normal_(self.user.weight, std=0.1)
        nn.init.normal_(self.item.weight, std=0.1)
        nn.init.zeros_(self.item_bias.weight)

    def forward(self, u, i, j):
        pu, qi, qj = self.user(u), self.item(i), self.item(j)
        x_ui = (pu * qi).sum(1) + self.item_bias(i).squeeze(1)
        x_uj = (pu * qj).sum(1) + self.item_bias(j).squeeze(1)
        reg = pu.pow(2).sum(1) + qi.pow(2).sum(1) + qj.pow(2).sum(1)
        return x_ui - x_uj, reg


def mf_bpr(port) -> dict:
    """Observed (user, item) pairs; one uniformly drawn negative item per pair in the step."""
    g = torch.Generator().manual_seed(21)
    pairs = TensorDataset(torch.randint(0, USERS, (32,), generator=g), torch.randint(0, ITEMS, (32,), generator=g))
    torch.manual_seed(23)
    with port.scope():
        model = BPRMF(USERS, ITEMS).double()
        optimizer = torch.optim.SparseAdam(model.parameters(), lr=0.05)
    net = port.wrap(model)

    def train_step(u, i):
        j = torch.randint(0, ITEMS, (u.numel(),))
        optimizer.zero_grad()
        x_uij, reg = net(u, i, j)
        loss = -F.logsigmoid(x_uij).mean() + 1e-3 * reg.mean()
        loss.backward()
        optimizer.step()
        return loss.detach()

    loader = DataLoader(pairs, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
    log = [port.mean(port.run(train_step, args=batch)) for _ in range(2) for batch in port.distribute(loader)]
    return {**port.weights(net), "log": log}


# --- word2vec skip-gram with negative sampling (Adoni/word2vec-pytorch) -------------------------------------
class SkipGramModel(nn.Module):
    def __init__(self, emb_size, emb_dimension):
        super(SkipGramModel, self).__init__()
        self.emb_size = emb_size
        self.emb_dimension = emb_dimension
        self.u_embeddings = nn.Embedding(emb_size, emb_dimension, sparse=True)
        self.v_embeddings = nn.Embedding(emb_size, emb_dimension, sparse=True)
        initrange = 1.0 / self.emb_dimension
        nn.init.uniform_(self.u_embeddings.weight.data, -initrange, initrange)
        nn.init.uniform_(self.v_embeddings.weight.data, -0.1, 0.1)   # 0 in the source: no signal in 6 steps

    def forward(self, pos_u, pos_v, neg_v):
        emb_u = self.u_embeddings(pos_u)
        emb_v = self.v_embeddings(pos_v)
        emb_neg_v = self.v_embeddings(neg_v)
        score = torch.sum(torch.mul(emb_u, emb_v), dim=1)
        score = torch.clamp(score, max=10, min=-10)
        score = -F.logsigmoid(score)
        neg_score = torch.bmm(emb_neg_v, emb_u.unsqueeze(2)).squeeze()
        neg_score = torch.clamp(neg_score, max=10, min=-10)
        neg_score = -torch.sum(F.logsigmoid(-neg_score), dim=1)
        return torch.mean(score + neg_score)


def _skip_gram_pairs(vocab: int = 20, tokens: int = 40, window: int = 1):
    g = torch.Generator().manual_seed(31)
    text = torch.randint(0, vocab, (tokens,), generator=g)
    pairs = [(text[i], text[i + d]) for i in range(tokens) for d in range(-window, window + 1)
             if d and 0 <= i + d < tokens][:48]
    counts = torch.bincount(text, minlength=vocab).to(F64)
    return TensorDataset(torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])), counts


def _word2vec(port, make_optimizer) -> dict:
    pairs, counts = _skip_gram_pairs()
    noise = counts.pow(0.75) + 1e-3   # unigram^(3/4); never-seen words a little mass
    torch.manual_seed(29)
    with port.scope():
        skip_gram_model = SkipGramModel(len(counts), 6).double()
        optimizer, scheduler = make_optimizer(skip_gram_model)
    net = port.wrap(skip_gram_model)

    def train_step(pos_u, pos_v):
        neg_v = torch.multinomial(noise, pos_u.numel() * 3, replacement=True).view(-1, 3)
        optimizer.zero_grad()
        loss = net(pos_u, pos_v, neg_v)
        loss.backward()
        optimizer.step()
        scheduler.step()
        return loss.detach()

    loader = DataLoader(pairs, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(1))
    log = [port.mean(port.run(train_step, args=batch)) for _ in range(2) for batch in port.distribute(loader)]
    return {**port.weights(net), "log": log}


def word2vec_sparse_adam(port) -> dict:
    def make(model):
        optimizer = torch.optim.SparseAdam(list(model.parameters()), lr=0.05)
        return optimizer, torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 6)
    return _word2vec(port, make)


def word2vec_sgd(port) -> dict:
    def make(model):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        return optimizer, torch.optim.lr_scheduler.StepLR(optimizer, 3, gamma=0.5)
    return _word2vec(port, make)


# --- williamleif/graphsage-simple ---------------------------------------------------------------------------
class MeanAggregator(nn.Module):
    def __init__(self, features, gcn=False):
        super(MeanAggregator, self).__init__()
        self.features = features
        self.gcn = gcn

    def forward(self, nodes, to_neighs, num_sample=10):
        _set = set
        if num_sample is not None:
            _sample = random.sample
            samp_neighs = [_set(_sample(sorted(to_neigh), num_sample)) if len(to_neigh) >= num_sample else to_neigh
                           for to_neigh in to_neighs]
        else:
            samp_neighs = to_neighs
        if self.gcn:
            samp_neighs = [samp_neigh | set([nodes[i]]) for i, samp_neigh in enumerate(samp_neighs)]
        unique_nodes_list = list(set.union(*samp_neighs))
        unique_nodes = {n: i for i, n in enumerate(unique_nodes_list)}
        mask = torch.zeros(len(samp_neighs), len(unique_nodes), dtype=F64)
        column_indices = [unique_nodes[n] for samp_neigh in samp_neighs for n in samp_neigh]
        row_indices = [i for i in range(len(samp_neighs)) for j in range(len(samp_neighs[i]))]
        mask[row_indices, column_indices] = 1
        num_neigh = mask.sum(1, keepdim=True)
        mask = mask.div(num_neigh)
        embed_matrix = self.features(torch.LongTensor(unique_nodes_list))
        return mask.mm(embed_matrix)


class Encoder(nn.Module):
    def __init__(self, features, feature_dim, embed_dim, adj_lists, aggregator, num_sample=10):
        super(Encoder, self).__init__()
        self.features, self.feat_dim, self.adj_lists, self.aggregator = features, feature_dim, adj_lists, aggregator
        self.num_sample = num_sample
        self.weight = nn.Parameter(torch.empty(embed_dim, 2 * self.feat_dim, dtype=F64))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, nodes):
        neigh_feats = self.aggregator.forward(nodes, [self.adj_lists[int(node)] for node in nodes], self.num_sample)
        self_feats = self.features(torch.LongTensor(nodes))
        combined = torch.cat([self_feats, neigh_feats], dim=1)
        return F.relu(self.weight.mm(combined.t()))


class SupervisedGraphSage(nn.Module):
    def __init__(self, num_classes, enc):
        super(SupervisedGraphSage, self).__init__()
        self.enc = enc
        self.xent = nn.CrossEntropyLoss()
        self.weight = nn.Parameter(torch.empty(num_classes, enc.weight.size(0), dtype=F64))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, nodes):
        return self.weight.mm(self.enc(nodes)).t()

    def loss(self, nodes, labels):
        return self.xent(self.forward(nodes), labels.squeeze())


def graphsage_simple(port) -> dict:
    """run_cora's loop on a small random graph: nodes of every degree, ``num_sample=3``, SGD."""
    g = torch.Generator().manual_seed(37)
    nodes, feat_dim = 24, 5
    feat_data = torch.rand(nodes, feat_dim, generator=g, dtype=F64)
    labels = (feat_data @ torch.randn(feat_dim, 3, generator=g, dtype=F64)).argmax(1)
    adj_lists = {i: set() for i in range(nodes)}
    for a, b in torch.randint(0, nodes, (60, 2), generator=g).tolist():
        if a != b:
            adj_lists[a].add(b)
            adj_lists[b].add(a)
    random.seed(1)
    torch.manual_seed(1)
    with port.scope():
        features = nn.Embedding(nodes, feat_dim).double()
        features.weight = nn.Parameter(feat_data.clone(), requires_grad=False)
        agg1 = MeanAggregator(features, gcn=True)
        enc1 = Encoder(features, feat_dim, 8, adj_lists, agg1, num_sample=3)
        graphsage = SupervisedGraphSage(3, enc1)
        optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, graphsage.parameters()), lr=0.7)
    net = port.wrap(graphsage)

    def train_step(batch_nodes):
        optimizer.zero_grad()
        loss = graphsage.xent(net(batch_nodes.tolist()), labels[batch_nodes])   # graphsage.loss, through DDP's forward
        loss.backward()
        optimizer.step()
        return loss.detach()

    loader = DataLoader(TensorDataset(torch.randperm(nodes, generator=g)), batch_size=8)
    log = [port.mean(port.run(train_step, args=batch)) for _ in range(2) for batch in port.distribute(loader)]
    return {**port.weights(net), "log": log}


RECOMMENDERS = {f.__name__: f for f in (embedding_bag_collate_per_rank, embedding_bag_offsets_in_step, mf_bpr,
                                         word2vec_sparse_adam, word2vec_sgd, graphsage_simple)}
RECOMMENDERS_STRATEGY_ONLY = {f.__name__: f for f in (embedding_bag_collate_as_printed,)}
