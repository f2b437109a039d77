"""torch's attention fast paths run inside ``strategy.run`` and on a model built in the scope, as on one
device (``multidev/distribute/attention_fast_path.py``).

``nn.TransformerEncoder(enable_nested_tensor=True)`` in eval under ``no_grad`` with a
``src_key_padding_mask`` turns the batch into a nested tensor and gives zeros at the padded positions.
On the old code multidev's replica random-stream mode (inside runs) and the distributed variables
(outside) made torch take the slow path: 1.97 apart at the padded positions.
One fresh interpreter for every case.
"""

from __future__ import annotations

from tests.conftest import run_fresh

PROGRAM = """
import torch
import multidev as md
from torch import nn

calls, originals = [], {}
for name in ("_native_multi_head_attention", "_transformer_encoder_layer_fwd"):
    def spy(*a, _original=getattr(torch, name), _name=name, **k):
        calls.append(_name)
        return _original(*a, **k)
    originals[name] = getattr(torch, name)
    setattr(torch, name, spy)

def build():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).double(), \\
        nn.MultiheadAttention(8, 2, dropout=0.1, batch_first=True).double()

x = torch.randn(4, 5, 8, dtype=torch.float64)
pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True], [False] * 2 + [True] * 3])
def forward(enc, mha, x, pad):
    return enc(x, src_key_padding_mask=pad), mha(x, x, x, key_padding_mask=pad, need_weights=False)[0]

enc, mha = build()
enc.eval(), mha.eval()
with torch.no_grad():
    want = [torch.cat(o) for o in zip(forward(enc, mha, x[:2], pad[:2]), forward(enc, mha, x[2:], pad[2:]))]
assert calls and float(want[0][1, 3:].abs().max()) == 0.0 and float(want[0][3, 2:].abs().max()) == 0.0
strategy = md.distribute.MirroredStrategy()
with strategy.scope():
    enc, mha = build()
enc.eval(), mha.eval()
batches = strategy.experimental_distribute_dataset(
    torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, pad), batch_size=4))
for context in (torch.no_grad, torch.inference_mode):
    for xs, ps in batches:
        calls.clear()
        with context():   # entered outside the run: each replica's thread takes the caller's grad mode
            got = strategy.run(forward, args=(enc, mha, xs, ps))
        assert sorted(set(calls)) == ["_native_multi_head_attention", "_transformer_encoder_layer_fwd"], calls
        for g, w in zip(got, want):
            torch.testing.assert_close(torch.cat(strategy.experimental_local_results(g)), w, rtol=1e-12, atol=1e-12)
    print(context.__name__, "in replicas: torch's fast path")
calls.clear()
with torch.no_grad():   # the whole batch outside strategy.run (an evaluation between epochs)
    enc_out, _ = forward(enc, mha, x[:2], pad[:2])
assert "_transformer_encoder_layer_fwd" in calls and float(enc_out[1, 3:].abs().max()) == 0.0, calls
calls.clear()
enc.train(), mha.train()
loss = strategy.run(lambda xs, ps: sum(o.nan_to_num().pow(2).mean() for o in forward(enc, mha, xs, ps)), args=(xs, ps))
assert not calls, "training takes the slow path (dropout on each replica's stream)"
for name, original in originals.items():   # TorchScript and dynamo need torch's own functions
    setattr(torch, name, original)
compiled = torch.compile(enc, backend="eager", fullgraph=True)   # dynamo answers has_torch_function itself
enc.eval()
with torch.no_grad():
    got = strategy.run(compiled, args=(xs,))
    want_enc = build()[0].eval()(x)
torch.testing.assert_close(torch.cat(strategy.experimental_local_results(got)), want_enc, rtol=1e-12, atol=1e-12)
for name, original in originals.items():
    setattr(torch, name, original)
scripted = torch.jit.script(nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1,
                                                  enable_nested_tensor=False).eval())
with torch.no_grad():
    assert scripted(x.float(), src_key_padding_mask=pad[:3].repeat(2, 1)[:4]).shape == x.shape
print("DONE")
"""


def test_attention_fast_paths_as_on_one_device():
    proc = run_fresh(PROGRAM, env={"MULTIDEV_LOGICAL_CPUS": "2"}, timeout=180)
    assert "DONE" in proc.stdout, proc.stdout + proc.stderr
