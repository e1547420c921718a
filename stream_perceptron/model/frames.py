"""pandas objects in and out of the perceptron's mini-batch API, as river's linear models take and
give them (pure: numpy; pandas only as the caller hands it over).

This module never imports pandas: an object is a DataFrame or a Series only if pandas is already
imported (``sys.modules``), and the results are built with that same module. So the model installs
and imports without pandas, and a caller who never passes a pandas object never loads it
(``tests/unit/test_layers.py`` checks that importing the model loads no pandas).
"""

from __future__ import annotations

import sys
from collections.abc import Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

from stream_perceptron.errors import FeatureValueError
from stream_perceptron.model.rowwise import value

__all__ = ["columns_and_values", "frame", "is_frame", "is_pandas", "name_of", "series", "values_of"]


def _pandas() -> Any:
    return sys.modules.get("pandas")


def is_frame(obj: object) -> bool:
    """Whether ``obj`` is a pandas DataFrame."""
    pd = _pandas()
    return pd is not None and isinstance(obj, pd.DataFrame)


def is_pandas(obj: object) -> bool:
    """Whether ``obj`` is a pandas DataFrame or Series."""
    pd = _pandas()
    return pd is not None and isinstance(obj, pd.DataFrame | pd.Series)


def name_of(y: Any) -> Hashable:
    """A Series' name."""
    name: Hashable = y.name
    return name


def values_of(y: Any) -> npt.NDArray[Any]:
    """A Series' values (its index is not looked at: rows go by position, as river has it)."""
    out: npt.NDArray[Any] = y.to_numpy()
    return out


def columns_and_values(X: Any) -> tuple[list[Hashable], npt.NDArray[np.float64]]:
    """A DataFrame's column labels and its values as one C-ordered float64 matrix; a value that
    is not a finite number raises :class:`~stream_perceptron.errors.FeatureValueError` naming its
    row (by index label) and column."""
    names = list(X.columns)
    if len(set(names)) != len(names):
        raise ValueError(f"X has the same column name twice: {names!r}")
    if any(getattr(dtype, "kind", "O") not in "biuf" for dtype in X.dtypes):
        bad = _first_bad(X, names)  # objects or text: each value must be a number, as in a dict
        if bad is not None:
            raise bad
    try:
        values = X.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        values = None
    if values is None or not np.isfinite(values).all():
        raise _first_bad(X, names) or FeatureValueError("X holds a value that is not a finite number")
    return names, np.ascontiguousarray(values, dtype=np.float64)


def _first_bad(X: Any, names: list[Hashable]) -> FeatureValueError | None:
    """The error for the first value of ``X``, row by row, that is not a finite number (None
    when every value is one)."""
    for r, (label, row) in enumerate(zip(X.index, X.itertuples(index=False, name=None), strict=True)):
        for name, v in zip(names, row, strict=True):
            try:
                value(v)
            except FeatureValueError as exc:
                return FeatureValueError(f"row {r} (index {label!r}): feature {name!r} {exc.reason}:"
                                         " feature values are finite numbers")
    return None


def series(values: npt.NDArray[Any], like: Any, name: Hashable) -> Any:
    """``values`` as a Series on the index of the DataFrame ``like``."""
    return _pandas().Series(values, index=like.index, name=name)


def frame(values: npt.NDArray[np.float64], like: Any, columns: tuple[Any, Any]) -> Any:
    """A two-column matrix as a DataFrame on the index of ``like``, its columns named."""
    return _pandas().DataFrame(values, index=like.index, columns=list(columns))
