"""Random draws made in backward (a gradient hook adding noise, a custom ``autograd.Function`` whose
``backward`` draws, ``torch.autograd.grad`` through such a hook) draw from the replica's stream, as each
DDP rank's backward draws from its own generator. Before, torch ran backward with no torch function
mode, so every replica drew from the one generator they share: their noises differed (DDP's ranks,
seeded alike, draw the same), and the draws after backward were off too. The reference emulates DDP:
every rank starts from the run's state, the ranks' gradients averaged. One fresh interpreter."""

from __future__ import annotations

PROGRAM = r'''
import torch, multidev as md
torch.set_default_dtype(torch.float64)
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
local = strategy.experimental_local_results
halves = lambda t: md.distribute.PerReplica(tuple(torch.tensor_split(t, 2)))
SIGMA = 0.5

def ranks(fn, *parts):
    """What each DDP rank gets from ``fn(part)``, every rank starting from the caller's state now."""
    start, out = torch.get_rng_state(), []
    for part in parts:
        torch.set_rng_state(start)
        out.append(fn(*part))
    return out

class NoisyGrad(torch.autograd.Function):
    """Identity forward; backward perturbs the gradient (a noisy straight-through estimator)."""
    @staticmethod
    def forward(ctx, x):
        return x.clone()
    @staticmethod
    def backward(ctx, grad):
        return grad * (1 + SIGMA * torch.randn_like(grad))

def models():
    torch.manual_seed(0)
    with strategy.scope():
        ours = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    ref.load_state_dict({k: v.detach().clone() for k, v in ours.state_dict().items()})
    return ours, ref

def hooked(model):   # gradient noise as printed: a hook on every parameter, registered once before training
    for p in model.parameters():
        p.register_hook(lambda g: g + SIGMA * torch.randn_like(g))
    return model

def step_backward(model, through):
    def step(x):
        loss = through(model, x).pow(2).sum()
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        return grads, torch.rand(3)   # (a draw after backward continues the replica's stream)
    return step

def step_grad(model, through):
    def step(x):
        loss = through(model, x).pow(2).sum()
        return list(torch.autograd.grad(loss, list(model.parameters()))), torch.rand(3)
    return step

plain = lambda model, x: model(x)
noisy_input = lambda model, x: model[2](NoisyGrad.apply(model[1](model[0](x))))
x = torch.randn(6, 4)
for name, make_step, through, hook in [("hook", step_backward, plain, True),
                                       ("function", step_backward, noisy_input, False),
                                       ("grad_hook", step_grad, plain, True)]:
    ours, ref = models()
    if hook:
        hooked(ours); hooked(ref)
    for run in range(2):
        torch.manual_seed(10 + run)
        got = local(strategy.run(make_step(ours, through), args=(halves(x),)))
        torch.manual_seed(10 + run)
        want = ranks(make_step(ref, through), *((h,) for h in torch.tensor_split(x, 2)))
        mean = [(a + b) / 2 for a, b in zip(want[0][0], want[1][0])]
        for replica, (grads, after) in enumerate(got):
            assert torch.equal(after, want[replica][1]), (name, run, replica, after, want[replica][1])
            reduced = mean if make_step is step_backward else want[replica][0]   # (autograd.grad reduces nothing)
            for g, w in zip(grads, reduced):
                torch.testing.assert_close(g, w, rtol=1e-13, atol=1e-13, msg=f"{name} run {run} replica {replica}")
print("ok")
'''


def test_draws_in_backward_take_the_replicas_stream(fresh):
    proc = fresh(PROGRAM, timeout=180)
    assert proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
