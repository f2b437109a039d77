"""A/B in one process: Keras 3 fit on 2 logical CPUs with the owner-split update of Keras optimizers
(``keras3_split``) vs the all-reduce path (``keras3_split.plan_for`` forced to a ``replica_update.BucketPlan``), and Keras's own
fit on one device, alternating in every round; median wall and process CPU ms per step (first round
dropped). Needs Keras 3 (KERAS_BACKEND is set to torch here).

    python benchmarks/keras3_update_ab.py mlp 15 6        # workload, steps per round, rounds
"""
import os, sys, time, statistics
os.environ["KERAS_BACKEND"] = "torch"
import torch
torch.set_num_threads(1)
import keras, multidev as md
from multidev.bench import workloads, keras3_variants
from multidev.distribute import replica_update
from multidev.integrations import keras3_split
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
name = sys.argv[1] if len(sys.argv) > 1 else "mlp"
steps, rounds = int(sys.argv[2]), int(sys.argv[3])
w = workloads.get(name)
g = torch.Generator().manual_seed(0)
batches = w.batches(steps)
x = torch.cat([b[0] for b in batches]); y = torch.cat([b[1] for b in batches])
real_plan = keras3_split.plan_for
bucket_plans = {}


def bucket_plan(optimizer, variables, strategy):
    key = (id(optimizer), tuple(id(v) for v in variables))
    if key not in bucket_plans:
        bucket_plans[key] = replica_update.BucketPlan([v._value for v in variables], strategy)
    return bucket_plans[key]


models = {}
for mode in ("allreduce", "split", "own"):
    s = None if mode == "own" else md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    models[mode] = keras3_variants.keras3_model(w, s)
res = {m: ([], []) for m in models}
for r in range(rounds):
    for mode, model in models.items():
        keras3_split.plan_for = bucket_plan if mode == "allreduce" else real_plan
        c0, t0 = time.process_time(), time.perf_counter()
        model.fit(x, y, batch_size=w.batch_size, epochs=1, shuffle=False, verbose=0)
        res[mode][0].append((time.perf_counter() - t0) / steps * 1e3); res[mode][1].append((time.process_time() - c0) / steps * 1e3)
for mode, (wall, cpu_) in res.items():
    print(f"{name} {mode:10s} wall ms/step median {statistics.median(wall[1:]):7.2f}  CPU ms/step median {statistics.median(cpu_[1:]):7.2f}")
print("load", os.getloadavg())
