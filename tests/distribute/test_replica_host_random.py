"""Python's ``random`` and numpy's global ``np.random`` drawn inside ``strategy.run`` follow DDP's rule
(``distribute/host_random.py``): replica r draws what rank r of a DDP job seeded alike draws. The
reference is computed per rank in this process: every rank starts from the states the caller left
(the same on every identically seeded rank), and the caller then continues rank 0's. Before the fix
replica 0 and replica 1 drew consecutive values of one shared state, in the threads' order.
One fresh interpreter."""

from __future__ import annotations

PROGRAM = r'''
import gc, random, time
import numpy as np
from random import uniform as bound_uniform        # bound before any strategy: reaches the routed methods
import multidev as md
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
ORIGINALS = (random.random, random.randint, np.random.rand, np.random.seed)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
captured = random.Random(0)          # a program's generator shared from outside the step
rid = lambda: int(md.distribute.get_replica_context().replica_id_in_sync_group)

def states():
    return random.getstate(), np.random.get_state(), captured.getstate()

def set_states(s):
    random.setstate(s[0]); np.random.set_state(s[1]); captured.setstate(s[2])

def on_replicas(fn, *args):
    """What each replica's ``fn`` returned (kept by replica id: Python values need no regrouping)."""
    out = {}
    def step():
        out[rid()] = fn(*args)
    strategy.run(step)
    return [out[0], out[1]]

def on_ranks(fn, *args):
    """What each DDP rank's ``fn`` returns from the caller's states; leaves rank 0's final states."""
    start, out, end = states(), [], None
    for rank in range(2):
        set_states(start)
        out.append(fn(*args))
        end = end or states()
    set_states(end)
    return out

def draws():
    l = list(range(20)); random.shuffle(l)
    a = np.arange(10); np.random.shuffle(a)
    return [random.random(), random.randint(0, 10**9), random.choice("abcdefgh"), l, random.gauss(0, 1),
            random.uniform(-1, 1), random.random() < 0.5, np.random.rand(3).tolist(), np.random.randn(2).tolist(),
            np.random.randint(0, 1000, size=4).tolist(), float(np.random.beta(0.4, 0.4)),
            np.random.uniform(size=2).tolist(), np.random.choice(10, size=3).tolist(),
            np.random.permutation(10).tolist(), a.tolist(), captured.random(), captured.randint(0, 99),
            bound_uniform(0, 1), random.sample(range(100), 3), random.choices("xyz", k=4)]

# --- 1. draws in the step: every replica draws what every rank draws; the caller continues rank 0's ----
random.seed(1); np.random.seed(1)
for _ in range(3):
    start = states()
    got = on_replicas(draws)
    after = (random.random(), float(np.random.rand()), captured.random())
    set_states(start)
    want = on_ranks(draws)
    assert got == want and got[0] == got[1], (got, want)
    assert after == (random.random(), float(np.random.rand()), captured.random())

# --- 2. seed / getstate / setstate in the step act on the calling replica's stream --------------------
def reseeded(seed):
    random.seed(seed); np.random.seed(seed)
    saved, nsaved = random.getstate(), np.random.get_state()
    first = (random.random(), np.random.rand(2).tolist())
    random.setstate(saved); np.random.set_state(nsaved)
    return first, (random.random(), np.random.rand(2).tolist()), random.random(), float(np.random.randn())
got = on_replicas(reseeded, 7)
want = on_ranks(reseeded, 7)
assert got == want and got[0] == got[1] and got[0][0] == got[0][1], got
random.seed(7); np.random.seed(7)
assert want[0][0] == (random.random(), np.random.rand(2).tolist())

# --- 3. one generator per replica, kept by replica id: each continues its own sequence across runs ------
rngs = [random.Random(10), random.Random(11)]
runs = [on_replicas(lambda: rngs[rid()].random()) for _ in range(2)]
for r, seed in enumerate((10, 11)):
    expected = random.Random(seed)
    assert [run[r] for run in runs] == [expected.random(), expected.random()], runs

# --- 4. a generator built in the step is the replica's own (as on each rank) -------------------------
got = on_replicas(lambda: [random.Random(5).random(), random.Random(5).randint(0, 99)])
expected = random.Random(5)
assert got[0] == got[1] == [expected.random(), random.Random(5).randint(0, 99)], got

# --- 5. a merge_call's function (cross-replica: once) draws from the object itself -----------------------
def draw_then_merge():
    for _ in range(2 - rid()):    # replica 0 draws twice, replica 1 once (its copy is one draw behind)
        random.random()
    time.sleep(0.05 * rid())      # replica 1 arrives last: the exchange runs the merge in its thread
    return md.distribute.get_replica_context().merge_call(lambda s: random.random())
random.seed(2)
got = on_replicas(draw_then_merge)
random.seed(2)
assert got[0] == got[1] == [random.random() for _ in range(3)][2], got

# --- 6. outside replicas the functions are Python's and numpy's; gone with the last strategy ------------
assert random.random is not ORIGINALS[0]
random.seed(3); a = random.random(); random.seed(3); assert a == random.random()
del strategy
gc.collect(); gc.collect()
assert (random.random, random.randint, np.random.rand, np.random.seed) == ORIGINALS
assert "random" not in random.Random.__dict__ and not hasattr(random.Random.randint, "_multidev_wrapped")
print("ok")
'''


def test_host_random_draws_follow_ddp_ranks(fresh):
    proc = fresh(PROGRAM, timeout=120)
    assert proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
