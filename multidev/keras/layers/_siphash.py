"""SipHash-2-4 in pure Python: TensorFlow's ``StrongKeyedHash`` (``tf.strings.to_hash_bucket_strong``).

``Hashing(salt=...)`` hashes with it, so a salted layer gives the bins Keras gives on TensorFlow.

Example:
    >>> siphash24(133, 133, b"A") % 3      # tf.strings.to_hash_bucket_strong(["A"], 3, key=[133, 133])
    0
"""

from __future__ import annotations

_M = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M


def _round(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    v0 = (v0 + v1) & _M
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = (v2 + v3) & _M
    v3 = _rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & _M
    v3 = _rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & _M
    v1 = _rotl(v1, 17) ^ v2
    return v0, v1, _rotl(v2, 32), v3


def _absorb(v: tuple[int, int, int, int], m: int) -> tuple[int, int, int, int]:
    v0, v1, v2, v3 = v
    v0, v1, v2, v3 = _round(*_round(v0, v1, v2, v3 ^ m))
    return v0 ^ m, v1, v2, v3


def siphash24(k0: int, k1: int, data: bytes) -> int:
    """The 64-bit SipHash-2-4 of ``data`` under the key ``(k0, k1)`` (two unsigned 64-bit words)."""
    k0, k1 = k0 & _M, k1 & _M
    v = (k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573)
    end = len(data) - len(data) % 8
    for i in range(0, end, 8):
        v = _absorb(v, int.from_bytes(data[i:i + 8], "little"))
    v = _absorb(v, ((len(data) & 0xFF) << 56) | int.from_bytes(data[end:], "little"))
    v0, v1, v2, v3 = v[0], v[1], v[2] ^ 0xFF, v[3]
    for _ in range(4):
        v0, v1, v2, v3 = _round(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3
