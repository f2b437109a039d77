"""Recurrent modules (``nn.GRU``/``nn.LSTM``/``nn.RNN``) built in the scope run each replica on its own
copies (``multidev/distribute/rnn_hooks.py``).

torch caches a recurrent module's weights in ``self._flat_weights`` and rebuilds that list in ``forward``
when the attributes changed; inside ``strategy.run`` the attributes are the replica's copies, so each
replica rebuilt the shared list with its own copies and another replica could run on them (1 run in 30 of
PyTorch's seq2seq tutorial under load). Here the window is made wide on purpose: replica 0 sleeps inside
the rebuild (torch's ``_init_flat_weights`` ends with ``flatten_parameters``), so on the old code replica 1's
rebuild always lands in between.
"""

from __future__ import annotations

from tests.conftest import run_fresh


def test_each_replica_runs_its_recurrent_module_on_its_own_copies():
    proc = run_fresh("""
import time
import torch
import multidev as md
from multidev.values.variables import DistributedVariable

class Slow:
    def flatten_parameters(self):   # replica 0 lingers inside torch's rebuild of the weight list
        ctx = md.distribute.get_replica_context()
        if ctx is not None and ctx.replica_id_in_sync_group == 0:
            time.sleep(0.1)
        return super().flatten_parameters()

class SlowGRU(Slow, torch.nn.GRU): pass
class SlowLSTM(Slow, torch.nn.LSTM): pass
class SlowRNN(Slow, torch.nn.RNN): pass

x = torch.randn(5, 4, 3, dtype=torch.float64)   # (time, batch, features): each replica two sequences
for kind in (SlowGRU, SlowLSTM, SlowRNN):
    results = {}
    for name, strategy in (("one", md.distribute.OneDeviceStrategy("/cpu:0")), ("two", md.distribute.MirroredStrategy())):
        with strategy.scope():
            torch.manual_seed(0)
            rnn = kind(3, 6).double()
        def step(xs):
            out = rnn(xs.transpose(0, 1))[0]
            loss = out.pow(2).mean()
            loss.backward()
            kept = all(isinstance(w, DistributedVariable) for w in rnn._flat_weights)
            return loss.detach(), torch.tensor(kept)
        dist = strategy.experimental_distribute_dataset(md.data.Dataset.from_tensors(x.transpose(0, 1)))
        for batch in dist:
            loss, kept = strategy.run(step, args=(batch,))
        results[name] = torch.cat([p.grad.reshape(-1) for p in rnn.parameters()])   # replica 0's: the mean
        if name == "two":
            assert all(bool(k) for k in strategy.experimental_local_results(kept)), "the list holds the variables"
    torch.testing.assert_close(results["two"], results["one"], rtol=1e-12, atol=1e-12)
    print(kind.__name__, "equal")
print("DONE")
""", env={"MULTIDEV_LOGICAL_CPUS": "2"}, timeout=120)
    assert "DONE" in proc.stdout, proc.stdout + proc.stderr
