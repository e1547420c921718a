"""Named datasets of labeled examples for ``fit``, ``produce`` and ``demo``: CSV and JSON-lines
files, river's datasets and seeded generators.

:func:`open_source` reads a spec (:mod:`~stream_perceptron.sources.spec` gives the grammar) and
returns a :class:`Source` (:mod:`~stream_perceptron.sources.base`). The modules: ``files`` (CSV,
JSON lines), ``river_data`` (river's datasets), ``separable`` (a generated separable stream),
``drifting`` (river's SEA and Hyperplane generators), ``labels`` (labels to -1/+1), ``spec_args``
(the generators' ``key=value`` arguments).
"""

from stream_perceptron.sources.base import Example, Source, dense_matrix
from stream_perceptron.sources.classes import no_positive_class
from stream_perceptron.sources.river_data import SUPPORTED_RIVER_DATASETS
from stream_perceptron.sources.separable import separable_params
from stream_perceptron.sources.spec import open_source

__all__ = [
    "SUPPORTED_RIVER_DATASETS",
    "Example",
    "Source",
    "dense_matrix",
    "no_positive_class",
    "open_source",
    "separable_params",
]
