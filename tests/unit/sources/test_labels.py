"""Tests for stream_perceptron.sources.labels: fixed spellings and class names."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_perceptron.errors import SourceError
from stream_perceptron.sources import no_positive_class, open_source

from .support import write


def test_csv_label_column_and_positive_class(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "species,f1,f2\ncat,1,2\ndog,3,4\n cat ,5,6\n")
    src = open_source(str(path), label="species", positive_class="cat")
    assert src.feature_names == ["f1", "f2"]
    assert [y for _, y in src] == [1, -1, 1]
    with pytest.raises(SourceError, match=r"d\.csv:2: .*'cat'.*positive_class"):
        list(open_source(str(path), label="species"))


def test_csv_labels_with_both_class_names_are_strict(tmp_path: Path) -> None:
    # every CSV label is text: with only a positive class, any other is the rest (-1); with a
    # negative class too, a label that is neither is refused, as the worker refuses it
    path = write(tmp_path / "d.csv", "species,f1\ncat,1\ndog,3\n1,5\n")
    assert [y for _, y in open_source(str(path), label="species", positive_class="cat")] == [1, -1, -1]
    strict = open_source(str(path), label="species", positive_class="cat", negative_class="dog")
    with pytest.raises(SourceError, match=r"d\.csv:4: label '1' is neither positive_class 'cat'"
                                          r" nor negative_class 'dog'"):
        list(strict)
    # a negative class alone names the -1 class; the fixed spellings keep their meaning
    path.write_text("species,f1\ndog,3\n1,5\n")
    assert [y for _, y in open_source(str(path), label="species", negative_class="dog")] == [-1, 1]


def test_no_positive_class_in_the_data_is_named() -> None:
    with pytest.raises(SourceError, match=r"^f\.csv: no label is positive_class 'spam' "
                                          r"\(SP_LIMITS__POSITIVE_CLASS\), so all 4 examples"):
        no_positive_class("f.csv", "spam", 4, 0)
    no_positive_class("f.csv", "spam", 4, 1)
    no_positive_class("f.csv", None, 4, 0)
