"""Hashed features: stable columns, a constant width, collisions that add, exact learn_many."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron import Perceptron
from stream_perceptron.model.hashing import FeatureHasher
from tests.unit.model.exactness import assert_learn_many_is_learn_one

# columns of 2**20 and signs, fixed once: a change of hash would silently reshuffle every model
KNOWN = {"clicks": (252725, 1.0), "age": (649179, 1.0), "user:42": (731097, -1.0), "é": (989899, 1.0)}


def test_columns_are_fixed_constants_the_same_in_every_process():
    hasher = FeatureHasher(bits=20, signed=True)
    assert {k: hasher.column(k) for k in KNOWN} == KNOWN
    code = (
        "from stream_perceptron.model.hashing import FeatureHasher;"
        f"h = FeatureHasher(20, True); print([h.column(k) for k in {list(KNOWN)!r}])"
    )
    for seed in ("1", "2"):  # Python's own hash() differs between these processes
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        assert out.strip() == repr(list(KNOWN.values()))


def test_the_hash_is_the_documented_one():
    """The first 8 bytes of BLAKE2b of the UTF-8 name, little-endian: column = low b bits, sign = top bit."""
    for name, (column, sign) in KNOWN.items():
        h = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")
        assert (h % 2**20, -1.0 if h >= 2**63 else 1.0) == (column, sign)


def test_bits_are_bounded():
    with pytest.raises(ValueError, match="hash_bits must be 1 to 30"):
        FeatureHasher(bits=31)
    with pytest.raises(ValueError, match="makes 16"):
        Perceptron(hash_bits=4, n_features=10)


def test_width_and_state_stay_constant_however_many_names_arrive():
    model = Perceptron(hash_bits=10)
    sizes = []
    for block in range(4):
        rows = [{f"user:{block}:{i}": 1.0, "bias": 1.0} for i in range(2000)]
        model.learn_many(rows, [1 if i % 3 else -1 for i in range(2000)])
        sizes.append(len(model.get_state()["weights"]))
        assert model.feature_names == [] and model.n_names == 0 and model.name_limit is None
    assert sizes == [1024] * 4 and model.dim == 1024 and model.names_refused == 0


def test_colliding_names_share_a_weight_and_signs_make_them_cancel():
    hasher = FeatureHasher(bits=4, signed=True)
    assert hasher.column("user:17")[0] == hasher.column("country")[0] == 13  # a collision
    model = Perceptron(hash_bits=4, fit_intercept=False)
    model.learn_one({"user:17": 1.0}, 1)
    assert model.score_one({"country": 1.0}) == 1.0  # one weight: the model cannot tell them apart
    row = {"user:17": 2.0, "country": 3.0}  # both in one row: each adds to column 13
    fresh = Perceptron(hash_bits=4, fit_intercept=False)
    fresh.learn_one(row, 1)
    assert fresh.weights[13] == 5.0
    signed = Perceptron(hash_bits=4, hash_sign=True, fit_intercept=False)
    signed.learn_one({"user:42": 1.0}, 1)
    assert signed.weights[hasher.column("user:42")[0]] == -1.0  # the name's hashed sign
    assert signed.score_one({"user:42": 1.0}) == 1.0  # ξ(k)² = 1: the name's own score is unchanged


@st.composite
def named_streams(draw):
    n = draw(st.integers(1, 150))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    names = [f"n{j}" for j in range(draw(st.integers(1, 40)))]
    rows = []
    for _ in range(n):
        k = int(rng.integers(1, min(8, len(names)) + 1))
        picked = rng.choice(len(names), size=k, replace=False)
        rows.append({names[j]: float(np.round(rng.normal(), 2)) for j in picked})
    return rows, rng.choice(np.array([-1, 1], dtype=np.int8), size=n)


@settings(max_examples=40, deadline=None)
@given(named_streams(), st.integers(2, 6), st.booleans(), st.booleans(), st.integers(1, 5))
def test_hashed_learn_many_is_learn_one_bit_for_bit(stream, bits, sign, average, cuts):
    rows, y = stream  # few columns: rows collide with themselves and with each other
    one, _ = assert_learn_many_is_learn_one(
        lambda: Perceptron(hash_bits=bits, hash_sign=sign, average=average), rows, y, cuts)
    dense = one.vectorize(rows[0], grow=False)  # the dense form of a hashed row sums its collisions
    assert np.isclose(dense @ one.weights + one.intercept, Perceptron.score_one(_plain(one), rows[0]))


def _plain(model):
    """The model serving θ (not θ̄), to compare a dense product with the sparse score."""
    twin = Perceptron(hash_bits=model.hash_bits, hash_sign=model.hash_sign)
    twin.set_state({k: v for k, v in model.get_state().items() if k != "average"})
    return twin
