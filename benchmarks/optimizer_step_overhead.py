"""Microseconds per strategy.run step of a tiny model (10 Linear(8, 8)): the torch.optim path's own Python
cost (run minus run without the step), 1 replica, 2 replicas split update, 2 replicas all-reduce.

    OMP_NUM_THREADS=1 python benchmarks/optimizer_step_overhead.py
"""
import time

import torch

import multidev as md

md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0], [md.config.LogicalDeviceConfiguration()]*2)
torch.set_num_threads(1)


class MySGD(torch.optim.SGD):  # exact type not element-wise: the all-reduce path
    pass


def bench(devices, cls, n=2000):
    s = md.distribute.MirroredStrategy(devices)
    with s.scope():
        m = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(10)])
        opt = cls(m.parameters(), lr=0.01, momentum=0.9)
    nrep = len(devices)
    x = torch.randn(4, 8)
    xs = md.distribute.PerReplica(tuple(torch.tensor_split(x, nrep))) if nrep > 1 else x
    def step(x):
        opt.zero_grad(set_to_none=True)
        m(x).sum().backward()
        opt.step()
    def zero_only(x):
        m(x).sum().backward()
    out = {}
    for name, fn in [("full", step), ("no_opt", zero_only)]:
        for _ in range(50): s.run(fn, args=(xs,))
        t = time.perf_counter()
        for _ in range(n): s.run(fn, args=(xs,))
        out[name] = (time.perf_counter() - t) / n * 1e6
    return out
for devs, cls in [(["/cpu:0"], torch.optim.SGD), (["/cpu:0", "/cpu:1"], torch.optim.SGD), (["/cpu:0", "/cpu:1"], MySGD)]:
    r = bench(devs, cls)
    print(f"{len(devs)} replica(s) {cls.__name__}: run {r['full']:.1f} us, without optimizer {r['no_opt']:.1f} us, optimizer path {r['full']-r['no_opt']:.1f} us")
