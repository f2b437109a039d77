"""A recurrent module whose weights are computed at each call (``parametrizations.weight_norm(lstm,
"weight_hh_l0")``, the legacy ``weight_norm``'s pre-hook, AWD-LSTM's ``WeightDrop`` setting the dropped weight
in ``forward``) runs in replicas as on one device (``multidev/distribute/rnn_hooks.py``).

``rnn_hooks`` kept the distributed variables themselves in torch's ``_flat_weights`` list, reading them from
``_parameters``; a weight computed per call is not there, so the list held ``None`` for it and every replica
failed with "expected Tensor as element 1 in argument 2, but got NoneType", where DDP trains.
"""

from __future__ import annotations

from tests.conftest import run_fresh


def test_computed_recurrent_weights_train_as_on_one_device():
    proc = run_fresh("""
import torch
from torch import nn
import multidev as md

class WeightDrop(nn.Module):   # AWD-LSTM's, as printed (dropout 0 here: the reference draws no masks)
    def __init__(self, module, weights, dropout=0.0):
        super().__init__()
        self.module, self.weights, self.dropout = module, weights, dropout
        for name_w in self.weights:
            w = getattr(self.module, name_w)
            del self.module._parameters[name_w]
            self.module.register_parameter(name_w + '_raw', nn.Parameter(w.data))

    def forward(self, *args):
        for name_w in self.weights:
            raw_w = getattr(self.module, name_w + '_raw')
            setattr(self.module, name_w, nn.functional.dropout(raw_w, p=self.dropout, training=self.training))
        return self.module.forward(*args)

def parametrized():
    return nn.utils.parametrizations.weight_norm(nn.LSTM(3, 4, batch_first=True), "weight_hh_l0")

def legacy():
    return nn.utils.weight_norm(nn.GRU(3, 4, batch_first=True), "weight_ih_l0")

def weight_drop():
    return WeightDrop(nn.LSTM(3, 4, batch_first=True), ["weight_hh_l0"])

x = torch.randn(8, 5, 3, dtype=torch.float64)
strategy = md.distribute.MirroredStrategy()
for build in (parametrized, legacy, weight_drop):
    torch.manual_seed(0)
    ref = build().double()
    opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    for _ in range(3):   # DDP's update: the mean of the two halves' gradients
        opt.zero_grad()
        (sum(ref(h)[0].pow(2).mean() for h in x.split(4)) / 2).backward()
        opt.step()
    with strategy.scope():
        torch.manual_seed(0)
        model = build().double()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    def step(xb):
        optimizer.zero_grad()
        loss = model(xb)[0].pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(3):
        for batch in strategy.experimental_distribute_dataset(torch.utils.data.DataLoader(x, batch_size=8)):
            strategy.run(step, args=(batch,))
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        local = strategy.experimental_local_results(p)
        assert max(float((c - q).abs().max()) for c in local) < 1e-12, (build.__name__, name)
    print(build.__name__, "as on one device")
print("OK")
""", env={"MULTIDEV_LOGICAL_CPUS": "2"})
    assert "OK" in proc.stdout, proc.stdout + proc.stderr
