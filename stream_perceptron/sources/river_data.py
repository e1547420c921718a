"""The datasets of ``river.datasets``: those bundled with river, or already in its cache
(nothing is downloaded). river is imported only when such a source is opened."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stream_perceptron.errors import SourceError
from stream_perceptron.sources.base import BadRecord, Example, Source, cap, limited, number
from stream_perceptron.sources.classes import POSITIVE_CLASS_SETTING, Classes, SeenClasses, label_from_value

__all__ = ["SUPPORTED_RIVER_DATASETS", "river_source"]

SUPPORTED_RIVER_DATASETS: tuple[str, ...] = ("Phishing", "Bananas", "Shuttle")
"""Binary-classification datasets shipped inside the river wheel (usable offline)."""


def river_source(spec: str, name: str, limit: int | None, classes: Classes) -> Source:
    """A river dataset: x dense in the dataset's feature order, y mapped to -1/+1.

    Phishing (1,250 x 9; y True = phishing -> +1), Bananas (5,300 x 2, features "1", "2"; y
    bool), Shuttle (49,097 x 9, features f1..f9 as ints -> floats; y ``anomaly`` 1 -> +1, 0 ->
    -1, about 7% positive) ship inside river. Any other binary dataset of ``river.datasets``
    works if its files are already on disk (river's own cache); nothing is downloaded. A
    multi-class dataset works when ``positive_class`` names the positive class, every other
    class being -1; with ``negative_class`` also set, a third class is a bad example.
    """
    from river import datasets as river_datasets
    from river.datasets import base as river_base

    dataset = _river_dataset(name, river_datasets, river_base)
    task = dataset.task
    title = f"river:{type(dataset).__name__}"
    if task != river_base.BINARY_CLF and not (
        task == river_base.MULTI_CLF and classes.positive is not None
    ):
        raise SourceError(
            f"{title}: task is {task!r}, not binary classification "
            f"(supported: {', '.join(SUPPORTED_RIVER_DATASETS)}; "
            f"multi-class datasets need a positive class: {POSITIVE_CLASS_SETTING})"
        )
    sparse = bool(getattr(dataset, "sparse", False))
    names = None if sparse else _river_feature_names(dataset, title)
    seen = SeenClasses()

    def examples() -> Iterator[Example]:
        it = iter(dataset)
        index = 0
        try:
            for x, y in it:
                index += 1
                yield _river_example(x, y, names, classes, seen)
        except BadRecord as exc:
            raise SourceError(f"{title}: example #{index}: {exc}") from None
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    n_samples = getattr(dataset, "n_samples", None)
    length = n_samples if isinstance(n_samples, int) else None
    n_features = None if names is None else len(names)
    return Source(spec, n_features, names, cap(length, limit), limited(examples, limit), classes=seen)


def _river_dataset(name: str, module: Any, base: Any) -> Any:
    wanted = name.strip()
    if not wanted:
        raise SourceError(
            f"river: missing dataset name (supported: {', '.join(SUPPORTED_RIVER_DATASETS)})"
        )
    classes = {
        attr: obj
        for attr in dir(module)
        if isinstance(obj := getattr(module, attr), type) and issubclass(obj, base.Dataset)
    }
    match = classes.get(wanted) or next(
        (c for a, c in classes.items() if a.lower() == wanted.lower()), None
    )
    if match is None:
        raise SourceError(
            f"river:{wanted}: not a river dataset (supported: "
            f"{', '.join(SUPPORTED_RIVER_DATASETS)})"
        )
    try:
        dataset = match()
    except Exception as exc:  # any constructor failure is a source problem
        raise SourceError(f"river:{wanted}: cannot construct: {exc}") from None
    if isinstance(dataset, base.RemoteDataset) and not dataset.is_downloaded:
        raise SourceError(
            f"river:{match.__name__}: not bundled with river and not downloaded "
            f"(this project never downloads; bundled: {', '.join(SUPPORTED_RIVER_DATASETS)})"
        )
    return dataset


def _river_feature_names(dataset: Any, title: str) -> list[str]:
    it = iter(dataset)
    try:
        first = next(it, None)
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
    if first is None:
        raise SourceError(f"{title}: the dataset is empty")
    x = first[0]
    if not isinstance(x, dict):
        raise SourceError(f"{title}: features are not a dict ({type(x).__name__})")
    return [str(k) for k in x]


def _river_example(
    x: dict[Any, Any], y: object, names: list[str] | None, classes: Classes, seen: SeenClasses
) -> Example:
    label = label_from_value(y, classes, seen)
    if names is None:
        return {str(k): number(v, repr(k)) for k, v in x.items()}, label
    if len(x) != len(names):
        raise BadRecord(f"{len(x)} features, expected {len(names)}")
    values = list(x.values())
    keys = [str(k) for k in x]
    if keys != names:
        by_name = {str(k): v for k, v in x.items()}
        try:
            values = [by_name[n] for n in names]
        except KeyError as exc:
            raise BadRecord(f"missing feature {exc.args[0]!r}") from None
    return [number(v, n) for n, v in zip(names, values, strict=True)], label
