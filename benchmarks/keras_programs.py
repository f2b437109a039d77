"""The keras.io ports of tests/programs/keras run three ways, timed: the table of benchmarks/RESULTS.md.

Per program: does it run unchanged, is it distributed and equal to one device (md.keras on 2 replicas vs
md.keras on one; Keras 3 on multidev vs Keras 3 on one), and its wall and process-CPU time relative to
Keras 3 on one device, and of Keras 3 on a MirroredStrategy of one replica (multidev's own wrapping
without a second replica thread) (median over rounds; the modes alternate within each round; the first round is
a warm-up and dropped). One intra-op thread (one per replica), as the other Keras 3 benchmarks.

    python benchmarks/keras_programs.py [rounds] [scale] [program ...]    # defaults: 4 rounds, scale 4
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from tests.programs.keras import _harness  # noqa: E402

MODES = ("keras3", "md1", "md2", "k3md2", "k3md1s")


def time_program(program, keras, md, rounds, scale):
    """``{mode: run}`` with ``wall``/``cpu`` medians (seconds) and the last round's results."""
    samples = {mode: ([], []) for mode in MODES}
    last = {}
    for r in range(rounds):
        order = MODES if r % 2 == 0 else tuple(reversed(MODES))
        for mode in order:
            cpu0 = time.process_time()
            run = _harness.run_mode(program, mode, keras, md, scale)
            if run["ok"]:
                samples[mode][0].append(run["seconds"])
                samples[mode][1].append(time.process_time() - cpu0)
            last[mode] = run
    for mode, (wall, cpu) in samples.items():
        kept = (wall[1:], cpu[1:]) if len(wall) > 1 else (wall, cpu)
        last[mode]["wall"] = statistics.median(kept[0]) if kept[0] else None
        last[mode]["cpu"] = statistics.median(kept[1]) if kept[1] else None
    for mode, ref in _harness.REFERENCE.items():
        last[mode]["equal"], last[mode]["worst_rel"], _ = _harness.compare(last[mode], last[ref])
    return last


def _verdict(run):
    if not run["ok"]:
        return "no: " + run["error"].split(":")[0]
    if run.get("copies") != 2:
        return "yes, **not distributed**"
    if run.get("equal") is None:
        return "yes"
    return "yes, = 1 device" if run["equal"] else f"yes, differs ({run['worst_rel']:.1e})"


def _ratio(run, base, key):
    if run[key] is None or base is None or base[key] is None:
        return "-"
    return f"{run[key] / base[key]:.2f}"


def table(results) -> str:
    """Markdown: one row per program."""
    rows = ["| program | Keras 3, 1 device (s wall) | md.keras, 2 replicas | wall / K3 | CPU / K3 | md.keras 1 device "
            "wall / K3 | Keras 3 on multidev, 2 replicas | wall / K3 | CPU / K3 | K3 on a 1-replica strategy "
            "wall / K3 |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for program, runs in results.items():
        base = runs["keras3"] if runs["keras3"]["ok"] else None
        base_cell = f"{base['wall']:.2f}" if base else "no: " + runs["keras3"]["error"].split(":")[0]
        rows.append(f"| {program} | {base_cell} | {_verdict(runs['md2'])} | {_ratio(runs['md2'], base, 'wall')} | "
                    f"{_ratio(runs['md2'], base, 'cpu')} | {_ratio(runs['md1'], base, 'wall')} | "
                    f"{_verdict(runs['k3md2'])} | {_ratio(runs['k3md2'], base, 'wall')} | "
                    f"{_ratio(runs['k3md2'], base, 'cpu')} | {_ratio(runs['k3md1s'], base, 'wall')} |")
    return "\n".join(rows)


def main(argv):
    rounds = int(argv[0]) if argv else 4
    scale = int(argv[1]) if len(argv) > 1 else 4
    programs = argv[2:] or _harness.PROGRAMS
    torch.set_num_threads(1)
    keras, md = _harness.setup()
    start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results = {p: time_program(p, keras, md, rounds, scale) for p in programs}
    print(f"keras.io programs, {rounds} rounds (first dropped), scale {scale}, {start} - "
          f"{time.strftime('%H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.1f}, "
          f"torch {torch.__version__}, keras {keras.__version__}\n")
    print(table(results))


if __name__ == "__main__":
    main(sys.argv[1:])
