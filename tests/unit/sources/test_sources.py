"""Tests for stream_perceptron.sources.catalog: files, river datasets, generated streams, specs."""

from __future__ import annotations

import gzip
import itertools
import math
import tempfile
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron.errors import SourceError
from stream_perceptron.sources.catalog import (
    SUPPORTED_RIVER_DATASETS,
    Source,
    dense_matrix,
    no_positive_class,
    open_source,
    separable_params,
)

# ------------------------------------------------------------------------------------------
# CSV


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


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


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


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
        ([1, 2], "not a JSON object"),
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
    with pytest.raises(SourceError, match=r"j\.jsonl:2: invalid JSON"):
        list(open_source(str(path)))
    first_bad = tmp_path / "k.jsonl"
    first_bad.write_bytes(b"\nnot json\n")
    with pytest.raises(SourceError, match=r"k\.jsonl:2: invalid JSON"):
        open_source(str(first_bad))


# ------------------------------------------------------------------------------------------
# river datasets


def test_river_phishing() -> None:
    src = open_source("river:Phishing")
    data = list(src)
    assert src.length == 1250 and len(data) == 1250
    assert src.n_features == 9 and src.feature_names is not None
    assert src.feature_names[:2] == ["empty_server_form_handler", "popup_window"]
    assert {y for _, y in data} == {-1, 1}
    assert sum(y == 1 for _, y in data) == 548  # is_phishing == True
    assert all(isinstance(x, list) and len(x) == 9 for x, _ in data)
    assert all(isinstance(v, float) for v in data[0][0])
    X, y = dense_matrix(src)
    assert X.shape == (1250, 9) and y.dtype == np.int8


def test_river_bananas_and_shuttle() -> None:
    bananas = open_source("river:bananas")  # names are case-insensitive
    assert bananas.length == 5300 and bananas.feature_names == ["1", "2"]
    _, y = dense_matrix(bananas)
    assert y.shape == (5300,) and set(y.tolist()) == {-1, 1}
    assert int((y == 1).sum()) == 2376

    shuttle = open_source("river:Shuttle")
    assert shuttle.length == 49097 and shuttle.n_features == 9
    assert shuttle.feature_names == [f"f{i}" for i in range(1, 10)]
    _, y = dense_matrix(shuttle)
    assert y.shape == (49097,) and int((y == 1).sum()) == 3511  # anomalies are +1


def test_river_limit_and_reiteration() -> None:
    src = open_source("river:Shuttle", limit=10)
    assert src.length == 10
    first = list(src)
    assert len(first) == 10 and list(src) == first
    assert first == list(itertools.islice(open_source("river:Shuttle"), 10))


def test_river_multiclass_needs_positive_class() -> None:
    with pytest.raises(SourceError, match="not binary"):
        open_source("river:ImageSegments")
    src = open_source("river:ImageSegments", positive_class="sky", limit=300)
    assert {y for _, y in src} == {-1, 1}


@pytest.mark.parametrize("spec", ["river:Nope", "river:", "river:TrumpApproval", "river:Elec2"])
def test_river_bad_names(spec: str) -> None:
    with pytest.raises(SourceError) as info:
        open_source(spec)
    assert all(name in str(info.value) for name in SUPPORTED_RIVER_DATASETS)


# ------------------------------------------------------------------------------------------
# generated separable stream


def test_separable_margin_and_radius() -> None:
    spec = "separable:d=8,gamma=0.15,n=5000,seed=7,radius=2.5"
    src = open_source(spec)
    assert src.n_features == 8 and src.length == 5000
    X, y = dense_matrix(src)
    assert X.shape == (5000, 8) and y.dtype == np.int8
    p = separable_params(spec)
    u = p["u"]
    assert math.isclose(float(np.linalg.norm(u)), 1.0)
    dots = X @ u
    assert np.all(np.abs(dots) >= 0.15 - 1e-12)
    assert np.all(np.sign(dots) == y)  # separable through the origin by u
    norms = np.linalg.norm(X, axis=1)
    assert np.all(norms <= 2.5 + 1e-12)
    assert p["R"] == pytest.approx(norms.max()) and p["R"] <= 2.5 + 1e-12
    assert p["margin"] == pytest.approx(np.abs(dots).min()) and p["margin"] >= 0.15 - 1e-12
    assert p["gamma"] == 0.15 and p["radius"] == 2.5 and p["n_flipped"] == 0
    assert p["mistake_bound"] == pytest.approx((p["R"] / 0.15) ** 2)
    # both labels occur and the points fill the ball rather than hugging the margin
    assert 0.4 < (y == 1).mean() < 0.6
    assert norms.max() > 2.3 and np.abs(dots).max() > 1.0


def test_separable_perceptron_obeys_novikoff_bound() -> None:
    spec = "separable:d=5,gamma=0.2,n=1000,seed=3"
    X, y = dense_matrix(open_source(spec))
    bound = separable_params(spec)["mistake_bound"]
    w = np.zeros(X.shape[1])
    mistakes = 0
    for _ in range(100):  # cycle until a clean pass
        clean = True
        for xi, yi in zip(X, y, strict=True):
            if yi * (w @ xi) <= 0:
                w += yi * xi
                mistakes += 1
                clean = False
        if clean:
            break
    assert clean
    assert 0 < mistakes <= bound


def test_separable_deterministic_by_seed() -> None:
    a = dense_matrix(open_source("separable:d=4,n=500,seed=11"))
    b = dense_matrix(open_source("separable:d=4,n=500,seed=11"))
    c = dense_matrix(open_source("separable:d=4,n=500,seed=12"))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    src = open_source("separable:d=4,n=500,seed=11")
    assert list(src) == list(src)  # re-iterable
    assert np.array_equal(np.array([x for x, _ in src]), a[0])  # iteration == dense_matrix


def test_separable_noise_flips_exact_fraction() -> None:
    X0, y0 = dense_matrix(open_source("separable:d=6,n=2000,seed=5"))
    X1, y1 = dense_matrix(open_source("separable:d=6,n=2000,seed=5,noise=0.1"))
    assert np.array_equal(X0, X1)  # noise changes labels only
    assert int((y0 != y1).sum()) == 200
    assert separable_params("separable:d=6,n=2000,seed=5,noise=0.1")["n_flipped"] == 200
    u = separable_params("separable:d=6,seed=5", limit=0)["u"]  # u depends on d and seed only
    assert np.array_equal(np.where(X1 @ u >= 0, 1, -1) != y1, y0 != y1)


def test_separable_limit_is_prefix() -> None:
    full = list(open_source("separable:d=3,n=20000,seed=1,noise=0.2"))
    limited = open_source("separable:d=3,n=20000,seed=1,noise=0.2", limit=9000)
    assert limited.length == 9000
    assert list(limited) == full[:9000]
    assert list(open_source("separable:n=10", limit=0)) == []
    assert open_source("separable:n=10", limit=50).length == 10
    assert separable_params("separable:d=3,n=20000,seed=1", limit=100)["n"] == 100


def test_separable_defaults_and_high_dimension() -> None:
    src = open_source("separable", limit=100)
    assert src.n_features == 20 and src.length == 100
    X, _ = dense_matrix(open_source("separable:d=2000,gamma=0.02,n=300,seed=2"))
    assert X.shape == (300, 2000)
    with pytest.raises(SourceError, match="too large"):
        open_source("separable:d=500,gamma=0.9")


def test_a_noiseless_separable_stream_too_long_to_draw_says_n_is_the_problem() -> None:
    # most of the ball qualifies at gamma=0.05, d=20: the draws, not gamma, are past the bound
    with pytest.raises(SourceError, match=r"^separable: n=1000000000 would take about 1\.2\d*e\+09 draws"
                                          r" .* over the 500,000,000 allowed: lower n"):
        open_source("separable:d=20,gamma=0.05,n=1000000000")
    assert open_source("separable:d=20,gamma=0.05,n=1000000000", limit=5).length == 5  # 5 drawn


# ------------------------------------------------------------------------------------------
# river drifting generators


def test_sea_matches_river() -> None:
    from river.datasets import synth

    src = open_source("sea:n=300,seed=4,variant=2,noise=0.1")
    assert src.n_features == 3 and src.length == 300 and src.feature_names == ["0", "1", "2"]
    data = list(src)
    expected = [
        ([x[0], x[1], x[2]], 1 if y else -1)
        for x, y in itertools.islice(synth.SEA(variant=2, noise=0.1, seed=4), 300)
    ]
    assert data == expected
    assert list(src) == data
    assert {y for _, y in data} == {-1, 1}


def test_hyperplane_matches_river() -> None:
    from river.datasets import synth

    src = open_source("hyperplane:d=4,n=400,seed=9,mag_change=0.01,noise=0.0")
    assert src.n_features == 4 and src.length == 400
    data = list(src)
    gen = synth.Hyperplane(seed=9, n_features=4, mag_change=0.01, noise_percentage=0.0)
    expected = [([x[i] for i in range(4)], 1 if y else -1) for x, y in itertools.islice(gen, 400)]
    assert data == expected
    assert list(src) == data
    assert len(list(open_source("hyperplane:n=1000", limit=7))) == 7


# ------------------------------------------------------------------------------------------
# limits and bad specs


def test_limit_on_files(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,y\n" + "".join(f"{i},1\n" for i in range(10)))
    src = open_source(str(path), limit=3)
    assert [x for x, _ in src] == [[0.0], [1.0], [2.0]]
    assert list(src) == list(src)
    with pytest.raises(SourceError, match="limit"):
        open_source(str(path), limit=-1)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty"),
        ("ftp:whatever", "unknown source scheme 'ftp'"),
        ("something", "unknown source spec"),
        ("missing.csv", "no such file"),
        ("jsonl:missing.txt", "no such file"),
        ("csv:", "missing file path"),
        ("separable:d=3,x=1", "unknown key 'x'"),
        ("separable:d", "bad key=value 'd'"),
        ("separable:d=abc", "not an integer"),
        ("separable:d=2.5", "not an integer"),
        ("separable:gamma=zz", "not a number"),
        ("separable:d=3,d=4", "twice"),
        ("separable:d=0", r"d must be in \[1, 100000\], got 0"),
        ("separable:d=100001,n=1", r"d must be in \[1, 100000\]"),
        ("hyperplane:d=100001", r"d must be in \[1, 100000\]"),
        ("separable:d=2,n=10000001,noise=0.5", "with noise, n must be at most 10000000, got 10000001"),
        ("separable:gamma=1.0", "gamma must be in"),
        ("separable:noise=1.5", "noise must be in"),
        ("separable:radius=0", "radius must be > 0"),
        ("sea:variant=7", "variant"),
        ("hyperplane:d=2,n_drift_features=3", "n_drift_features"),
        ("hyperplane:sigma=2", "sigma"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(SourceError, match=message) as info:
        open_source(spec)
    assert "\n" not in str(info.value)


def test_numeric_forms_in_specs() -> None:
    assert open_source("separable:n=1e3,d=2").length == 1000
    assert open_source("SEA: n = 1_000 , seed=1").length == 1000
    with pytest.raises(SourceError, match="separable:"):
        separable_params("sea:n=10")
