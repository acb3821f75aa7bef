"""The integer arithmetic of the demo ranked models (docs/ranks.md, "The demo ranked models").

Twin of sdk/engines/demo/ranked-math.ts: ranks of Python and TypeScript workers are mixed in
one pipeline, so every function here must agree with its twin bit for bit. Integers only (no
floats: libm and summation order could split the languages); 32-bit words are wrapped with
``& 0xFFFFFFFF``; ``>>`` on a negative int rounds down in Python as on an int32 in JavaScript.
Standard library only.
"""
from __future__ import annotations

import hashlib
import struct
from typing import List, Optional, Sequence

#: Activations are kept within +-2**ACT_BITS by ``normalize``; frames holding more are refused.
ACT_BITS = 12
ACT_LIMIT = 1 << ACT_BITS
_M32 = 0xFFFFFFFF


def mix32(x: int) -> int:
    """A 32-bit finalizer (lowbias32): every input bit moves about half of the output bits."""
    x &= _M32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & _M32
    return x ^ (x >> 16)


def seeded_word(seed: int, tag: int, index: int) -> int:
    """Word ``index`` of the weight stream ``tag``: counter-based, so a rank makes only its own layers."""
    return mix32((mix32(seed ^ tag) + index * 0x9E3779B9) & _M32)


def seeded_ints(seed: int, tag: int, count: int, bits: int) -> List[int]:
    """``count`` signed weights of ``bits`` bits (in [-2**(bits-1), 2**(bits-1))) from stream ``tag``."""
    base = mix32(seed ^ tag)
    shift, half = 32 - bits, 1 << (bits - 1)
    return [(mix32((base + i * 0x9E3779B9) & _M32) >> shift) - half for i in range(count)]


def fnv1a32(data: bytes) -> int:
    """FNV-1a over bytes: how an out-of-vocabulary word picks its token."""
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & _M32
    return h


def normalize(v: List[int]) -> List[int]:
    """Shifts the whole vector right by one amount so its largest magnitude is at most 2**ACT_BITS."""
    top = max((abs(x) for x in v), default=0)
    shift = max(0, top.bit_length() - ACT_BITS)
    return [x >> shift for x in v] if shift else v


def center(v: List[int]) -> List[int]:
    """Subtracts the mean rounded down (the sum shifted by log2 of the length, a power of two)."""
    mean = sum(v) >> (len(v).bit_length() - 1)
    return [x - mean for x in v]


def dense(x: Sequence[int], rows: Sequence[Sequence[int]], bias: Optional[Sequence[int]] = None) -> List[int]:
    """out[i] = bias[i] + sum_j rows[i][j] * x[j]; the bounds of ranked-math.ts keep it below 2**26."""
    if bias is None:
        return [sum(map(int.__mul__, row, x)) for row in rows]
    return [b + sum(map(int.__mul__, row, x)) for row, b in zip(rows, bias)]


def leaky_relu(v: List[int]) -> List[int]:
    """Negatives divided by 8 rounding down (an arithmetic shift)."""
    return [x if x >= 0 else x >> 3 for x in v]


def argmax(v: Sequence[int]) -> int:
    """Ties go to the lowest index."""
    best = 0
    for i in range(1, len(v)):
        if v[i] > v[best]:
            best = i
    return best


def rows_of(flat: Sequence[int], width: int) -> List[List[int]]:
    return [list(flat[i : i + width]) for i in range(0, len(flat), width)]


def int32le(v: Sequence[int]) -> bytes:
    return struct.pack("<%di" % len(v), *v)


def sha256(*parts: bytes) -> bytes:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.digest()
