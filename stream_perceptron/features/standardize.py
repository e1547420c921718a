"""Online standardization of numeric features, one running mean and variance per feature, kept in
the partition's state so that a replay standardizes exactly as the first run did.

Each value first updates its feature's statistics, then is standardized with them, in exactly the
operations of river's ``preprocessing.StandardScaler`` (``learn_one`` then ``transform_one``):
the population variance, and 0 while it is 0. The statistics then describe the standardized
space: R, γ and the margins are measured on the standardized features.

>>> s = Standardizer()
>>> [round(s.update_and_scale("amount", v), 12) for v in (10.0, 20.0, 30.0)]
[0.0, 1.0, 1.224744871392]
>>> again = Standardizer.from_state(s.get_state())
>>> again.update_and_scale("amount", 40.0) == s.update_and_scale("amount", 40.0)
True
"""

from __future__ import annotations

from typing import Any


class Standardizer:
    """Running mean and (population) variance per feature name."""

    def __init__(self) -> None:
        self._stats: dict[str, list[float]] = {}  # name → [count, mean, variance]

    def update_and_scale(self, name: str, x: float) -> float:
        """Update ``name``'s statistics with ``x``, then ``x`` standardized with them."""
        stats = self._stats.get(name)
        if stats is None:
            stats = self._stats[name] = [0.0, 0.0, 0.0]
        count, mean, var = stats
        count += 1
        old_mean = mean
        mean += (x - old_mean) / count
        var += ((x - old_mean) * (x - mean) - var) / count
        stats[0], stats[1], stats[2] = count, mean, var
        return (x - mean) / var**0.5 if var else 0.0

    def get_state(self) -> dict[str, Any]:
        """Plain JSON data (floats round-trip exactly)."""
        return {name: list(stats) for name, stats in self._stats.items()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Standardizer:
        out = cls()
        for name, (count, mean, var) in state.items():
            out._stats[str(name)] = [float(count), float(mean), float(var)]
        return out

    def __len__(self) -> int:
        return len(self._stats)
