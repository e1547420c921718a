"""The compiled part against its Python twins, byte for byte: the dense reader on the decoders'
fuzzed inputs and on random dense batches, the prediction encoder on random batches, ADWIN's
loop and the mistake rate's EWMA on random streams, the dense learning pass on random batches.
Where the extension is not installed these skip, except under CI=true or SP_REQUIRE_NATIVE=1
(``.ci/run``, whose ``make install`` builds it)."""

from __future__ import annotations

import io
import json
import math
import os
import struct

import fastavro
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron.codec import avro, native
from stream_perceptron.codec.inputs import BatchDecoder
from stream_perceptron.codec.limits import Limits
from stream_perceptron.codec.outputs import encode_predictions
from stream_perceptron.errors import DecodeError
from stream_perceptron.model import dense_pass, drift, stats
from stream_perceptron.model.stats import RunningStats
from tests.unit.codec.test_dense_json import LIMITS as DENSE_LIMITS
from tests.unit.codec.test_dense_json import dense_batches
from tests.unit.codec.test_records import LIMITS, features, ids, json_values, labels

if not native.available():
    if os.environ.get("CI") or os.environ.get("SP_REQUIRE_NATIVE") == "1":
        raise RuntimeError("the compiled part is not installed (make install builds it where cargo is found)")
    pytest.skip("the compiled part is not installed", allow_module_level=True)


def decoded(values, limits, *, compiled: bool):
    """What BatchDecoder makes of ``values``, with or without the compiled reader: each column,
    floats as their bits."""
    decoder = BatchDecoder(limits)
    if not compiled:
        decoder._compiled = None
    d = decoder.decode_many(values)
    xs = [np.asarray(x, dtype=np.float64).tobytes() for x in d.xs] if isinstance(d.xs, np.ndarray) else [
        np.asarray(list(x.values()) if isinstance(x, dict) else x, dtype=np.float64).tobytes()
        if not isinstance(x, dict) else (list(x), np.asarray(list(x.values()), dtype=np.float64).tobytes())
        for x in d.xs]
    return (xs, d.ys, [(type(i), i) for i in d.ids], d.rows, d.rejected, d.labels)


def same_both_ways(values, limits):
    compiled, python = decoded(values, limits, compiled=True), decoded(values, limits, compiled=False)
    assert compiled == python, values


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries({}, optional={"x": features, "y": labels | json_values, "id": ids,
                                            "z": json_values}),
        max_size=6,
    ),
    st.sampled_from([LIMITS, Limits(), Limits(max_features=1, max_abs_value=0.5, negative_class="ham")]),
)
def test_the_compiled_reader_decodes_the_fuzzed_records_as_the_python_way(objs, limits):
    same_both_ways([json.dumps(o).encode() for o in objs], limits)


@settings(max_examples=400, deadline=None)
@given(dense_batches())
def test_the_compiled_reader_reads_random_dense_batches_bit_for_bit(values):
    same_both_ways(values, DENSE_LIMITS)


@pytest.mark.parametrize("value", [
    b'{"x": [1, 2]}', b' {"x":[1.5e3,-0.25], "y":true, "id":"\xc3\xa9t\xc3\xa9"} ', b'{"x": [-0]}',
    b'{"x": [18446744073709551615, -9223372036854775808]}', b'{"x": [18446744073709551616]}',
    b'{"x": [1], "id": 9223372036854775807}', b'{"x": [1], "id": 9223372036854775808}',
    b'{"x": [1], "id": 1e400}', b'{"x": [1], "id": "a\\"b"}', b'{"x": [1], "y": "spam"}',
    b'{"x": [1], "y": 1e0}', b'{"x": [1e-400, 2.5E+3]}', b'{"x": [01]}', b'{"x": [1.]}', b'{"x": [.5]}',
    # the one-pass number reader and where it hands over: past 16 digits or 2^53, past 10^±22,
    # leading and trailing zeros, -0.0, exponents with and without a point, a number run into text
    b'{"x": [0.1, -0.0, 0.05, 10.50, 1.5e3, 0.0000000000000000000001, 0.00000000000000000000001]}',
    b'{"x": [9.007199254740993, 9.999999999999999, 0.9999999999999999, 0.9139962084340797]}',
    b'{"x": [994.8187476389095]}',
    b'{"x": [0.12345678901234567, 0.00000000000000000000000000001234]}', b'{"x": [1234567890123456.7]}',
    b'{"x": [1e5, 1E-5, 1.25e-3, 9e22, 9e23, 1e-22, 1.5e-23, -0e0, 12e+2]}', b'{"x": [1.5e]}',
    # the plain decimal's bounds: m at and past 2^53, 18 and 19 digits, scales 22 and 23, a
    # point or an exponent after its digits
    b'{"x": [900719925474099.2, 900719925474099.3, -900719925474099.2, 12345678901234567.8]}',
    b'{"x": [123456789012345678.9, 1234567890123456789.5, 0.0000000000000000000015, -0.0000]}',
    b'{"x": [0.1234567890123456789012, 0.12345678901234567890123, 0.5e1, 0.5E-1, 7.25e+0]}',
    b'{"x": [00.5]}', b'{"x": [-.5]}', b'{"x": [1.5.3]}', b'{"x": [1.5x]}', b'{"x": [-]}', b'{"x": [2.e3]}',
    b'{"x": [1], "id": "\x01"}', b'{"x": [1], "id": "\xff"}', b'{"x": [1]}x', b'{"x": [1],}',
])
def test_the_compiled_reader_at_the_edges(value):
    for limits in (LIMITS, Limits(positive_class="spam")):
        same_both_ways([value], limits)
        same_both_ways([value, b'{"x": [3]}', value], limits)


def test_the_compiled_reader_takes_every_number_shape_it_reads_exactly_itself():
    # declining is always correct (the Python way reads the batch), so this holds what it reads:
    # exponents after a point, past 16 digits, past 2^53 and the scales past 10^-22
    value = (b'{"x": [0.5e1, 7.25E+0, -0.5e-1, 1234.5678901234567, 0.9007199254740993,'
             b' 0.00000000000000000000001, 3, -0.0], "y": 1, "id": 7}')
    X, ys, ids = native.reader(Limits()).read([value, value])
    assert X.tolist() == [[5.0, 7.25, -0.05, 1234.5678901234567, 0.9007199254740993, 1e-23, 3.0, -0.0]] * 2
    assert math.copysign(1.0, X[0, -1]) == -1.0 and ys == [1, 1] and ids == [7, 7]
    same_both_ways([value], Limits())


def test_the_compiled_reader_leaves_a_null_or_overlong_record_to_the_python_way():
    long = b'{"x": [' + b", ".join([b"1.5"] * 400) + b"]}"  # past LIMITS' max_record_bytes
    assert len(long) > LIMITS.max_record_bytes
    for values in ([b'{"x": [1.5]}', None, b'{"x": [2.5]}'], [b'{"x": [1.5]}', long], [long]):
        assert native.reader(LIMITS).read(values) is None
        same_both_ways(values, LIMITS)
    d = BatchDecoder(LIMITS).decode_many([b'{"x": [1.5]}', long, None])
    assert sorted(d.rejected) == [1, 2] and "bytes" in d.rejected[1], d.rejected


floats = st.floats() | st.sampled_from([0.0, -0.0, 5e-324, 1e-5, 9.999999999999999e-06, 1e16, 1e15,
                                        9999999999999998.0, 1.7976931348623157e308, math.nan, math.inf])
texts = st.text(max_size=6) | st.sampled_from(["\x00\x1f\x7f\"\\/\u2028", "é", "\U0001f600"])
scalar_ids = (st.none() | st.integers(-(2**63), 2**63 - 1) | st.integers(2**63, 2**64 - 1) | floats | texts)


@st.composite
def prediction_batches(draw):
    n = draw(st.integers(0, 6))
    rows = st.lists
    labels_ = draw(rows(st.sampled_from([-1, 0, 1]), min_size=n, max_size=n))
    return dict(
        topic=draw(st.sampled_from(["in", "t\u00e9\"\\", "x" * 249])),
        partition=draw(st.integers(0, 2**31 - 1)),
        offsets=draw(rows(st.integers(0, 2**63 - 1), min_size=n, max_size=n)),
        keys=draw(rows(st.none() | st.binary(max_size=6) | st.sampled_from([b"\xe2\x82A", b"\xed\xa0\x80"]),
                       min_size=n, max_size=n)),
        ids=draw(rows(scalar_ids, min_size=n, max_size=n)),
        predictions=draw(rows(st.sampled_from([-1, 1]), min_size=n, max_size=n)),
        scores=draw(rows(floats, min_size=n, max_size=n)), labels=labels_,
        mistakes=draw(rows(st.booleans(), min_size=n, max_size=n)),
        margins=draw(rows(floats, min_size=n, max_size=n)),
        updates=draw(rows(st.integers(0, 2**63 - 1), min_size=n, max_size=n)),
        classes=draw(st.sampled_from([None, ("ham", "spam"), (None, "yes"), ("n\u00e9\n", None)])),
    )


def python_way(batch):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(native, "_native", None)
        return encode_predictions(**batch)


@settings(max_examples=500, deadline=None)
@given(prediction_batches())
def test_the_compiled_encoder_writes_what_msgspec_writes(batch):
    want = python_way(batch)
    assert native.encode_predictions(**batch) in (want, None)
    assert encode_predictions(**batch) == want


def test_the_compiled_reader_reads_the_benchmark_records():
    from bench.worker.inputs import dense_records

    values, _ = dense_records(2000, 20, seed=1)
    X, ys, ids = native.reader(Limits()).read(values)
    assert X.shape == (2000, 20) and ids == list(range(2000)) and set(ys) == {-1, 1}
    same_both_ways(values, Limits())


def test_the_compiled_encoder_takes_numpy_columns_as_the_learner_gives_them():
    rng = np.random.default_rng(3)
    n = 500
    batch = dict(
        topic="in", partition=3, offsets=np.arange(10, 10 + n), keys=[str(i).encode() for i in range(n)],
        ids=list(range(n)), predictions=np.where(rng.random(n) > 0.5, 1, -1).astype(np.int8),
        scores=rng.normal(size=n) * 10.0 ** rng.integers(-8, 18, size=n),
        labels=rng.choice([-1, 0, 1], size=n).astype(np.int8), mistakes=rng.random(n) > 0.9,
        margins=np.where(rng.random(n) > 0.1, rng.normal(size=n), np.nan),
        updates=np.cumsum(rng.random(n) > 0.9) + 7,
    )
    compiled = native.encode_predictions(**batch, classes=None)
    assert compiled is not None and compiled == python_way({**batch, "classes": None})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0]) | st.floats(0, 1), max_size=3000),
       st.integers(1, 700), st.integers(0, 3))
def test_the_compiled_adwin_is_the_python_loop_to_the_bit(values, cut, clock_shift):
    params = dict(clock=[32, 1, 5, 64][clock_shift])
    compiled, python = drift.Adwin(**params), drift.Adwin(**params)
    out_c, out_p = [], []
    for start in range(0, len(values), cut):
        part = values[start:start + cut]
        out_c.append(compiled.update_many(part))
        with pytest.MonkeyPatch.context() as m:
            m.setattr(drift, "_compiled_update", None)
            out_p.append(python.update_many(part))
    assert out_c == out_p
    assert json.dumps(compiled.get_state()) == json.dumps(python.get_state())


def test_the_compiled_adwin_raises_the_alarms_of_a_long_stream_as_python_does(monkeypatch):
    rng = np.random.default_rng(11)
    flags = (rng.random(200_000) < np.repeat([0.01, 0.2, 0.05, 0.3], 50_000)).astype(float).tolist()
    compiled, python = drift.Adwin(), drift.Adwin()
    found = compiled.update_many(flags)
    monkeypatch.setattr(drift, "_compiled_update", None)
    assert found == python.update_many(flags) and len(found) >= 3
    assert json.dumps(compiled.get_state()) == json.dumps(python.get_state())


# ------------------------------------------------------------------ the dense pass


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 400), d=st.integers(1, 40),
       ties=st.booleans(), fit_intercept=st.booleans(), noise=st.sampled_from([0.0, 0.05, 0.5]),
       unlabeled=st.sampled_from([0.0, 0.3, 1.0]), b=st.sampled_from([0.0, -0.0, 1.5]),
       odd=st.sampled_from([None, -0.0, 1e300, math.inf, -math.inf, math.nan]))
def test_the_compiled_dense_pass_is_the_python_pass_byte_for_byte(
    seed, n, d, ties, fit_intercept, noise, unlabeled, b, odd
):
    rng = np.random.default_rng(seed)
    if ties:  # many scores exactly 0: the boundary, a mistake
        X = rng.integers(-2, 3, size=(n, d)).astype(np.float64)
    else:
        X = rng.standard_normal((n, d)) * 10.0 ** rng.integers(-3, 4, size=(n, 1))
    if odd is not None:
        X[rng.integers(n), rng.integers(d)] = odd
    y = np.where(X @ rng.standard_normal(d) + 0.5 > 0, 1, -1).astype(np.int8)
    y[rng.random(n) < noise] *= -1
    y[rng.random(n) < unlabeled] = 0
    w0 = rng.integers(-1, 2, size=d).astype(np.float64)
    sq = float((w0 * w0).sum())
    norms = (math.sqrt(sq), math.sqrt(sq + b * b))
    outs, thetas = [], []
    with np.errstate(all="ignore"):
        for compiled in (None, False, True):  # the compiled part; numpy's blocks; numba's loop
            w = w0.copy()
            outs.append(dense_pass.learn_dense(X, y, w, b, norms, fit_intercept, 16, compiled=compiled))
            thetas.append(w.tobytes())
    native_out, *python_outs = outs
    for out in python_outs:
        for field in ("scores", "mistakes", "theta_norm", "theta_norm_aug"):
            assert getattr(native_out, field).tobytes() == getattr(out, field).tobytes(), field
        assert struct.pack("<d", native_out.intercept) == struct.pack("<d", out.intercept)
        assert native_out.n_mistakes == out.n_mistakes
    assert thetas[0] == thetas[1] == thetas[2]


def test_the_compiled_dense_pass_takes_row_slices_and_refuses_mismatched_shapes():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((50, 6))
    y = np.where(X[:, 0] > 0, 1, -1).astype(np.int8)
    w = np.zeros(6)
    out = dense_pass.learn_dense(X[10:40], y[10:40], w, 0.0, (0.0, 0.0), True, 16)
    assert len(out.scores) == 30 and out.n_mistakes >= 1 and w.any()
    with pytest.raises(TypeError, match="C-ordered"):
        dense_pass._compiled_pass(X, y[:49], np.zeros(6), 0.0, 0.0, 0.0, True, np.empty(49),
                                  np.empty(49, np.uint8), np.empty(49), np.empty(49))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.booleans() | st.just(False), min_size=1, max_size=2000), st.integers(1, 700),
       st.sampled_from([0.01, 0.5, 0.3, 1e-9, 1.0]))
def test_the_compiled_ewma_is_the_python_runs_to_the_bit(flags, cut, alpha):
    compiled, python = RunningStats(window=50, ewma_alpha=alpha), RunningStats(window=50, ewma_alpha=alpha)
    for start in range(0, len(flags), cut):
        part = np.array(flags[start:start + cut])
        compiled._update_ewma(part)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(stats, "_compiled_ewma", None)
            python._update_ewma(part)
        assert struct.pack("<d", compiled.ewma) == struct.pack("<d", python.ewma)


# ------------------------------------------------------------------ dict rows' scores

_CLEAN = st.floats(-1e6, 1e6, allow_nan=False) | st.integers(-1000, 1000)
_ODD = (st.booleans() | st.integers(-(1 << 60), 1 << 60) | st.floats(allow_nan=True, allow_infinity=True)
        | st.just(1e308))
FEATURE_VALUES = st.one_of(_CLEAN, _CLEAN, _CLEAN, _CLEAN, _CLEAN, _CLEAN, _ODD)  # mostly rows it takes


@st.composite
def dict_streams(draw):
    """Labeled dict rows of 0 to 40 features (names from a pool of 48, so rows past 16 and 128
    products and names not learned yet both come), with floats, bools, integers past 53 bits
    and non-finite values (which the twin then refuses)."""
    names = [f"f{i}" for i in range(48)]
    rows = []
    for _ in range(draw(st.integers(1, 30))):
        keys = draw(st.lists(st.sampled_from(names), max_size=40, unique=True))
        rows.append(({k: draw(FEATURE_VALUES) for k in keys}, draw(st.booleans())))
    return rows


def _answers(model, rows):
    """Each row's score_one, predict_one and predict_proba_one (floats as their bits, errors by
    type and message), each answered before the row is learned."""
    out = []
    for x, y in rows:
        try:
            out.append((model.score_one(x).hex(), model.predict_one(x),
                        {k: float(v).hex() for k, v in model.predict_proba_one(x).items()}))
            model.learn_one(x, y)
        except Exception as exc:  # noqa: BLE001 - the same refusal both ways is part of the answer
            out.append((type(exc).__name__, str(exc)))
    return out


@settings(max_examples=300, deadline=None)
@given(dict_streams(), st.sampled_from([{}, {"average": True}, {"hash_bits": 6}]))
def test_the_compiled_dict_score_answers_as_rowwise_loops_to_the_bit(rows, params):
    from stream_perceptron import Perceptron
    from stream_perceptron.model import perceptron

    compiled = _answers(Perceptron(**params), rows)
    saved = perceptron._compiled_score, perceptron._compiled_pair, perceptron._compiled_proba
    perceptron._compiled_score = perceptron._compiled_pair = perceptron._compiled_proba = None
    try:
        python = _answers(Perceptron(**params), rows)
    finally:
        perceptron._compiled_score, perceptron._compiled_pair, perceptron._compiled_proba = saved
    assert compiled == python


def test_the_compiled_dict_score_declines_what_it_cannot_take_exactly():
    import stream_perceptron_native as compiled

    w = {"a": 0.5, "b": -2.0}
    assert compiled.score_named(w, {"a": 1.0, "b": 3}, 0.25) == (0.5 + (-0.0 + -6.0)) + 0.25
    assert compiled.score_named(w, {"a": True}, 0.0) == 0.5
    assert compiled.score_named(w, {}, 1.5) == 1.5
    assert compiled.score_named(w, {"c": 1.0}, 0.0) is None  # a name not in θ
    assert compiled.score_named(w, {"a": 1 << 54}, 0.0) is None  # not exact as a float
    assert compiled.score_named(w, {"a": "1"}, 0.0) is None  # not a number
    assert compiled.score_named(w, {"a": np.float64(1.0)}, 0.0) is None  # a numpy scalar
    assert compiled.score_named(w, {"a": math.inf}, 0.0) is None  # not finite
    assert compiled.score_pair(w, {"a": 1.0, "b": 1.0}, {"a": 2.0, "b": 1.0}, 0.0, 1.0) == (-1.0, 4.0)
    assert compiled.proba_named(w, {"c": 1.0}, 0.0, False, True) is None
    for s in (-800.0, -30.0, -1e-300, 0.0, 0.3, 40.0, 800.0):  # the logistic function, both branches
        p = 1.0 / (1.0 + math.exp(-s)) if s >= 0 else math.exp(s) / (1.0 + math.exp(s))
        assert compiled.proba_named({"a": 1.0}, {"a": s}, 0.0, "no", "yes") == {"no": 1.0 - p, "yes": p}


@pytest.mark.parametrize("width", [1, 5, 8, 9, 16, 17, 40, 129, 300])
def test_the_compiled_dict_score_sums_in_rowwise_order(width):
    import stream_perceptron_native as compiled

    from stream_perceptron.model.rowwise import dot_named, dot_pair

    rng = np.random.default_rng(width)
    scale = 10.0 ** rng.integers(-8, 8, size=(60, width))  # magnitudes far apart: the order shows
    w = {f"f{i}": float(v) for i, v in enumerate(rng.standard_normal(width) * 1e3)}
    u = {k: -3.0 * v for k, v in w.items()}
    for row in (rng.standard_normal((60, width)) * scale).tolist():
        x = dict(zip(w, row, strict=True))
        assert compiled.score_named(w, x, 0.5) == dot_named(w, x) + 0.5
        a, c = dot_pair(w, u, x)
        assert compiled.score_pair(w, u, x, 0.5, -2.0) == (a + 0.5, c + -2.0)


# -- the Avro reader -------------------------------------------------------------------------------

AVRO_PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]


def _named(schema, counter=None):
    """``schema`` with a name of its own on each record, enum and fixed (A1, A2, …)."""
    counter = counter if counter is not None else [0]
    if isinstance(schema, list):
        return [_named(b, counter) for b in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if out["type"] in ("record", "enum", "fixed"):
        counter[0] += 1
        out["name"] = f"A{counter[0]}"
    if out["type"] == "record":
        out["fields"] = [{"name": f["name"], "type": _named(f["type"], counter)} for f in out["fields"]]
    elif out["type"] == "array":
        out["items"] = _named(out["items"], counter)
    elif out["type"] == "map":
        out["values"] = _named(out["values"], counter)
    return out


_FIELD = st.sampled_from(["a", "b", "n", "s", "é", "x_1"])
_AVRO_LEAVES = (st.sampled_from(AVRO_PRIMITIVES)
                | st.lists(st.sampled_from(["V", "B", "x_2", "_"]), min_size=1, max_size=4, unique=True)
                .map(lambda s: {"type": "enum", "symbols": s})
                | st.integers(1, 5).map(lambda n: {"type": "fixed", "size": n}))


def _avro_types(inner):
    records = st.lists(st.tuples(_FIELD, inner), max_size=4, unique_by=lambda f: f[0]).map(
        lambda fs: {"type": "record", "fields": [{"name": n, "type": t} for n, t in fs]})
    unions = st.tuples(st.lists(st.sampled_from(AVRO_PRIMITIVES), min_size=1, max_size=4, unique=True),
                       st.none() | records).map(lambda u: u[0] + ([u[1]] if u[1] is not None else []))
    return (st.builds(lambda t: {"type": "array", "items": t}, inner)
            | st.builds(lambda t: {"type": "map", "values": t}, inner) | unions | records)


AVRO_SCHEMAS = st.recursive(_AVRO_LEAVES, _avro_types, max_leaves=10).map(_named)


def avro_values(schema):
    """A strategy of values that fit ``schema``."""
    if isinstance(schema, list):
        return st.one_of([avro_values(b) for b in schema])
    if isinstance(schema, str):
        return {"null": st.none(), "boolean": st.booleans(), "int": st.integers(-2**31, 2**31 - 1),
                "long": st.integers(-2**63, 2**63 - 1), "float": st.floats(width=32),
                "double": st.floats(), "bytes": st.binary(max_size=6), "string": st.text(max_size=6)}[schema]
    kind = schema["type"]
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "fixed":
        return st.binary(min_size=schema["size"], max_size=schema["size"])
    if kind == "array":
        return st.lists(avro_values(schema["items"]), max_size=3)
    if kind == "map":
        return st.dictionaries(st.text(max_size=3), avro_values(schema["values"]), max_size=3)
    return st.fixed_dictionaries({f["name"]: avro_values(f["type"]) for f in schema["fields"]})


def _exactly(v):
    """``v`` with each value's type beside it and each float as its bits."""
    if isinstance(v, dict):
        return ("dict", [(k, _exactly(x)) for k, x in v.items()])
    if isinstance(v, list):
        return ("list", [_exactly(x) for x in v])
    if isinstance(v, float):
        return ("float", struct.pack("<d", v))
    return (type(v).__name__, v)


def _fastavro_answer(parsed, value: bytes):
    """What fastavro makes of ``value`` past the header: the record read whole, or None."""
    stream = io.BytesIO(value[avro.HEADER_BYTES:])
    try:
        record = fastavro.schemaless_reader(stream, parsed, None)
    except Exception:  # noqa: BLE001 - any refusal
        return None
    return _exactly(record) if stream.tell() == len(value) - avro.HEADER_BYTES else None


@settings(max_examples=300, deadline=None)
@given(st.data(), AVRO_SCHEMAS)
def test_the_compiled_avro_reader_reads_random_records_as_fastavro_and_declines_the_rest(data, schema):
    text = json.dumps(schema)
    try:
        parsed, named = avro._parse_writer_schema(text)
    except DecodeError:  # refused (an array of items that take no bytes): fastavro never reads it
        return
    reader = native.avro_reader(parsed, named)
    assert reader is not None
    value = data.draw(avro_values(schema))
    try:
        good = avro.encode_wire(1, text, value)
    except ValueError:  # a value the writer does not take (a float32 past its range)
        return
    assert _exactly(reader.read(good, avro.HEADER_BYTES)) == _fastavro_answer(parsed, good) is not None
    # the same payload damaged: what the compiled reader reads, fastavro reads the same, whole
    for _ in range(8):
        at = data.draw(st.integers(avro.HEADER_BYTES, len(good)))
        cut = data.draw(st.integers(0, 3))
        damaged = good[:at] + data.draw(st.binary(max_size=3)) + good[at + cut:]
        got = reader.read(damaged, avro.HEADER_BYTES)
        if got is not None:
            assert _exactly(got) == _fastavro_answer(parsed, damaged)


AVRO_EDGES = json.dumps({"type": "record", "name": "E", "fields": [
    {"name": "u", "type": ["null", "long"]},
    {"name": "k", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
    {"name": "s", "type": "string"}, {"name": "n", "type": "long"},
    {"name": "t", "type": {"type": "array", "items": "int"}}, {"name": "f", "type": "boolean"}]})


def _edges(u=b"\x02\x04", k=b"\x00", s=b"\x02x", n=b"\x06", t=b"\x00", f=b"\x02") -> bytes:
    """A payload of AVRO_EDGES, field by field (u = 2, k = A, s = "x", n = 3, t = [], f = True)."""
    return u + k + s + n + t + f


@pytest.mark.parametrize(("payload", "declined"), [
    (_edges(), False),
    (_edges(f=b"\x07"), False),  # a boolean byte of 7 is True, as fastavro reads it
    (_edges(t=b"\x03\x02\x04\x06\x00"), False),  # a block of -2 items, its size (1) unused
    (_edges(u=b"\x01\x04"), True),  # union branch -1: fastavro takes the last
    (_edges(k=b"\x01"), True),  # enum symbol -1: fastavro takes the last
    (_edges(k=b"\x04"), True),  # enum symbol 2 of 2
    (_edges(s=b"\x02\xff"), True),  # a string that is not UTF-8
    (_edges(s=b"\x01x"), True),  # a negative length
    (_edges(n=b"\xff" * 10 + b"\x01"), True),  # a varint of 11 bytes
    (_edges(n=b"\xff" * 9 + b"\x01"), False),  # one of 10 bytes
    (_edges()[:-1], True),  # it ends early
    (_edges() + b"\x00", True),  # a byte past the record
])
def test_the_compiled_avro_reader_declines_what_fastavro_reads_otherwise(payload, declined):
    parsed, named = avro._parse_writer_schema(AVRO_EDGES)
    reader = native.avro_reader(parsed, named)
    value = b"\x00\x00\x00\x00\x01" + payload
    got = reader.read(value, avro.HEADER_BYTES)
    assert (got is None) == declined
    if not declined:
        assert _exactly(got) == _fastavro_answer(parsed, value)
    # the decoder answers the same with the compiled reader as without it, refusals included
    texts = {1: AVRO_EDGES}.__getitem__
    answers = []
    for compiled in (True, False):
        decoder = avro.AvroDecoder()
        decoder.decode_wire(avro.encode_wire(1, AVRO_EDGES, {"u": None, "k": "B", "s": "", "n": 0, "t": [],
                                                            "f": False}), texts)
        if not compiled:
            decoder._last = (*decoder._last[:2], None)
        try:
            answers.append(_exactly(decoder.decode_wire(value, texts)))
        except DecodeError as exc:
            answers.append(exc.reason)
    assert answers[0] == answers[1]


@pytest.mark.parametrize("field", [
    {"type": "fixed", "name": "logicalTypes", "size": 1},  # fastavro reads its name as a logical type
    {"type": "fixed", "name": "F", "size": 2.0},
    {"type": "fixed", "name": "F", "size": -1},
])
def test_the_compiled_avro_reader_leaves_schemas_it_is_not_built_for_to_fastavro(field):
    text = json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": field}, {"name": "b", "type": field["name"]}]})
    assert native.avro_reader(*avro._parse_writer_schema(text)) is None


def test_the_compiled_avro_reader_is_built_for_a_plain_schema():
    assert native.avro_reader(*avro._parse_writer_schema(json.dumps(
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}))) is not None
