"""Named datasets of labeled examples for ``fit``, ``produce`` and ``demo``: CSV and JSON-lines
files, river's datasets and seeded generators."""

from stream_perceptron.sources.catalog import (
    Source,
    dense_matrix,
    no_positive_class,
    open_source,
    separable_params,
)

__all__ = ["Source", "dense_matrix", "no_positive_class", "open_source", "separable_params"]
