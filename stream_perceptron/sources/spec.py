"""Sources by name: :func:`open_source` turns a spec, one line, into a
:class:`~stream_perceptron.sources.base.Source`.

Spec grammar::

    spec   := PATH                     file, chosen by suffix: .csv / .csv.gz -> CSV,
                                       .jsonl / .jsonl.gz / .ndjson -> JSON lines
            | "csv:" PATH | "jsonl:" PATH       file of that format, whatever its suffix
            | "river:" NAME            a dataset bundled with river (Phishing, Bananas, Shuttle)
            | "separable" [":" args]   generated separable stream with a known margin
            | "sea" [":" args]         river.datasets.synth.SEA (abrupt-drift concept)
            | "hyperplane" [":" args]  river.datasets.synth.Hyperplane (gradual drift)
    args   := key "=" value ("," key "=" value)*

Scheme names are case-insensitive; unknown keys, malformed ``key=value`` pairs, unknown schemes
and missing files raise :class:`~stream_perceptron.errors.SourceError` with a one-line message.
``limit`` (of :func:`open_source`) caps the number of examples of any source; a limited
generated stream is a prefix of the unlimited one.

>>> src = open_source("separable:d=3,n=5,seed=1")
>>> (src.n_features, src.length, len(list(src)))
(3, 5, 5)
>>> sorted({y for _, y in src}) in ([-1], [1], [-1, 1])
True
"""


from __future__ import annotations

from stream_perceptron.errors import SourceError
from stream_perceptron.sources.base import Source
from stream_perceptron.sources.classes import Classes
from stream_perceptron.sources.drifting import hyperplane_source, sea_source
from stream_perceptron.sources.files import csv_source, existing_file, jsonl_source
from stream_perceptron.sources.river_data import river_source
from stream_perceptron.sources.separable import separable_source

__all__ = ["open_source"]

_SCHEMES = ("csv", "jsonl", "river", "separable", "sea", "hyperplane")
_CSV_SUFFIXES = (".csv", ".csv.gz")
_JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")


def open_source(
    spec: str,
    *,
    limit: int | None = None,
    label: str = "y",
    positive_class: str | None = None,
    negative_class: str | None = None,
) -> Source:
    """Open the source named by ``spec`` (see the module docstring for the grammar).

    ``limit`` caps the number of examples (None: all). ``label`` is the CSV column (JSONL key)
    holding the label. ``positive_class``, when given, maps *string* labels, and every CSV
    label is a string: that exact string (after stripping spaces) is +1; with
    ``negative_class`` also given, that string is -1 and any other is a bad record, as the
    worker refuses it; without, every other string is -1 (one class against the rest).
    Boolean and numeric JSON labels keep their fixed meaning (true/1 -> +1, false/0/-1 -> -1).
    Files are checked (exist, header) here; bad rows raise :class:`SourceError` when iteration
    reaches them.
    """
    if limit is not None and limit < 0:
        raise SourceError(f"limit must be >= 0, got {limit}")
    classes = Classes(positive_class, negative_class)
    text = spec.strip()
    if not text:
        raise SourceError("empty source spec")
    head, sep, rest = text.partition(":")
    scheme = head.strip().lower()
    if scheme in _SCHEMES and (sep or scheme not in ("csv", "jsonl")):
        return _open_scheme(spec, scheme, rest.strip(), limit, label, classes)
    lower = text.lower()
    if lower.endswith(_CSV_SUFFIXES):
        return csv_source(spec, existing_file(text), limit, label, classes)
    if lower.endswith(_JSONL_SUFFIXES):
        return jsonl_source(spec, existing_file(text), limit, label, classes)
    if sep and head.isidentifier():
        raise SourceError(
            f"unknown source scheme {head!r} in {spec!r} (expected one of "
            f"{', '.join(s + ':' for s in _SCHEMES)} or a .csv/.jsonl file path)"
        )
    raise SourceError(
        f"unknown source spec {spec!r}: expected a .csv/.jsonl file path or one of "
        f"{', '.join(s + ':' for s in _SCHEMES)}"
    )


def _open_scheme(
    spec: str, scheme: str, rest: str, limit: int | None, label: str, classes: Classes
) -> Source:
    if scheme == "csv":
        return csv_source(spec, existing_file(rest), limit, label, classes)
    if scheme == "jsonl":
        return jsonl_source(spec, existing_file(rest), limit, label, classes)
    if scheme == "river":
        return river_source(spec, rest, limit, classes)
    if scheme == "separable":
        return separable_source(spec, rest, limit)
    if scheme == "sea":
        return sea_source(spec, rest, limit)
    return hyperplane_source(spec, rest, limit)
