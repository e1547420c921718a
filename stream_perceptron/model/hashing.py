r"""The hashing trick for named features (pure: the standard library and numpy).

With ``hash_bits`` :math:`b`, a feature name :math:`k` goes to column :math:`h(k) \bmod 2^b` of a
model of fixed width :math:`2^b`, however many distinct names arrive (Weinberger et al. 2009, as
Vowpal Wabbit does it). :math:`h` is the first 8 bytes of BLAKE2b of the name's bytes
(:func:`key_bytes`), read little-endian: the same in every process and on every machine, unlike
Python's ``hash``, which is salted per process. With sign hashing, the top bit of :math:`h` gives
the name a sign :math:`\xi(k) \in \{-1, +1\}` and the model sees :math:`\xi(k) x_k` in that
column, so that two colliding names add with independent signs and their cross-talk has mean
zero.

**Names of any kind.** A name is a string, an integer (river's generators key their features
0, 1, 2…), a float, ``bytes``, ``None`` or a tuple of these. Its bytes (:func:`key_bytes`) are:

* a string: its UTF-8 bytes (lone surrogates kept), nothing else, so a string's column is the
  one it always had and a hashed model stored before keeps its meaning;
* anything else: the byte ``0xFF`` (which no UTF-8 text holds, so no string can give the same
  bytes), then a typed canonical form: ``i`` and the decimal digits of an integer (``bool`` and
  a float holding an integer are that integer, as Python's ``==`` and a dict's keys have it:
  ``True``, ``1`` and ``1.0`` are one feature); ``f`` and :meth:`float.hex` of any other float;
  ``b`` and the bytes; ``n`` for None; ``t`` and, for each member of a tuple in order, its
  length in decimal digits, ``:`` and its form (a string member as ``s`` and its UTF-8 bytes).

Other kinds of name (a frozenset, an object of one's own) are refused: their bytes would not be
stable.

**Collisions.** Two names with the same column share one weight: the model cannot tell them
apart, and each update for one moves the other's score. With :math:`m` distinct names in
:math:`2^b` columns, a given name shares its column with about :math:`m / 2^b` others; for a
record's few features this is noise in the score, not a failure, but keep :math:`2^b` well above
the number of names that matter (``hash_bits=20``: 1,048,576 columns, 8 MiB of weights).
The perceptron itself is unchanged: it learns on the hashed vectors :math:`\phi(x)`, and the
perceptron's statements (the update, :math:`E_n`, :math:`R`, γ and the bound) hold for
:math:`\phi(x)`, which is what the statistics measure.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from hashlib import blake2b

import numpy as np
import numpy.typing as npt

MAX_HASH_BITS = 30
_CACHE_NAMES = 1 << 16  # names whose hash is remembered: constant memory, however many arrive
_TYPED = b"\xff"  # begins the bytes of every name that is not a string: never in UTF-8 text


def key_bytes(name: Hashable) -> bytes:
    """The bytes hashed for a feature name (the module's docstring gives the encoding).

    >>> key_bytes("clicks"), key_bytes(3), key_bytes(True), key_bytes(2.5)
    (b'clicks', b'\xffi3', b'\xffi1', b'\xfff0x1.4000000000000p+1')
    >>> key_bytes(("user", 17)) == key_bytes(("user", 17.0)), key_bytes(("user", 17))
    (True, b'\xfft5:suser3:i17')
    >>> key_bytes(frozenset())
    Traceback (most recent call last):
    ...
    TypeError: a hashed feature name is a str, int, float, bytes, None or a tuple of them; got frozenset
    """
    if isinstance(name, str):
        return name.encode("utf-8", "surrogatepass")
    return _TYPED + _typed(name)


def _typed(name: object) -> bytes:
    if isinstance(name, str):
        return b"s" + name.encode("utf-8", "surrogatepass")
    if isinstance(name, bool | int | np.integer):
        return b"i%d" % int(name)
    if isinstance(name, float | np.floating):
        f = float(name)
        return b"i%d" % int(f) if f.is_integer() else b"f" + f.hex().encode("ascii")
    if isinstance(name, bytes):
        return b"b" + name
    if name is None:
        return b"n"
    if isinstance(name, tuple):
        members = [_typed(m) for m in name]
        return b"t" + b"".join(b"%d:%s" % (len(m), m) for m in members)
    raise TypeError("a hashed feature name is a str, int, float, bytes, None or a tuple of them;"
                    f" got {type(name).__name__}")


class FeatureHasher:
    """Feature names → (column, sign).

    >>> hasher = FeatureHasher(bits=4, signed=True)
    >>> columns, signs = hasher.columns(["clicks", "user:17", "user:42", "country"])
    >>> columns.tolist(), signs.tolist()  # "user:17" and "country" collide in column 13
    ([5, 13, 9, 13], [1.0, 1.0, -1.0, 1.0])

    ``known`` holds the columns and signs of the names met lately (at most 65,536 of them), for
    a caller that looks names up one by one.
    """

    def __init__(self, bits: int, signed: bool = False) -> None:
        if not 1 <= bits <= MAX_HASH_BITS:
            raise ValueError(f"hash_bits must be 1 to {MAX_HASH_BITS}, got {bits}")
        self.bits = bits
        self.signed = signed
        self._mask = (1 << bits) - 1
        self.known: dict[Hashable, tuple[int, float]] = {}

    def column(self, name: Hashable) -> tuple[int, float]:
        """The column and sign of one name."""
        hit = self.known.get(name)
        if hit is not None:
            return hit
        h = int.from_bytes(blake2b(key_bytes(name), digest_size=8).digest(), "little")
        out = (h & self._mask, -1.0 if self.signed and h >> 63 else 1.0)
        if len(self.known) >= _CACHE_NAMES:
            self.known.clear()
        self.known[name] = out
        return out

    def columns(self, names: Sequence[Hashable]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """Columns and signs of ``names``, in order."""
        pairs = [self.column(k) for k in names]
        cols = np.fromiter((c for c, _ in pairs), dtype=np.intp, count=len(pairs))
        signs = np.fromiter((s for _, s in pairs), dtype=np.float64, count=len(pairs))
        return cols, signs


__all__ = ["MAX_HASH_BITS", "FeatureHasher", "key_bytes"]
