"""The multi-host half of ``multidev launch``: torch's elastic agent (``torch.distributed.run``), with
the facts it cannot guess on hosts with several addresses, and the failing worker's exit code.

torchrun advertises this host as ``socket.getfqdn()`` and decides whether it hosts the c10d
rendezvous by matching the endpoint against the hostname's addresses; both go wrong on hosts
with several interfaces (or network namespaces). Here the advertised address defaults to the
one this host uses to reach the rendezvous endpoint, and the host whose addresses include the
endpoint hosts the rendezvous. When a worker fails, torchrun exits with 1 whatever happened; run
through ``python -m multidev.cli.elastic`` the launcher exits with the first failed worker's code
(128 + N when signal N killed it), as the local launcher does. Each rendezvous round gets a fresh
store hosted by rank 0 (``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``), so a restarted group starts clean.

Example:
    >>> route_source_address("127.0.0.1")
    '127.0.0.1'
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys


def _addresses(host: str) -> list[tuple[int, str]]:
    try:
        infos = socket.getaddrinfo(host.strip("[]"), None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    return [(family, sockaddr[0]) for family, _, _, _, sockaddr in infos]


def route_source_address(host: str) -> str | None:
    """The local address this host sends from to reach ``host`` (None if ``host`` does not resolve)."""
    for family, address in _addresses(host):
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            try:
                sock.connect((address, 9))  # UDP connect sends nothing; it only picks the route
                return sock.getsockname()[0]
            except OSError:
                continue
    return None


def is_local_address(host: str) -> bool:
    """Whether ``host`` resolves to an address of this machine (one we can bind to)."""
    for family, address in _addresses(host):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((address, 0))
                return True
            except OSError:
                continue
    return False


def rendezvous_flags(backend: str, endpoint: str, conf: str | None, local_addr: str | None) -> list[str]:
    """``--rdzv-conf`` and ``--local-addr`` for torchrun, filling in what torchrun would guess wrong."""
    host = endpoint.rsplit(":", 1)[0] if endpoint.count(":") == 1 or endpoint.startswith("[") else endpoint
    entries = [e for e in (conf or "").split(",") if e]
    if backend == "c10d" and not any(e.split("=", 1)[0].strip() == "is_host" for e in entries):
        entries.append(f"is_host={str(is_local_address(host)).lower()}")
    flags = ["--rdzv-conf", ",".join(entries)] if entries else []
    local_addr = local_addr or route_source_address(host)
    return flags + (["--local-addr", local_addr] if local_addr else [])


def exit_code_of(failure_exitcode: int) -> int:
    """A worker's exit code as a shell reports it (128 + N when signal N killed it)."""
    return 128 - failure_exitcode if failure_exitcode < 0 else failure_exitcode


_AGENT_LOGGER = "torch.distributed.elastic.agent.server.api"
_FAILED = re.compile(r"Worker group (\w+)\. (\d+)/(\d+) attempts left; will restart worker group")
_EXITED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")
_JOINED = re.compile(r"Detected (\d+) new nodes from group_rank=(\d+); will restart worker group")


def restart_notice(message: str, exited: str | None = None) -> str | None:
    """What ``multidev launch`` says when torch's agent restarts the worker group (None for other lines);
    ``exited``: torch's last "failed (exitcode: N) local_rank: R" line, to say which worker and how.

    Example:
        >>> restart_notice("[default] Worker group FAILED. 3/3 attempts left; will restart worker group")
        'multidev launch: a worker of this host failed (worker group FAILED); restarting the worker group on every host (restart 1 of --max-restarts 3).'
    """
    failed = _FAILED.search(message)
    if failed:
        state, left, total = failed.group(1), int(failed.group(2)), int(failed.group(3))
        why = "a worker of this host failed" if state == "FAILED" else "a worker of this host stopped responding"
        code = _EXITED.search(exited or "")
        if code:
            why = f"local worker {code.group(2)} of this host exited with code {exit_code_of(int(code.group(1)))}"
        return (f"multidev launch: {why} (worker group {state}); restarting the worker group on every host "
                f"(restart {total - left + 1} of --max-restarts {total}).")
    joined = _JOINED.search(message)
    if joined:
        return (f"multidev launch: {joined.group(1)} new host(s) are waiting to join; restarting the worker group to "
                f"take them in (a membership change does not count against --max-restarts).")
    return None


class _RestartNotices(logging.Handler):
    """Prints ``restart_notice`` lines: torch's agent logs its restarts at INFO, which nobody sees."""

    exited: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if _EXITED.search(message):
            self.exited = message
        notice = restart_notice(message, self.exited)
        if notice:
            self.exited = None
            sys.stderr.write(notice + "\n")
            sys.stderr.flush()


def _announce_restarts() -> None:
    logger = logging.getLogger(_AGENT_LOGGER)
    if logger.getEffectiveLevel() > logging.INFO:   # let the INFO records through to our handler only
        for handler in logging.getLogger().handlers + logger.handlers:
            if handler.level == logging.NOTSET:
                handler.setLevel(logger.getEffectiveLevel())
        logger.setLevel(logging.INFO)
    notices = _RestartNotices(logging.INFO)
    logger.addHandler(notices)
    logging.getLogger("torch.distributed.elastic.multiprocessing.api").addHandler(notices)  # which worker exited


def main(argv: list[str] | None = None) -> int:
    """Run torch's elastic launcher; return the first failed worker's exit code (0 on success)."""
    # A fresh store per rendezvous round, hosted by rank 0 at MASTER_ADDR (its host) and a new
    # MASTER_PORT: restarted workers never meet keys of an earlier round, and need not agree on
    # TORCHELASTIC_RESTART_COUNT (agents count restarts differently: a membership change is not one).
    os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    _announce_restarts()
    try:
        run(parse_args(argv))
    except ChildFailedError as err:
        rank, failure = err.get_first_failure()
        code = exit_code_of(failure.exitcode)
        sys.stderr.write(err.format_msg() + "\n")
        sys.stderr.write(f"multidev launch: worker {rank} failed first, with exit code {code}.\n")
        sys.stderr.flush()
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
