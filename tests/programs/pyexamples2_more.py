"""More pytorch/examples programs as printed with the port's changes only
(``pyexamples2.py`` says which; runners in ``pyexamples2_run.py``), float64:

* mnist_forward_forward: ``Layer(nn.Linear)`` with its own Adam built in ``__init__``, ``Net.layers`` a
  plain list, ``net.train(x_pos, x_neg)`` looping ``layer.train`` (``opt.step()`` per layer per epoch),
  the whole set one batch (each replica, each rank, its half), ``predict`` outside. Under DDP the
  layers cannot be wrapped (``DistributedDataParallel.train`` is ``Module.train``): the DDP reference
  averages the gradients by hand after ``backward()``, a no-op in multidev;
* gcn: full-graph training, every replica (rank) the whole graph, passed to ``strategy.run`` as is:
  a sparse adjacency through ``torch.spmm``, ``output[idx_train]``, ``test`` under ``model.eval()`` /
  ``no_grad`` inside the step, Adam with weight decay, dropout;
* time_sequence_prediction: two ``LSTMCell``s unrolled in ``forward``, ``optim.LBFGS(lr=0.8)`` stepped
  with a closure, the future predicted outside under ``no_grad``;
* regression: polynomial features, ``get_batch()`` drawing ``torch.randn`` in the step (each replica as
  its rank: the same batch), ``F.smooth_l1_loss``, ``output.item()``, the manual update
  ``param.data.add_(-0.1 * param.grad.data)``, the loop stopping on the (mean) loss;
* siamese_network (``vision_examples.py`` has it without BatchNorm): two ``forward_once`` calls through
  one network with BatchNorm, ``BCELoss`` on pairs, Adadelta with ``StepLR``; the running statistics.

This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

from itertools import count

import numpy as np
import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.optim import Adam
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

try:   # the runners put this directory on sys.path; pytest imports the package
    from vision_examples import SiameseNetwork
except ImportError:
    from tests.programs.vision_examples import SiameseNetwork

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- mnist_forward_forward -----------------------------------------------------------------------------------
def overlay_y_on_x(x, y):
    """Replace the first 10 pixels of data [x] with one-hot-encoded label [y]."""
    x_ = x.clone()
    x_[:, :10] *= 0.0
    x_[range(x.shape[0]), y] = x.max()
    return x_


class FFNet(torch.nn.Module):
    def __init__(self, port, dims):
        super().__init__()
        self.layers = []
        for d in range(len(dims) - 1):
            self.layers = self.layers + [Layer(port, dims[d], dims[d + 1])]

    def predict(self, x):
        goodness_per_label = []
        for label in range(10):
            h = overlay_y_on_x(x, label)
            goodness = []
            for layer in self.layers:
                h = layer(h)
                goodness = goodness + [h.pow(2).mean(1)]
            goodness_per_label += [sum(goodness).unsqueeze(1)]
        goodness_per_label = torch.cat(goodness_per_label, 1)
        return goodness_per_label.argmax(1)

    def train(self, x_pos, x_neg):
        h_pos, h_neg = x_pos, x_neg
        for i, layer in enumerate(self.layers):
            h_pos, h_neg = layer.train(h_pos, h_neg)


class Layer(nn.Linear):
    def __init__(self, port, in_features, out_features, bias=True, device=None, dtype=F64):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.port = port
        self.relu = torch.nn.ReLU()
        self.opt = Adam(self.parameters(), lr=0.03)
        self.threshold = 2.0
        self.num_epochs = 4

    def forward(self, x):
        x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

    def train(self, x_pos, x_neg):
        for i in range(self.num_epochs):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            # The following loss pushes pos (neg) samples to values larger (smaller) than the self.threshold.
            loss = torch.log(1 + torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))).mean()
            self.opt.zero_grad()
            loss.backward()   # this backward just compute the derivative and hence is not considered backpropagation.
            self.port.average_gradients(self.parameters())   # DDP's reference only (see the module docstring)
            self.opt.step()
        return self.forward(x_pos).detach(), self.forward(x_neg).detach()


def forward_forward(port) -> dict:
    torch.manual_seed(1234)
    x_all = torch.rand(16, 24, generator=_gen(80), dtype=F64)
    y_all = (x_all[:, 10:] @ torch.randn(14, 10, generator=_gen(81), dtype=F64)).argmax(1)
    train_loader = DataLoader(TensorDataset(x_all, y_all), batch_size=16)   # the whole set: one batch
    with port.scope():
        net = FFNet(port, [24, 12, 12])

    def train(x, y):   # main's lines between loading and net.train, on this replica's half
        x_pos = overlay_y_on_x(x, y)
        rnd = torch.randperm(x.size(0))
        x_neg = overlay_y_on_x(x, y[rnd])
        net.train(x_pos, x_neg)

    for x, y in port.distribute(train_loader):
        port.run(train, args=(x, y))
    train_error = 1.0 - net.predict(x_all).eq(y_all).float().mean().item()
    layers = [port.module(layer) for layer in net.layers]
    return {**port.weights(*layers), "log": [train_error]}


# --- gcn ----------------------------------------------------------------------------------------------------
class GraphConv(nn.Module):
    def __init__(self, input_dim, output_dim, use_bias=False):
        super(GraphConv, self).__init__()
        self.kernel = nn.Parameter(torch.empty(input_dim, output_dim, dtype=F64))
        nn.init.xavier_normal_(self.kernel)   # Initialize the weights using Xavier initialization
        self.bias = None
        if use_bias:
            self.bias = nn.Parameter(torch.zeros(output_dim, dtype=F64))

    def forward(self, input_tensor, adj_mat):
        support = torch.mm(input_tensor, self.kernel)   # Matrix multiplication between input and weight matrix
        output = torch.spmm(adj_mat, support)   # Sparse matrix multiplication between adjacency matrix and support
        if self.bias is not None:
            output = output + self.bias
        return output


class GCN(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, use_bias=True, dropout_p=0.1):
        super(GCN, self).__init__()
        self.gc1 = GraphConv(input_dim, hidden_dim, use_bias=use_bias)
        self.gc2 = GraphConv(hidden_dim, output_dim, use_bias=use_bias)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input_tensor, adj_mat):
        x = self.gc1(input_tensor, adj_mat)
        x = F.relu(x)
        x = self.dropout(x)
        x = self.gc2(x, adj_mat)
        return torch.log_softmax(x, dim=1)


def _graph(n=20, features=6, classes=3):
    """A random graph, row-normalised with self-loops (load_cora's), sparse; labels from the features."""
    g = _gen(82)
    x = torch.rand(n, features, generator=g, dtype=F64)
    a = (torch.rand(n, n, generator=g) < 0.2).to(F64)
    a = ((a + a.t()) > 0).to(F64) + torch.eye(n, dtype=F64)
    adj = (a / a.sum(1, keepdim=True)).to_sparse()
    return x, (x @ torch.randn(features, classes, generator=g, dtype=F64)).argmax(1), adj


def gcn_test(model, criterion, input, target, mask):
    model.eval()
    with torch.no_grad():
        output = model(*input)
        output, target = output[mask], target[mask]
        loss = criterion(output, target)
        acc = (output.argmax(dim=1) == target).float().sum() / len(target)
    return loss.item(), acc.item()


def train_iter(epoch, model, optimizer, criterion, input, target, mask_train, mask_val):
    model.train()
    optimizer.zero_grad()
    output = model(*input)   # Forward pass
    loss = criterion(output[mask_train], target[mask_train])   # Compute the loss using the training mask
    loss.backward()
    optimizer.step()
    loss_train, acc_train = gcn_test(model, criterion, input, target, mask_train)
    loss_val, acc_val = gcn_test(model, criterion, input, target, mask_val)
    return tuple(torch.tensor(v, dtype=F64) for v in (loss_train, acc_train, loss_val, acc_val))


def gcn(port) -> dict:
    torch.manual_seed(42)
    features, labels, adj_mat = _graph()
    idx = torch.randperm(len(labels))
    idx_test, idx_val, idx_train = idx[:4], idx[4:8], idx[8:]
    with port.scope():
        model = GCN(features.shape[1], 8, labels.max().item() + 1, True, 0.5)
        optimizer = Adam(model.parameters(), lr=0.05, weight_decay=5e-4)
    net = port.wrap(model)
    criterion = nn.NLLLoss()
    log = []
    for epoch in range(4):
        out = port.run(train_iter, args=(epoch + 1, net, optimizer, criterion, (features, adj_mat), labels,
                                         idx_train, idx_val))
        log.append([port.mean(v) for v in out])
    log.append(list(gcn_test(model, criterion, (features, adj_mat), labels, idx_test)))
    return {**port.weights(net), "log": log}


# --- time_sequence_prediction -------------------------------------------------------------------------------
HIDDEN = 12   # 51 in the example


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, HIDDEN)
        self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
        self.linear = nn.Linear(HIDDEN, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):   # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def _sine_waves(N=11, L=16, T=4):
    """generate_sine_wave.py's data, smaller."""
    rng = np.random.RandomState(2)
    x = np.empty((N, L), "int64")
    x[:] = np.array(range(L)) + rng.randint(-4 * T, 4 * T, N).reshape(N, 1)
    return torch.from_numpy(np.sin(x / 1.0 / T).astype("float64"))


def time_sequence_prediction(port) -> dict:
    np.random.seed(0)
    torch.manual_seed(0)
    data = _sine_waves()
    input, target = data[3:, :-1], data[3:, 1:]
    test_input, test_target = data[:3, :-1], data[:3, 1:]
    with port.scope():
        seq = Sequence()   # build the model
        seq.double()
        criterion = nn.MSELoss()
        optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=5)   # use LBFGS as optimizer
    model = port.wrap(seq)
    loader = DataLoader(TensorDataset(input, target), batch_size=len(input))

    def train_step(input, target):
        losses = []

        def closure():
            optimizer.zero_grad()
            out = model(input)
            loss = criterion(out, target)
            losses.append(loss.detach())   # print('loss:', loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        return losses[0], losses[-1], torch.tensor(float(len(losses)), dtype=F64)

    log = []
    for i in range(2):   # begin to train
        for input_i, target_i in port.distribute(loader):
            log += [port.mean(v) for v in port.run(train_step, args=(input_i, target_i))]
        with torch.no_grad():   # begin to predict, no need to track gradient here
            future = 4
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            log += [loss.item(), float(pred[:, -future:].sum())]
    return {**port.weights(model), "log": log}


# --- regression -------------------------------------------------------------------------------------------
POLY_DEGREE = 4


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def regression(port) -> dict:
    torch.manual_seed(3)
    W_target = torch.randn(POLY_DEGREE, 1, dtype=F64) * 5
    b_target = torch.randn(1, dtype=F64) * 5

    def f(x):
        """Approximated function."""
        return x.mm(W_target) + b_target.item()

    def get_batch(batch_size=8):
        """Builds a batch i.e. (x, f(x)) pair."""
        random = torch.randn(batch_size, dtype=F64)
        x = make_features(random)
        y = f(x)
        return x, y

    with port.scope():
        fc = torch.nn.Linear(W_target.size(0), 1).double()   # Define model
    model = port.wrap(fc)

    def step():
        batch_x, batch_y = get_batch()   # Get data
        fc.zero_grad()   # Reset gradients
        output = F.smooth_l1_loss(model(batch_x), batch_y)   # Forward pass
        loss = output.item()
        output.backward()   # Backward pass
        for param in fc.parameters():   # Apply gradients
            param.data.add_(-0.05 * param.grad.data)
        return torch.tensor(loss, dtype=F64)

    log = []
    for batch_idx in count(1):
        loss = port.mean(port.run(step))
        log.append(loss)
        if loss < 1e-3 or batch_idx == 6:   # Stop criterion (and a few steps)
            break
    return {**port.weights(model), "log": log}


# --- siamese_network ------------------------------------------------------------------------------------------
class SiameseWithBatchNorm(SiameseNetwork):
    """``vision_examples.py``'s network (the example's, a small backbone for ResNet-18) with ResNet's
    BatchNorm back: ``forward_once`` runs it twice a step."""

    def __init__(self):
        super().__init__()
        self.resnet = nn.Sequential(nn.Conv2d(1, 4, 3, 2, 1, bias=False, dtype=F64), nn.BatchNorm2d(4, dtype=F64),
                                    nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)))


def _pairs(seed, n):
    """Image pairs, the target 1 when both show the same class (the sign of their mean)."""
    g = _gen(seed)
    a, b = torch.randn(n, 1, 6, 6, generator=g, dtype=F64), torch.randn(n, 1, 6, 6, generator=g, dtype=F64)
    return TensorDataset(a, b, ((a.mean((1, 2, 3)) > 0) == (b.mean((1, 2, 3)) > 0)).to(F64))


def siamese(port) -> dict:
    torch.manual_seed(1)
    train_loader = DataLoader(_pairs(74, 16), batch_size=8, shuffle=True)
    with port.scope():
        net = SiameseWithBatchNorm()
        optimizer = optim.Adadelta(net.parameters(), lr=1.0)
        scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    model = port.wrap(net, broadcast_buffers=False)   # (the buffers' mean over the ranks: multidev's reading)
    criterion = nn.BCELoss()

    def train_step(images_1, images_2, targets):
        optimizer.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = []
    for epoch in range(1, 3):
        model.train()
        log += [port.mean(port.run(train_step, args=batch)) for batch in port.distribute(train_loader)]
        scheduler.step()
    return {**port.weights(model), "log": log, "buffers": port.buffers(port.module(model))}


EXAMPLES_MORE = {"forward_forward": forward_forward, "gcn": gcn, "time_sequence_prediction": time_sequence_prediction,
                 "regression": regression, "siamese": siamese}
