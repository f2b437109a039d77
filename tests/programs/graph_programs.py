"""Graph neural networks written from scratch as their public sources print them, ported with two lines:

* Kipf's GCN (tkipf/pygcn's ``GraphConvolution``: ``torch.mm`` then ``torch.sparse.mm(adj, support)``) on
  the symmetrically normalised adjacency ``D^-1/2 (A + I) D^-1/2`` built with ``index_add_`` and
  ``torch.sparse_coo_tensor``: full-batch node classification with a ``train_mask`` (every DDP rank trains on
  the whole graph: the graph goes to ``strategy.run`` as a plain argument), and the training nodes split
  between the ranks (the node ids through the distributed dataset, the graph whole);
* a GAT layer with a segment softmax (``scatter_reduce(..., reduce="amax")`` for the maximum, ``index_add_``
  for the sums and the messages), trained on mini-batches of seed nodes whose one-hop subgraph the step
  samples (``torch.randint`` picks which neighbours to keep, on each replica what each rank draws);
* GraphSAGE's mean aggregator (``index_add_`` and in-degrees), on sampled subgraphs built by a ``collate_fn``
  (PyG's ``NeighborLoader`` shape): each rank's loader samples its own seeds' subgraphs.

Each is ``case(port) -> dict`` over ``graph_run``'s ports. Float64, synthetic seeded graphs. Imports only
torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
NODES, FEATURES, CLASSES = 24, 5, 3


def _graph(seed: int = 7):
    """A random undirected graph with self-loops as ``edge_index`` (2, E), features and labels."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(NODES, FEATURES, generator=g, dtype=F64)
    a = torch.rand(NODES, NODES, generator=g) < 0.15
    a = (a | a.t()) | torch.eye(NODES, dtype=torch.bool)
    edge_index = a.nonzero().t().contiguous()
    y = (x @ torch.randn(FEATURES, CLASSES, generator=g, dtype=F64)).argmax(1)
    return x, edge_index, y


def normalized_adjacency(edge_index, num_nodes):
    """``D^-1/2 A D^-1/2`` as a sparse COO matrix (degrees summed with ``index_add_``)."""
    row, col = edge_index
    deg = torch.zeros(num_nodes, dtype=F64).index_add_(0, row, torch.ones(row.numel(), dtype=F64))
    d_inv_sqrt = deg.pow(-0.5)
    values = d_inv_sqrt[row] * d_inv_sqrt[col]
    return torch.sparse_coo_tensor(edge_index, values, (num_nodes, num_nodes)).coalesce()


# --- tkipf/pygcn ------------------------------------------------------------------------------------------
class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super(GraphConvolution, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.DoubleTensor(in_features, out_features))
        if bias:
            self.bias = nn.Parameter(torch.DoubleTensor(out_features))
        else:
            self.register_parameter('bias', None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1. / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.sparse.mm(adj, support)
        if self.bias is not None:
            return output + self.bias
        return output


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super(GCN, self).__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


def _gcn_setup(port):
    torch.manual_seed(3)
    x, edge_index, y = _graph()
    adj = normalized_adjacency(edge_index, NODES)
    with port.scope():
        model = GCN(nfeat=FEATURES, nhid=8, nclass=CLASSES, dropout=0.5)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=5e-4)
    return x, adj, y, model, optimizer


def gcn_full_graph(port) -> dict:
    """Full-batch training with a boolean ``train_mask``: every replica (rank) the whole graph."""
    x, adj, y, model, optimizer = _gcn_setup(port)
    train_mask = torch.zeros(NODES, dtype=torch.bool)
    train_mask[:16] = True
    net = port.wrap(model)

    def train(features, adj, labels, mask):
        model.train()
        optimizer.zero_grad()
        output = net(features, adj)
        loss_train = F.nll_loss(output[mask], labels[mask])
        acc_train = (output[mask].argmax(1) == labels[mask]).double().mean()
        loss_train.backward()
        optimizer.step()
        return loss_train.detach(), acc_train

    log = [[port.mean(v) for v in port.run(train, args=(x, adj, y, train_mask))] for _ in range(5)]
    model.eval()
    with torch.no_grad():
        log.append(F.nll_loss(model(x, adj)[~train_mask], y[~train_mask]).item())
    return {**port.weights(net), "log": log}


def gcn_node_split(port) -> dict:
    """The training nodes split between the ranks (each its half of ``idx_train``), the graph whole."""
    x, adj, y, model, optimizer = _gcn_setup(port)
    idx_train = torch.randperm(NODES)[:16]
    net = port.wrap(model)

    def train(idx):
        optimizer.zero_grad()
        output = net(x, adj)
        loss = F.nll_loss(output[idx], y[idx])
        loss.backward()
        optimizer.step()
        return loss.detach()

    loader = DataLoader(TensorDataset(idx_train), batch_size=len(idx_train))
    log = [port.mean(port.run(train, args=batch)) for _ in range(4) for batch in port.distribute(loader)]
    return {**port.weights(net), "log": log}


class GCNWithAdjacency(GCN):
    """The same GCN holding its normalised adjacency: ``model(x)``. As a (sparse) buffer, or as a plain
    attribute, which DDP needs (its buffer broadcast raises "No support for sparse tensors")."""

    def __init__(self, adj, as_buffer, **kwargs):
        super().__init__(**kwargs)
        if as_buffer:
            self.register_buffer("adj", adj)
        else:
            self.adj = adj

    def forward(self, x):
        return super().forward(x, self.adj)


def _gcn_adjacency(port, as_buffer: bool) -> dict:
    torch.manual_seed(3)
    x, edge_index, y = _graph()
    with port.scope():
        model = GCNWithAdjacency(normalized_adjacency(edge_index, NODES), as_buffer, nfeat=FEATURES, nhid=8,
                                 nclass=CLASSES, dropout=0.5)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=5e-4)
    net = port.wrap(model)

    def train(idx):
        optimizer.zero_grad()
        loss = F.nll_loss(net(x)[idx], y[idx])
        loss.backward()
        optimizer.step()
        return loss.detach()

    loader = DataLoader(TensorDataset(torch.arange(16)), batch_size=16)
    log = [port.mean(port.run(train, args=batch)) for _ in range(3) for batch in port.distribute(loader)]
    adj = model.state_dict()["adj"] if as_buffer else model.adj
    log.append([float(adj.to_dense().sum()), int(adj.is_sparse)])
    return {**port.weights(net), "log": log}


def gcn_adjacency_buffer(port) -> dict:
    """``register_buffer("adj", sparse_adj)``: a sparse buffer of a model built in the scope (its copies
    compared after the first run, broadcast to the workers, summed across them when read outside a run)."""
    return _gcn_adjacency(port, as_buffer=True)


def gcn_adjacency_attribute(port) -> dict:
    """``self.adj = sparse_adj``: DDP's way to keep it."""
    return _gcn_adjacency(port, as_buffer=False)


# --- GAT with a segment softmax ----------------------------------------------------------------------------
class GATLayer(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.W = nn.Linear(in_dim, out_dim, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, out_dim))
        self.att_dst = nn.Parameter(torch.empty(1, out_dim))
        nn.init.xavier_uniform_(self.att_src)
        nn.init.xavier_uniform_(self.att_dst)

    def forward(self, x, edge_index):
        src, dst = edge_index
        h = self.W(x)
        alpha = F.leaky_relu((h * self.att_src).sum(-1)[src] + (h * self.att_dst).sum(-1)[dst], 0.2)
        # softmax over each node's incoming edges: max, exp, sum per segment
        alpha_max = torch.full((x.size(0),), float("-inf"), dtype=h.dtype).scatter_reduce(
            0, dst, alpha, reduce="amax", include_self=True)
        alpha = (alpha - alpha_max[dst]).exp()
        denom = torch.zeros(x.size(0), dtype=h.dtype).index_add_(0, dst, alpha)
        alpha = alpha / denom[dst]
        out = torch.zeros_like(h)
        out.index_add_(0, dst, alpha.unsqueeze(-1) * h[src])
        return out


class GAT(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = GATLayer(FEATURES, 8), GATLayer(8, CLASSES)

    def forward(self, x, edge_index):
        return self.conv2(F.elu(self.conv1(x, edge_index)), edge_index)


def sample_one_hop(seeds, edge_index, keep: float = 0.7):
    """The seeds' incoming edges, each kept with probability ``keep`` (``torch.randint`` draws), relabelled."""
    src, dst = edge_index
    edges = edge_index[:, torch.isin(dst, seeds)]
    edges = edges[:, (torch.randint(0, 10, (edges.size(1),)) < keep * 10) | (edges[0] == edges[1])]
    nodes = torch.cat([seeds, edges[0]]).unique()
    relabel = torch.full((NODES,), -1, dtype=torch.long)
    relabel[nodes] = torch.arange(nodes.numel())
    return nodes, relabel[edges], relabel[seeds]


def gat_sampled_in_step(port) -> dict:
    """Batches of 8 seed nodes (4 per rank); the step samples their one-hop subgraph and trains on it."""
    torch.manual_seed(5)
    x, edge_index, y = _graph(11)
    with port.scope():
        model = GAT().double()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    net = port.wrap(model)

    def train_step(seeds):
        nodes, sub_edges, seed_pos = sample_one_hop(seeds, edge_index)
        optimizer.zero_grad()
        out = net(x[nodes], sub_edges)
        loss = F.cross_entropy(out[seed_pos], y[seeds])
        loss.backward()
        optimizer.step()
        return loss.detach()

    order = torch.randperm(NODES, generator=torch.Generator().manual_seed(1))
    loader = DataLoader(TensorDataset(order), batch_size=8)
    log = [port.mean(port.run(train_step, args=batch)) for _ in range(2) for batch in port.distribute(loader)]
    return {**port.weights(net), "log": log}


# --- GraphSAGE (mean aggregator) on subgraphs sampled by a collate_fn ---------------------------------------
class SAGEConv(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.lin_l, self.lin_r = nn.Linear(in_dim, out_dim), nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, x, edge_index):
        src, dst = edge_index
        agg = torch.zeros_like(x).index_add_(0, dst, x[src])
        deg = torch.zeros(x.size(0), dtype=x.dtype).index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
        agg = agg / deg.clamp(min=1).unsqueeze(-1)
        return F.normalize(self.lin_l(agg) + self.lin_r(x), p=2.0, dim=-1)


class SAGE(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = SAGEConv(FEATURES, 8), SAGEConv(8, 8)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, x, edge_index):
        return self.head(self.conv2(F.relu(self.conv1(x, edge_index)), edge_index))


def _sage_collate(graph):
    x, edge_index, y = graph

    def collate(batch):
        seeds = torch.stack(batch)
        nodes, sub_edges, seed_pos = sample_one_hop(seeds, edge_index)
        return x[nodes], sub_edges, seed_pos, y[seeds]   # subgraph sizes differ from batch to batch
    return collate


def _sage_train(port, batches) -> dict:
    torch.manual_seed(9)
    with port.scope():
        model = SAGE().double()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    net = port.wrap(model)

    def train_step(x, sub_edges, seed_pos, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x, sub_edges)[seed_pos], y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(train_step, args=batch)) for _ in range(2) for batch in batches()]
    return {**port.weights(net), "log": log}


def sage_collate_per_rank(port) -> dict:
    """Each rank's loader over its own seeds (``DistributedSampler``'s layout) collates its subgraphs: the
    port's ``per_rank`` is ``distribute_datasets_from_function`` with one pipeline per replica."""
    graph = _graph(13)
    seeds = torch.randperm(NODES, generator=torch.Generator().manual_seed(2))

    def loader(num_replicas, rank):
        return DataLoader(list(seeds[rank::num_replicas]), batch_size=4, collate_fn=_sage_collate(graph))
    return _sage_train(port, lambda: port.per_rank(loader))


def sage_collate_as_printed(port) -> dict:
    """The global loader's subgraph batches through ``experimental_distribute_dataset``: a subgraph is no
    batch to cut along dimension 0 (refused; strategies only)."""
    graph = _graph(13)
    seeds = torch.randperm(NODES, generator=torch.Generator().manual_seed(2))
    loader = DataLoader(list(seeds), batch_size=8, collate_fn=_sage_collate(graph))
    return _sage_train(port, lambda: port.distribute(loader))


GRAPHS = {f.__name__: f for f in (gcn_full_graph, gcn_node_split, gcn_adjacency_buffer, gcn_adjacency_attribute,
                                   gat_sampled_in_step, sage_collate_per_rank)}
GRAPHS_STRATEGY_ONLY = {f.__name__: f for f in (sage_collate_as_printed,)}
