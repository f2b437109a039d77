"""``multidev launch``: start a multi-worker job on this machine (TF_CONFIG) or across hosts (torchrun).

Local: ``multidev launch --workers 2 [--chief] [--ps 1] [--devices-per-worker K] train.py [args]``
starts one process per task with ``TF_CONFIG`` on free loopback ports, prefixes every output line
with ``[worker 0]``, stops everyone when one task fails and returns its exit code; Ctrl-C stops all.
Every task gets the job's secret in ``MULTIDEV_JOB_SECRET`` (a fresh random one unless already set),
so that only these tasks are admitted to the job's rendezvous; the chief and workers also get torchrun's
``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``
(``torchrun_variables``), which ported DDP programs read.

Multi-host: add ``--nnodes N --node-rank R --rdzv-endpoint HOST:PORT`` and the job is handed to
torch's elastic launcher (``torch.distributed.run``), which sets RANK/WORLD_SIZE/MASTER_ADDR/...;
``TorchrunClusterResolver`` reads them. ``--workers`` is then the number of processes per host.
``--max-restarts N`` lets the agent restart the worker group after a failure (see ``elastic``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
from multidev.cli import elastic
from multidev.collectives.job_secret import SECRET_ENV, new_secret
from multidev.collectives.process_world import free_loopback_ports as _free_ports

DEVICES_ENV = "MULTIDEV_DEVICES_PER_WORKER"
_POLL_SECONDS = 0.05


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The launcher's flags (``multidev launch --help``)."""
    parser.add_argument("--workers", type=int, default=None,
                        help="number of worker processes (per host with --nnodes); default 1 with --nnodes. "
                             "With GPUs, one per GPU; more workers than GPUs share them (dealt round robin), "
                             "and their collectives then use Gloo")
    parser.add_argument("--devices-per-worker", type=int, default=None, metavar="K",
                        help=f"local devices per worker: sets {DEVICES_ENV}=K (K GPUs each if there are enough, "
                             "else K logical CPUs); GPUs are split between workers with CUDA_VISIBLE_DEVICES")
    parser.add_argument("--chief", action="store_true", help="also start a chief task (TF_CONFIG role 'chief')")
    parser.add_argument("--ps", type=int, default=0, metavar="P", help="also start P parameter-server tasks")
    parser.add_argument("--stop-grace", type=float, default=5.0, metavar="SECONDS",
                        help="seconds between SIGTERM and SIGKILL when stopping tasks (default 5)")
    group = parser.add_argument_group("multi-host (delegated to torch.distributed.run)")
    group.add_argument("--nnodes", default=None, help="number of hosts (or MIN:MAX)")
    group.add_argument("--node-rank", type=int, default=None, help="rank of this host (static rendezvous)")
    group.add_argument("--rdzv-endpoint", default=None, metavar="HOST:PORT", help="rendezvous address (host 0)")
    group.add_argument("--rdzv-backend", default="static", help="torch rendezvous backend (static or c10d)")
    group.add_argument("--rdzv-id", default=None, help="job id shared by all hosts (c10d rendezvous)")
    group.add_argument("--rdzv-conf", default=None, metavar="K=V,...",
                       help="torch rendezvous options, e.g. join_timeout=60,read_timeout=30 (c10d: is_host is "
                            "set from whether the endpoint is an address of this host, unless given)")
    group.add_argument("--local-addr", default=None, metavar="ADDR",
                       help="address other hosts reach this host at (default: this host's address on the "
                            "route to --rdzv-endpoint)")
    group.add_argument("--max-restarts", type=int, default=0, metavar="N",
                       help="restart the whole worker group up to N times when a worker fails (elastic "
                            "resume: with BackupAndRestore the restarted fit continues from the last backup)")
    parser.add_argument("-m", "--module", action="store_true", help="run SCRIPT as a module (python -m SCRIPT)")
    parser.add_argument("script", help="the training script (or module with -m)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments passed to the script")


def run(args: argparse.Namespace) -> int:
    """Launch the job; returns 0, or the exit code of the first task that failed."""
    _validate(args)
    if args.nnodes is not None or args.rdzv_endpoint is not None:
        return _run_elastic(args)
    return _run_local(args)


def _validate(args: argparse.Namespace) -> None:
    multi_host = args.nnodes is not None or args.rdzv_endpoint is not None
    if args.workers is None and not multi_host:
        raise SystemExit("multidev launch: --workers N is required (the number of local worker processes).")
    if args.workers is not None and args.workers < 1:
        raise SystemExit(f"multidev launch: --workers must be >= 1; got {args.workers!r}.")
    if args.devices_per_worker is not None and args.devices_per_worker < 1:
        raise SystemExit(f"multidev launch: --devices-per-worker must be >= 1; got {args.devices_per_worker!r}.")
    if args.ps < 0:
        raise SystemExit(f"multidev launch: --ps must be >= 0; got {args.ps!r}.")
    if multi_host and (args.ps or args.chief):
        raise SystemExit(
            "multidev launch: --chief/--ps are local-launch options; torch's elastic launcher starts "
            "workers only. For a multi-host parameter-server job, set TF_CONFIG on each host and run the script."
        )
    if multi_host and args.rdzv_endpoint is None:
        raise SystemExit("multidev launch: --nnodes needs --rdzv-endpoint HOST:PORT (the address of host 0).")
    if args.max_restarts < 0:
        raise SystemExit(f"multidev launch: --max-restarts must be >= 0; got {args.max_restarts!r}.")
    if args.max_restarts and not multi_host:
        raise SystemExit("multidev launch: --max-restarts needs the elastic launcher: add --nnodes 1 "
                         "--rdzv-endpoint 127.0.0.1:PORT to restart the workers of one machine.")
    if not args.module and not os.path.isfile(args.script):   # else every worker prints Python's own error
        raise SystemExit(f"multidev launch: script {args.script!r} not found (relative to {os.getcwd()!r}); "
                         "give the path of a Python file, or -m NAME for a module.")


# -- local launch --------------------------------------------------------------------------------


def local_cluster(workers: int, chief: bool = False, ps: int = 0) -> tuple[dict, list[tuple[str, int]]]:
    """A loopback cluster dict and its tasks in launch order (chief, workers, ps).

    Example:
        >>> cluster, tasks = local_cluster(2, chief=True)
        >>> tasks
        [('chief', 0), ('worker', 0), ('worker', 1)]
    """
    tasks = [("chief", 0)] if chief else []
    tasks += [("worker", i) for i in range(workers)] + [("ps", i) for i in range(ps)]
    cluster: dict[str, list[str]] = {}
    for (role, _), port in zip(tasks, _free_ports(len(tasks))):
        cluster.setdefault(role, []).append(f"127.0.0.1:{port}")
    return cluster, tasks


def _gpu_slices(args: argparse.Namespace, compute_tasks: int) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES per chief/worker: K GPUs each (K = --devices-per-worker, else an even share);
    with fewer GPUs than workers (and no --devices-per-worker), one GPU each, dealt round robin (workers
    then share GPUs, and their collectives use Gloo, see ``collectives.process_gpus``).

    None (no slicing) on machines without NVIDIA devices or with too few GPUs for --devices-per-worker.
    """
    if not glob.glob("/dev/nvidia[0-9]*"):
        return None  # no GPU: avoid importing torch in the launcher
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return gpu_slices(count, compute_tasks, args.devices_per_worker, os.environ.get("CUDA_VISIBLE_DEVICES"))


def gpu_slices(count: int, compute_tasks: int, devices_per_worker: int | None,
               visible: str | None = None) -> list[str] | None:
    """``_gpu_slices`` for ``count`` GPUs (without looking at the machine); ``visible``, the launcher's own
    CUDA_VISIBLE_DEVICES, names them (a worker's slice must name the GPUs the launcher was given)."""
    names = [v.strip() for v in visible.split(",")][:count] if visible and visible.strip() else []
    names += [str(i) for i in range(len(names), count)]
    if count and not devices_per_worker and count < compute_tasks:
        return [names[i % count] for i in range(compute_tasks)]
    k = devices_per_worker or count // compute_tasks
    if k < 1 or count < k * compute_tasks:
        return None
    return [",".join(names[i * k + j] for j in range(k)) for i in range(compute_tasks)]


def _task_env(cluster: dict, role: str, index: int, args: argparse.Namespace, total: int) -> dict[str, str]:
    env = dict(os.environ)
    env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": role, "index": index}})
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // total)))
    if args.devices_per_worker is not None:
        env[DEVICES_ENV] = str(args.devices_per_worker)
    return env


TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def torchrun_variables(compute: list[tuple[str, int]], role: str, index: int, master_port: int) -> dict[str, str]:
    """torchrun's variables for one task of a local job, so that a ported DDP program reads the job it
    runs in: ``int(os.environ["LOCAL_RANK"])`` (the DDP tutorial series' Trainer), a
    ``DistributedSampler(dataset, num_replicas=int(os.environ["WORLD_SIZE"]), rank=int(os.environ["RANK"]))``,
    and its own ``init_process_group("gloo")`` (env://, on ``master_port``) for what it reduces outside
    ``strategy.run`` (imagenet's ``AverageMeter.all_reduce`` in ``validate``).

    The compute tasks (chief, then workers: TF_CONFIG's collective order, ``worker_index``) are ranks
    0..n-1 on one host; a parameter server is no rank (empty: its variables are removed). A strategy
    reads TF_CONFIG before torchrun's variables, so the cluster stays the launcher's.

    Example:
        >>> torchrun_variables([("worker", 0), ("worker", 1)], "worker", 1, 29500)["LOCAL_RANK"]
        '1'
    """
    if (role, index) not in compute:
        return {}
    rank, size = str(compute.index((role, index))), str(len(compute))
    return dict(zip(TORCHRUN_VARIABLES, (rank, rank, size, size, "127.0.0.1", str(master_port))))


def _master_port(cluster: dict) -> int:
    """A free loopback port for the program's own process group, none of the tasks' ports."""
    taken = {int(address.rsplit(":", 1)[1]) for addresses in cluster.values() for address in addresses}
    while True:
        (port,) = _free_ports(1)
        if port not in taken:
            return port


def _command(args: argparse.Namespace) -> list[str]:
    target = ["-m", args.script] if args.module else [args.script]
    return [sys.executable, *target, *args.script_args]


class _Task:
    """One launched process, its name and its output pumps."""

    def __init__(self, role: str, index: int, cmd: list[str], env: dict[str, str], lock: threading.Lock):
        self.name = f"{role} {index}"
        self.role = role
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.pumps = [
            threading.Thread(target=_pump, args=(self.proc.stdout, sys.stdout, f"[{self.name}] ", lock), daemon=True),
            threading.Thread(target=_pump, args=(self.proc.stderr, sys.stderr, f"[{self.name}] ", lock), daemon=True),
        ]
        for pump in self.pumps:
            pump.start()

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the task's process group (its own children included)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def drain(self, timeout: float = 5.0) -> None:
        for pump in self.pumps:
            pump.join(timeout)


def _pump(stream, out, prefix: str, lock: threading.Lock) -> None:
    """Copy ``stream`` to ``out`` line by line, each line prefixed."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        with lock:
            out.write(prefix + line if line.endswith("\n") else prefix + line + "\n")
            out.flush()
    stream.close()


def _exit_code(returncode: int) -> int:
    """A process's exit code as a shell reports it (128 + signal number when killed by a signal)."""
    return 128 - returncode if returncode < 0 else returncode


def _say(message: str, lock: threading.Lock) -> None:
    with lock:
        sys.stderr.write(f"multidev launch: {message}\n")
        sys.stderr.flush()


def _stop(tasks: list[_Task], grace: float) -> None:
    """SIGTERM every live task, then SIGKILL those still alive after ``grace`` seconds."""
    for task in tasks:
        task.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for task in tasks:
        try:
            task.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            task.signal(signal.SIGKILL)
            task.proc.wait()
    for task in tasks:
        task.drain()


def _watch(tasks: list[_Task], lock: threading.Lock, grace: float) -> int:
    """Wait for the job: all non-ps tasks succeed (ps are then stopped) or the first failure stops all."""
    while True:
        for task in tasks:
            rc = task.proc.poll()
            if rc is not None and rc != 0:
                code = _exit_code(rc)
                others = [t for t in tasks if t is not task and t.proc.poll() is None]
                task.drain()
                restart = (" (TensorFlow's restart code: a PreemptionCheckpointHandler saved a checkpoint; launch "
                           "the job again to resume from it)" if code == 42 else "")
                _say(f"{task.name} failed with exit code {code}{restart}; stopping "
                     f"{', '.join(t.name for t in others) or 'nothing else (all other tasks ended)'}.", lock)
                _stop(others, grace)
                return code
        if all(t.proc.poll() == 0 for t in tasks if t.role != "ps"):
            _stop([t for t in tasks if t.role == "ps"], grace)
            for task in tasks:
                task.drain()
            return 0
        time.sleep(_POLL_SECONDS)


def _run_local(args: argparse.Namespace) -> int:
    cluster, roles = local_cluster(args.workers, chief=args.chief, ps=args.ps)
    compute = [r for r in roles if r[0] != "ps"]
    slices = _gpu_slices(args, len(compute))
    secret = os.environ.get(SECRET_ENV) or new_secret()  # one per job: admits only its own tasks
    master_port = _master_port(cluster)
    lock = threading.Lock()
    tasks: list[_Task] = []
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for role, index in roles:
            env = _task_env(cluster, role, index, args, len(roles))
            env[SECRET_ENV] = secret
            for name in TORCHRUN_VARIABLES:   # a parameter server (or an outer job's value) is no rank here
                env.pop(name, None)
            env.update(torchrun_variables(compute, role, index, master_port))
            if slices is not None:
                env["CUDA_VISIBLE_DEVICES"] = slices[compute.index((role, index))] if role != "ps" else ""
            tasks.append(_Task(role, index, _command(args), env, lock))
        return _watch(tasks, lock, args.stop_grace)
    except KeyboardInterrupt:
        _say("interrupted; stopping all tasks.", lock)
        _stop(tasks, args.stop_grace)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


# -- multi-host launch ---------------------------------------------------------------------------


def elastic_command(args: argparse.Namespace) -> list[str]:
    """The torch elastic launcher's command line for a multi-host job (``multidev.cli.elastic`` runs it)."""
    cmd = [sys.executable, "-m", "multidev.cli.elastic",
           "--nnodes", str(args.nnodes or 1),
           "--nproc-per-node", str(args.workers or 1),
           "--rdzv-backend", args.rdzv_backend,
           "--rdzv-endpoint", args.rdzv_endpoint,
           "--max-restarts", str(args.max_restarts),
           "--tee", "3"]  # with TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: lines prefixed "[worker R]"
    if args.node_rank is not None and args.rdzv_backend == "static":   # c10d assigns ranks by arrival
        cmd += ["--node-rank", str(args.node_rank)]
    if args.rdzv_id is not None:
        cmd += ["--rdzv-id", args.rdzv_id]
    cmd += elastic.rendezvous_flags(args.rdzv_backend, args.rdzv_endpoint, args.rdzv_conf, args.local_addr)
    if args.module:
        cmd.append("-m")
    return cmd + [args.script, *args.script_args]


def _run_elastic(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    env.setdefault("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[worker ${rank}] ")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.pop("TF_CONFIG", None)  # the workers learn their cluster from torchrun's variables
    if args.devices_per_worker is not None:
        env[DEVICES_ENV] = str(args.devices_per_worker)
    proc = subprocess.Popen(elastic_command(args), env=env)
    try:
        return _exit_code(proc.wait())
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)  # torchrun stops its workers on SIGINT
        try:
            proc.wait(args.stop_grace + 10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return 130


__all__ = ["add_arguments", "run", "local_cluster", "elastic_command", "DEVICES_ENV"]
