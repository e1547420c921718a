r"""The hashing trick for named features (pure: the standard library and numpy).

With ``hash_bits`` :math:`b`, a feature name :math:`k` goes to column :math:`h(k) \bmod 2^b` of a
model of fixed width :math:`2^b`, however many distinct names arrive (Weinberger et al. 2009, as
Vowpal Wabbit does it). :math:`h` is the first 8 bytes of BLAKE2b of the name's UTF-8 bytes,
read little-endian: the same in every process and on every machine, unlike Python's ``hash``,
which is salted per process. With sign hashing, the top bit of :math:`h` gives the name a sign
:math:`\xi(k) \in \{-1, +1\}` and the model sees :math:`\xi(k) x_k` in that column, so that two
colliding names add with independent signs and their cross-talk has mean zero.

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

from hashlib import blake2b

import numpy as np
import numpy.typing as npt

MAX_HASH_BITS = 30
_CACHE_NAMES = 1 << 16  # names whose hash is remembered: constant memory, however many arrive


class FeatureHasher:
    """Feature names → (column, sign).

    >>> hasher = FeatureHasher(bits=4, signed=True)
    >>> columns, signs = hasher.columns(["clicks", "user:17", "user:42", "country"])
    >>> columns.tolist(), signs.tolist()  # "user:17" and "country" collide in column 13
    ([5, 13, 9, 13], [1.0, 1.0, -1.0, 1.0])
    """

    def __init__(self, bits: int, signed: bool = False) -> None:
        if not 1 <= bits <= MAX_HASH_BITS:
            raise ValueError(f"hash_bits must be 1 to {MAX_HASH_BITS}, got {bits}")
        self.bits = bits
        self.signed = signed
        self._mask = (1 << bits) - 1
        self._cache: dict[str, tuple[int, float]] = {}

    def column(self, name: str) -> tuple[int, float]:
        """The column and sign of one name."""
        hit = self._cache.get(name)
        if hit is not None:
            return hit
        h = int.from_bytes(blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
        out = (h & self._mask, -1.0 if self.signed and h >> 63 else 1.0)
        if len(self._cache) >= _CACHE_NAMES:
            self._cache.clear()
        self._cache[name] = out
        return out

    def columns(self, names: list[str]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """Columns and signs of ``names``, in order."""
        pairs = [self.column(k) for k in names]
        cols = np.fromiter((c for c, _ in pairs), dtype=np.intp, count=len(pairs))
        signs = np.fromiter((s for _, s in pairs), dtype=np.float64, count=len(pairs))
        return cols, signs


__all__ = ["MAX_HASH_BITS", "FeatureHasher"]
