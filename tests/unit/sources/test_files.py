"""Tests for stream_perceptron.sources.files: CSV and JSON-lines files, plain or gzipped."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron.cli import main
from stream_perceptron.errors import SourceError
from stream_perceptron.sources import Source, dense_matrix, open_source

from .support import write, write_jsonl

# ------------------------------------------------------------------------------------------
# CSV


def test_csv_round_trip(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,y,b\n1.5,1,2\n-3,-1,4e-1\n\n0,0,7\n5,TRUE,6\n8,false,9\n")
    src = open_source(str(path))
    assert isinstance(src, Source)
    assert src.n_features == 2
    assert src.feature_names == ["a", "b"]
    assert src.length is None
    assert list(src) == [
        ([1.5, 2.0], 1),
        ([-3.0, 0.4], -1),
        ([0.0, 7.0], -1),
        ([5.0, 6.0], 1),
        ([8.0, 9.0], -1),
    ]
    X, y = dense_matrix(src)
    assert X.dtype == np.float64 and X.shape == (5, 2)
    assert y.dtype == np.int8 and y.tolist() == [1, -1, -1, 1, -1]


@pytest.mark.parametrize("suffix", [".csv.gz", ".jsonl.gz"])
def test_a_truncated_or_corrupt_gzip_file_is_one_line_naming_it(tmp_path: Path, suffix: str) -> None:
    whole = tmp_path / f"whole{suffix}"
    row = "1,2,1\n" if suffix == ".csv.gz" else '{"x": [1, 2], "y": 1}\n'
    with gzip.open(whole, "wt", encoding="utf-8") as f:
        f.write(("a,b,y\n" if suffix == ".csv.gz" else "") + row * 20_000)
    data = whole.read_bytes()
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(data[: len(data) // 2])  # EOFError from gzip
    bad = tmp_path / f"bad{suffix}"
    bad.write_bytes(data[:40] + bytes(b ^ 0x5A for b in data[40:80]) + data[80:])  # zlib.error
    for path in (cut, bad):
        with pytest.raises(SourceError) as info:
            list(open_source(str(path)))
        message = str(info.value)
        assert message.startswith(str(path)) and "\n" not in message
        assert "unreadable" in message or "cannot read CSV header" in message


def test_csv_gzip_and_explicit_scheme(tmp_path: Path) -> None:
    gz = tmp_path / "d.csv.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write("x1,x2,y\n1,2,1\n3,4,-1\n")
    assert list(open_source(str(gz))) == [([1.0, 2.0], 1), ([3.0, 4.0], -1)]
    other = write(tmp_path / "d.txt", "x1,y\n1,1\n")
    assert list(open_source(f"csv:{other}")) == [([1.0], 1)]


@pytest.mark.parametrize(
    ("body", "line", "reason"),
    [
        ("1,2,1\n3,abc,1\n", 3, "'b' is not a number"),
        ("1,2,1\n\n3,4\n", 4, "expected 3 fields, got 2"),
        ("1,2,1\n3,4,maybe\n", 3, "label 'maybe'"),
        ("1,2,1\n3,nan,1\n", 3, "not finite"),
        ("1,2,\n", 2, "empty label"),
    ],
)
def test_csv_bad_row_names_line(tmp_path: Path, body: str, line: int, reason: str) -> None:
    path = write(tmp_path / "bad.csv", "a,b,y\n" + body)
    src = open_source(str(path))  # the header is fine: the error comes while iterating
    with pytest.raises(SourceError) as info:
        list(src)
    message = str(info.value)
    assert f"bad.csv:{line}:" in message
    assert reason in message
    assert "\n" not in message


def test_csv_header_problems(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no label column 'y'"):
        open_source(str(write(tmp_path / "a.csv", "a,b\n1,2\n")))
    with pytest.raises(SourceError, match="empty file"):
        open_source(str(write(tmp_path / "b.csv", "")))
    with pytest.raises(SourceError, match="duplicate"):
        open_source(str(write(tmp_path / "c.csv", "a,a,y\n1,2,1\n")))
    with pytest.raises(SourceError, match="no feature columns"):
        open_source(str(write(tmp_path / "d.csv", "y\n1\n")))


def test_a_missing_label_says_the_option_that_names_it(tmp_path: Path) -> None:
    csv = write(tmp_path / "a.csv", "a,label\n1,1\n")
    with pytest.raises(SourceError) as info:
        open_source(str(csv))
    assert str(info.value) == (
        f"{csv}:1: no label column 'y' (columns: a, label);"
        " name it with the --label option of fit or produce"
    )
    jsonl = write_jsonl(tmp_path / "a.jsonl", [{"x": [1], "label": 1}])
    with pytest.raises(SourceError) as info:
        list(open_source(str(jsonl)))
    assert str(info.value) == (
        f"{jsonl}:1: no label 'y' (an unlabeled record cannot be used by fit or produce,"
        " whose --label option names the label key)"
    )


def test_fit_with_the_label_option_the_message_names_reads_the_file(tmp_path: Path) -> None:
    csv = write(tmp_path / "a.csv", "a,label\n1,1\n-1,-1\n")
    refused = CliRunner().invoke(main, ["fit", str(csv), "--checkpoint-dir", str(tmp_path / "no")])
    assert refused.exit_code == 1 and "name it with the --label option" in refused.output
    done = CliRunner().invoke(
        main, ["fit", str(csv), "--label", "label", "--checkpoint-dir", str(tmp_path / "ck")]
    )
    assert done.exit_code == 0, done.output


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(
                st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=3, max_size=3
            ),
            st.sampled_from([-1, 1]),
        ),
        max_size=20,
    )
)
def test_csv_round_trip_property(rows: list[tuple[list[float], int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.csv"
        lines = ["f0,f1,f2,y"] + [",".join(map(repr, x)) + f",{y}" for x, y in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert list(open_source(str(path))) == [(x, y) for x, y in rows]


# ------------------------------------------------------------------------------------------
# JSON lines


def test_jsonl_dense_round_trip(tmp_path: Path) -> None:
    records: list[object] = [
        {"x": [1, 2.5], "y": 1, "id": "a"},
        {"x": [0, -1], "y": -1},
        {"x": [3, 4], "y": 0},
        {"x": [5, 6], "y": True},
        {"x": [7, 8], "y": False},
        {"x": [9, 10], "y": "true"},
    ]
    path = write_jsonl(tmp_path / "d.jsonl", records)
    with path.open("ab") as f:
        f.write(b"\n   \n")  # trailing blank lines are skipped
    src = open_source(str(path))
    assert src.n_features == 2 and src.feature_names is None and src.length is None
    assert list(src) == [
        ([1.0, 2.5], 1),
        ([0.0, -1.0], -1),
        ([3.0, 4.0], -1),
        ([5.0, 6.0], 1),
        ([7.0, 8.0], -1),
        ([9.0, 10.0], 1),
    ]
    X, y = dense_matrix(src)
    assert X.shape == (6, 2) and y.tolist() == [1, -1, -1, 1, -1, 1]


def test_jsonl_sparse_and_positive_class(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [{"x": {"a": 1, "b": 2}, "y": "spam"}, {"x": {"c": 0.5}, "y": "ham"}],
    )
    src = open_source(str(path), positive_class="spam")
    assert src.n_features is None
    assert list(src) == [({"a": 1.0, "b": 2.0}, 1), ({"c": 0.5}, -1)]
    with pytest.raises(SourceError, match="sparse"):
        dense_matrix(src)
    custom = write_jsonl(tmp_path / "c.jsonl", [{"x": [1], "label": 1}])
    assert list(open_source(str(custom), label="label")) == [([1.0], 1)]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"x": [1, 2]}, "no label 'y'"),
        ({"x": [1, 2, 3], "y": 1}, "has 3 values, earlier lines had 2"),
        ({"x": [1, "a"], "y": 1}, "not a number"),
        ({"x": [1, True], "y": 1}, "not a number"),
        ({"x": [1, 2], "y": 2}, "label 2"),
        ({"x": {"a": 1}, "y": 1}, "object but earlier lines had lists"),
        ({"y": 1}, "no 'x'"),
        ([1, 2], "record must be a JSON object, got array"),
    ],
)
def test_jsonl_bad_line_names_line(tmp_path: Path, bad: object, reason: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [{"x": [1, 2], "y": 1}, {"x": [3, 4], "y": -1}, bad])
    src = open_source(str(path))
    with pytest.raises(SourceError) as info:
        list(src)
    assert "bad.jsonl:3:" in str(info.value)
    assert reason in str(info.value)


def test_jsonl_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"x": [1], "y": 1}\n{"x": [2], "y": \n')
    # the record's words as the worker's dead letters give them; its positions within the line
    with pytest.raises(SourceError, match=r"j\.jsonl:2: not valid JSON: unexpected end of data:"
                                          r" line 1 column 17 \(char 16\)$"):
        list(open_source(str(path)))
    first_bad = tmp_path / "k.jsonl"
    first_bad.write_bytes(b"\nnot json\n")
    with pytest.raises(SourceError, match=r"k\.jsonl:2: not valid JSON"):
        open_source(str(first_bad))
