"""The per-job secret of the rendezvous: only processes that know it are admitted, and nobody else can
forge what the job's processes write to the store.

torch's TCP store has no authentication: whoever can connect to it can list, read and write every
key. With ``MULTIDEV_JOB_SECRET`` set (``multidev launch`` sets a fresh random one per job):

* rank 0 posts a public *gate* record: a random nonce and a proof (HMAC of the nonce with the secret);
* every process checks the proof before it writes anything: a process without the secret, or with
  another one, is refused at once (``UnauthenticatedError``) and the job never sees it;
* from then on every record multidev writes (join records, failure reports) carries an HMAC-SHA256
  under a key derived from the secret and the nonce, and every record read is checked
  (``SignedStore``): a forged or replayed record is rejected, never used.

What it does not do: encrypt. Values stay readable by whoever can connect to the store; torch's
backends exchange their addresses through the plain store (Gloo's timeouts stop firing on a Python
store), and the data connections (Gloo, NCCL, TensorPipe) are neither authenticated nor encrypted;
see docs/multi_worker.md ("Security: who may join a job").
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import warnings

import torch.distributed as dist

from multidev._core.errors import UnauthenticatedError
from multidev.collectives.job_secret import SECRET_ENV, job_secret, new_secret

_SCHEME = "hmac-sha256"
_NONE = "none"
_MAC_BYTES = hashlib.sha256().digest_size
_warned = False


def _hmac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"\0".join(parts), hashlib.sha256).digest()


def _as_bytes(value) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


class SignedStore(dist.Store):
    """A view of a store whose values carry an HMAC bound to their key: forged values never read back.

    ``set`` stores ``mac || value``; ``get`` checks the MAC and raises ``UnauthenticatedError`` for a
    value not written with this job's key. Counters (``add``) stay unsigned: nothing of ours reads
    them. Used for multidev's own records; not handed to torch's backends (Gloo's op timeouts stop
    firing with a Python store underneath).

    Example:
        >>> signed = SignedStore(dist.HashStore(), b"k" * 32)
        >>> signed.set("a", "1"); signed.get("a")
        b'1'
    """

    def __init__(self, store: dist.Store, key: bytes, where: str = "the rendezvous store"):
        super().__init__()
        dist.Store.set_timeout(self, store.timeout)  # torch reads the wrapper's own timeout (Gloo's waits use it)
        self._inner = store
        self._key = key
        self._where = where

    def _mac(self, key: str, value: bytes) -> bytes:
        return _hmac(self._key, key.encode("utf-8"), value)

    def _seal(self, key: str, value) -> bytes:
        value = _as_bytes(value)
        return self._mac(key, value) + value

    def _open(self, key: str, raw: bytes) -> bytes:
        mac, value = raw[:_MAC_BYTES], raw[_MAC_BYTES:]
        if len(raw) < _MAC_BYTES or not hmac.compare_digest(mac, self._mac(key, value)):
            raise UnauthenticatedError(
                f"The value of key {key!r} in {self._where} is not signed with this job's secret: a process "
                "without the job's MULTIDEV_JOB_SECRET wrote it. Check who else can reach the rendezvous port."
            )
        return value

    def set(self, key, value):
        self._inner.set(key, self._seal(key, value))

    def get(self, key):
        return self._open(key, self._inner.get(key))

    def compare_set(self, key, expected, desired):
        expected = _as_bytes(expected)
        sealed = self._seal(key, expected) if expected else b""
        return self._open(key, self._inner.compare_set(key, sealed, self._seal(key, desired)))

    def add(self, key, amount):
        return self._inner.add(key, amount)

    def check(self, keys):
        return self._inner.check(keys)

    def wait(self, keys, timeout=None):
        return self._inner.wait(keys) if timeout is None else self._inner.wait(keys, timeout)

    def delete_key(self, key):
        return self._inner.delete_key(key)

    def num_keys(self):
        return self._inner.num_keys()

    def set_timeout(self, timeout):
        dist.Store.set_timeout(self, timeout)
        self._inner.set_timeout(timeout)


class JobGate:
    """The admission check of one rendezvous (one ``prefix``): rank 0 posts it, everyone verifies it.

    Args:
        store: the raw rendezvous store.
        prefix: namespace of this rendezvous (ProcessCollective's generation, the ps group).
        secret: this process's job secret (``job_secret()``), or None.
        who: how errors name this process; where: how they name the rendezvous.
        warn_open: warn (once per process) when the job runs without a secret; ``"loopback"`` when
            only processes of this machine can reach the rendezvous, ``"network"`` when others can.
    """

    def __init__(self, store: dist.Store, prefix: str, secret: bytes | None, who: str, where: str,
                 warn_open: str | None = None):
        self._store = store
        self._key = f"{prefix}/gate"
        self._prefix = prefix.encode("utf-8")
        self._secret = secret
        self._who = who
        self._where = where
        self._warn_open = warn_open
        self._seen: bytes | None = None

    def post(self) -> None:
        """Rank 0: publish the gate (a nonce and its proof, or ``none`` without a secret)."""
        if self._secret is None:
            self._store.set(self._key, _NONE)
            return
        nonce = secrets.token_hex(16).encode("ascii")
        proof = _hmac(self._secret, b"multidev gate v1", self._prefix, nonce).hex().encode("ascii")
        self._store.set(self._key, b" ".join([_SCHEME.encode("ascii"), nonce, proof]))

    def posted(self) -> bool:
        """True once rank 0 has published the gate."""
        return self._store.check([self._key])

    def admit(self) -> dist.Store:
        """Verify the gate against this process's secret; the store the job then uses (signed or not).

        Raises:
            UnauthenticatedError: the job has a secret and this process has none or another one, or
                this process has a secret and the rendezvous host none (it may not be this job's).
        """
        raw = self._store.get(self._key)
        self._seen = raw
        fields = raw.split(b" ")
        if fields == [_NONE.encode("ascii")]:
            if self._secret is not None:
                raise UnauthenticatedError(
                    f"{self._who} refuses the rendezvous at {self._where}: this process has a job secret "
                    f"({SECRET_ENV}) but the process hosting the rendezvous has none, so it may not belong to "
                    "this job. Give every task the same secret (multidev launch does), or none to any."
                )
            if self._warn_open:
                _warn_unauthenticated(self._where, self._warn_open)
            return self._store
        if len(fields) != 3 or fields[0] != _SCHEME.encode("ascii"):
            raise UnauthenticatedError(f"{self._who} refuses the rendezvous at {self._where}: its gate record "
                                       f"{raw[:80]!r} is not multidev's; another program may be using the port.")
        if self._secret is None:
            raise UnauthenticatedError(
                f"{self._who} was refused by the job at {self._where}: the job requires a per-job secret "
                f"({SECRET_ENV}, set by `multidev launch`) and this process has none. Start every task "
                f"through the same launcher, or give this process the job's {SECRET_ENV}."
            )
        nonce, proof = fields[1], fields[2]
        expected = _hmac(self._secret, b"multidev gate v1", self._prefix, nonce).hex().encode("ascii")
        if not hmac.compare_digest(proof, expected):
            raise UnauthenticatedError(
                f"{self._who} was refused by the job at {self._where}: this process's {SECRET_ENV} differs "
                "from the job's. Give every task the same secret (multidev launch does)."
            )
        session_key = _hmac(self._secret, b"multidev store v1", self._prefix, nonce)
        return SignedStore(self._store, session_key, f"the rendezvous at {self._where}")

    def confirm(self) -> None:
        """After the join: the gate is still the one verified (nobody swapped it while others joined)."""
        if self._store.get(self._key) != self._seen:
            raise UnauthenticatedError(
                f"The gate record of the rendezvous at {self._where} changed while {self._who} was joining: "
                "another process wrote to this job's rendezvous. Check who else can reach its port."
            )


def _warn_unauthenticated(where: str, reach: str) -> None:
    """Warn once per process that the job has no secret, and who could therefore join it."""
    global _warned
    if _warned:
        return
    _warned = True
    who = ("any process on this machine" if reach == "loopback" else
           f"any process that can reach {where} over the network (a non-loopback address such as 0.0.0.0 or "
           "a host name makes the rendezvous listen on every interface)")
    warnings.warn(
        f"This multi-worker job runs without a job secret: {who} may join it as one of its tasks and receive "
        f"the weights. Set the same random {SECRET_ENV} on every task (`multidev launch` does it for local "
        "jobs), e.g. export MULTIDEV_JOB_SECRET=$(python -c 'import secrets; print(secrets.token_hex(32))'); "
        "see docs/multi_worker.md, 'Security'.",
        UserWarning,
        stacklevel=3,
    )


__all__ = ["SECRET_ENV", "new_secret", "job_secret", "SignedStore", "JobGate"]
