"""TensorFlow's ``Fingerprint64`` (FarmHash's "na" 64-bit hash) in pure Python.

Used by ``StringLookup`` to spread out-of-vocabulary strings over ``num_oov_indices`` buckets
exactly as TensorFlow's ``tf.strings.to_hash_bucket_fast`` does (``fingerprint64(s) % n``), so
that layers adapted or configured the same way give the same ids as Keras on TensorFlow.

Example:
    >>> [fingerprint64(s.encode()) % 3 for s in ["Hello", "TensorFlow", "2.x"]]   # TF's docs
    [0, 2, 2]
"""

from __future__ import annotations

_M = (1 << 64) - 1
_K0, _K1, _K2 = 0xC3A5C85C97CB3127, 0xB492B66FBE98F273, 0x9AE16A3B2F90404F
_KMUL = 0x9DDFEA08EB382D69


def _u64(b: bytes, i: int) -> int:
    return int.from_bytes(b[i:i + 8], "little")


def _u32(b: bytes, i: int) -> int:
    return int.from_bytes(b[i:i + 4], "little")


def _rot(v: int, s: int) -> int:
    return v if s == 0 else ((v >> s) | (v << (64 - s))) & _M


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _mix16(u: int, v: int, mul: int = _KMUL) -> int:
    a = _shift_mix(((u ^ v) * mul) & _M)
    b = _shift_mix(((v ^ a) * mul) & _M)
    return (b * mul) & _M


def _upto16(b: bytes) -> int:
    n = len(b)
    mul = (_K2 + 2 * n) & _M
    if n >= 8:
        a, last = (_u64(b, 0) + _K2) & _M, _u64(b, n - 8)
        return _mix16((_rot(last, 37) * mul + a) & _M, ((_rot(a, 25) + last) * mul) & _M, mul)
    if n >= 4:
        return _mix16((n + (_u32(b, 0) << 3)) & _M, _u32(b, n - 4), mul)
    if n:
        y = b[0] + (b[n >> 1] << 8)
        z = n + (b[n - 1] << 2)
        return (_shift_mix(((y * _K2) ^ (z * _K0)) & _M) * _K2) & _M
    return _K2


def _upto32(b: bytes) -> int:
    n = len(b)
    mul = (_K2 + 2 * n) & _M
    a, c = (_u64(b, 0) * _K1) & _M, (_u64(b, n - 8) * mul) & _M
    b8, d = _u64(b, 8), (_u64(b, n - 16) * _K2) & _M
    return _mix16((_rot((a + b8) & _M, 43) + _rot(c, 30) + d) & _M, (a + _rot((b8 + _K2) & _M, 18) + c) & _M, mul)


def _upto64(b: bytes) -> int:
    n = len(b)
    mul = (_K2 + 2 * n) & _M
    a, b8 = (_u64(b, 0) * _K2) & _M, _u64(b, 8)
    c, d = (_u64(b, n - 8) * mul) & _M, (_u64(b, n - 16) * _K2) & _M
    y = (_rot((a + b8) & _M, 43) + _rot(c, 30) + d) & _M
    z = _mix16(y, (a + _rot((b8 + _K2) & _M, 18) + c) & _M, mul)
    e, f = (_u64(b, 16) * mul) & _M, _u64(b, 24)
    g, h = ((y + _u64(b, n - 32)) * mul) & _M, ((z + _u64(b, n - 24)) * mul) & _M
    return _mix16((_rot((e + f) & _M, 43) + _rot(g, 30) + h) & _M, (e + _rot((f + a) & _M, 18) + g) & _M, mul)


def _weak32(b: bytes, i: int, a: int, c: int) -> tuple[int, int]:
    w, x, y, z = _u64(b, i), _u64(b, i + 8), _u64(b, i + 16), _u64(b, i + 24)
    a = (a + w) & _M
    c = _rot((c + a + z) & _M, 21)
    first = a
    a = (a + x + y) & _M
    c = (c + _rot(a, 44)) & _M
    return (a + z) & _M, (c + first) & _M


def _long(b: bytes) -> int:
    n, seed = len(b), 81
    x = seed
    y = (seed * _K1 + 113) & _M
    z = (_shift_mix((y * _K2 + 113) & _M) * _K2) & _M
    v, w = (0, 0), (0, 0)
    x = (x * _K2 + _u64(b, 0)) & _M
    end, last64 = ((n - 1) // 64) * 64, n - 64
    s = 0
    while True:
        x = (_rot((x + y + v[0] + _u64(b, s + 8)) & _M, 37) * _K1) & _M
        y = (_rot((y + v[1] + _u64(b, s + 48)) & _M, 42) * _K1) & _M
        x ^= w[1]
        y = (y + v[0] + _u64(b, s + 40)) & _M
        z = (_rot((z + w[0]) & _M, 33) * _K1) & _M
        v = _weak32(b, s, (v[1] * _K1) & _M, (x + w[0]) & _M)
        w = _weak32(b, s + 32, (z + w[1]) & _M, (y + _u64(b, s + 16)) & _M)
        z, x = x, z
        s += 64
        if s == end:
            break
    mul = (_K1 + ((z & 0xFF) << 1)) & _M
    s = last64
    w = ((w[0] + ((n - 1) & 63)) & _M, w[1])
    v = ((v[0] + w[0]) & _M, v[1])
    w = ((w[0] + v[0]) & _M, w[1])
    x = (_rot((x + y + v[0] + _u64(b, s + 8)) & _M, 37) * mul) & _M
    y = (_rot((y + v[1] + _u64(b, s + 48)) & _M, 42) * mul) & _M
    x ^= (w[1] * 9) & _M
    y = (y + v[0] * 9 + _u64(b, s + 40)) & _M
    z = (_rot((z + w[0]) & _M, 33) * mul) & _M
    v = _weak32(b, s, (v[1] * mul) & _M, (x + w[0]) & _M)
    w = _weak32(b, s + 32, (z + w[1]) & _M, (y + _u64(b, s + 16)) & _M)
    z, x = x, z
    return _mix16((_mix16(v[0], w[0], mul) + _shift_mix(y) * _K0 + z) & _M,
                  (_mix16(v[1], w[1], mul) + x) & _M, mul)


def fingerprint64(data: bytes) -> int:
    """TensorFlow's ``Fingerprint64`` of ``data`` as an unsigned 64-bit integer."""
    n = len(data)
    if n <= 16:
        return _upto16(data)
    if n <= 32:
        return _upto32(data)
    if n <= 64:
        return _upto64(data)
    return _long(data)


__all__ = ["fingerprint64"]
