"""``multidev bench scaling``: how per-step Python cost scales with the replica count.

Replicas of ``MirroredStrategy`` are threads of one process, so their per-step Python (module
calls, hooks, the optimizer's loop) is serialised by the GIL; processes (one replica per process,
``MultiWorkerMirroredStrategy`` as ``multidev launch`` starts it, and torch DDP as the reference)
are not. The probe (``scaling_model``: 16 tiny layers, batch 2 per replica, SGD) does almost no
arithmetic, so it shows that cost alone. For N = 1, 2, 4, 8 it reports the step time with N
replicas over the step time with 1 for each method (weak scaling: the global batch grows with N,
so 1.0 is perfect and N means the replicas ran one after the other).
"""

from __future__ import annotations

from multidev.bench import child

METHODS = ("threads", "mwms", "ddp")
METHOD_NAMES = {"threads": "MirroredStrategy (threads)", "mwms": "MultiWorkerMirroredStrategy (processes)",
                "ddp": "torch DDP (processes)"}


def run(spec: dict, timeout: float, progress=None) -> dict:
    """Time every method at every replica count of ``spec["replicas"]``; a method that fails at one
    count records its error there instead of stopping the suite (the GPU check must go on)."""
    say = progress or (lambda line: None)
    step_s: dict[str, dict[str, dict | str]] = {m: {} for m in METHODS}
    machine = None
    try:
        out = child.run_one("multidev.bench.scaling_threads", spec, timeout, threads=spec.get("threads") or 1)
        machine = out["machine"]
        step_s["threads"] = out["step_s"]
        done = ", ".join(f"N={n}: {s['median'] * 1e3:.2f} ms" for n, s in out["step_s"].items())
        say(f"scaling: threads done ({done})")
    except child.BenchChildError as err:
        step_s["threads"] = {str(n): f"failed: {_why(err)}" for n in spec["replicas"]}
        say(f"scaling: threads failed: {_why(err)}")
    for method in ("mwms", "ddp"):
        for n in spec["replicas"]:
            try:
                out = child.run_workers("multidev.bench.scaling_procs", {**spec, "method": method}, n, timeout)
                machine = machine or out["machine"]
                step_s[method][str(n)] = out["step_s"]
                say(f"scaling: {method} N={n}: {out['step_s']['median'] * 1e3:.2f} ms/step")
            except child.BenchChildError as err:
                step_s[method][str(n)] = f"failed: {_why(err)}"
                say(f"scaling: {method} N={n} failed: {_why(err)}")
    return {"spec": spec, "step_s": step_s, "ratios": ratios(step_s), "machine": machine}


def _why(err: Exception) -> str:
    """A failed child in one line: what failed and the last line of its output (its exception), which the
    first GPU run did not show (MultiWorkerMirroredStrategy N=2 on one H200: "worker 0 failed")."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip() and not line.startswith("---")]
    return lines[0] if len(lines) < 2 else f"{lines[0]} ... {lines[-1]}"


def ratios(step_s: dict) -> dict:
    """Per method, step time at N over step time at 1 (None where either failed)."""
    out = {}
    for method, by_n in step_s.items():
        base = by_n.get("1")
        out[method] = {n: (r["median"] / base["median"] if isinstance(r, dict) and isinstance(base, dict) else None)
                       for n, r in by_n.items()}
    return out


def table(result: dict) -> str:
    """Markdown table: one row per method, ms/step and the ratio to N=1 for each N."""
    counts = [str(n) for n in result["spec"]["replicas"]]
    lines = ["| method | " + " | ".join(f"N={n} ms/step (x N=1)" for n in counts) + " |",
             "|---|" + "---:|" * len(counts)]
    for method in METHODS:
        cells = []
        for n in counts:
            r = result["step_s"][method].get(n)
            ratio = result["ratios"][method].get(n)
            cells.append(f"{r['median'] * 1e3:.2f} ({ratio:.2f}x)" if isinstance(r, dict) and ratio is not None
                         else (r or "-"))
        lines.append(f"| {METHOD_NAMES[method]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
