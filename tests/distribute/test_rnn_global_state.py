"""A recurrent module's state made for the global batch is refused in a replica, naming the port
(``multidev/distribute/rnn_hooks.py``).

A DDP program computes ``hidden = model.init_hidden(batch_size)`` from its loader's batch size, one rank's.
Ported with two lines, the loader's batch is the global one, and every replica got a state with
``num_replicas_in_sync`` times its rows: torch's shape check said only "Expected hidden[0] size (1, 4, 6),
got [1, 8, 6]". Now the error says the state was made for the global batch and how to make it per replica.
"""

from __future__ import annotations

from tests.conftest import run_fresh


def test_a_state_for_the_global_batch_is_refused_saying_why():
    proc = run_fresh("""
import torch
import multidev as md

strategy = md.distribute.MirroredStrategy()
assert strategy.num_replicas_in_sync == 2
with strategy.scope():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 6, batch_first=True).double()
    gru = torch.nn.GRU(3, 6, num_layers=2).double()
zeros = lambda layers, n: torch.zeros(layers, n, 6, dtype=torch.float64)

def lstm_step(hidden):
    return lstm(torch.randn(4, 5, 3, dtype=torch.float64), hidden)[0].sum()

def gru_step(hidden):   # sequence-first input, a plain tensor state
    return gru(torch.randn(5, 4, 3, dtype=torch.float64), hidden)[0].sum()

for step, hidden in ((lstm_step, (zeros(1, 8), zeros(1, 8))), (gru_step, zeros(2, 8))):
    try:
        strategy.run(step, args=(hidden,))
    except ValueError as e:
        message = str(e)
        print("refused:", message.splitlines()[0])
        assert "hidden state holds 8 rows for a replica's batch of 4 (2 replicas in sync)" in message, message
        assert "init_hidden(x.size(0))" in message and "num_replicas_in_sync" in message, message
    else:
        raise AssertionError("a global-batch state ran")

# the replica's own state runs; a state of other sizes gets torch's own error; outside runs torch's too
strategy.run(lstm_step, args=((zeros(1, 4), zeros(1, 4)),))
strategy.run(gru_step, args=(None,))
for run in (lambda: strategy.run(gru_step, args=(zeros(2, 3),)), lambda: gru(torch.randn(5, 4, 3, dtype=torch.float64), zeros(2, 8))):
    try:
        run()
    except ValueError:
        raise AssertionError("refused as a global state")
    except RuntimeError as e:
        assert "Expected hidden size" in str(e), e
    else:
        raise AssertionError("ran")
print("OK")
""", env={"MULTIDEV_LOGICAL_CPUS": "2"})
    assert "OK" in proc.stdout, proc.stdout + proc.stderr
