"""The compiled mistake loop (model/dense_kernel.py): what it decides, where it stops, and that it
runs where no cache directory is writable."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from stream_perceptron.model import dense_kernel


def _run(signed, w, scale=1e-12, i=0):
    rows = np.empty(len(signed), dtype=np.intp)
    i, k, size, since = dense_kernel.run(signed, w, i, 0, rows, scale, float(np.linalg.norm(w)), 0, 2.0, True)
    return i, rows[:k].tolist(), size, since


def test_mistakes_update_in_order_and_the_run_stops_at_a_margin_within_the_tolerance():
    # margins against w = [1, 0, 0]: 1 (right), then -1 (a mistake: w becomes [1, -1, -1]),
    # then [0, 0.5, -0.5]·w = 0: within tol, the caller's to decide; then [0, 1, 0]·w = -1
    signed = np.array([[1.0, 0.0, 0.0], [-1.0, -1.0, -1.0], [0.0, 0.5, -0.5], [0.0, 1.0, 0.0]])
    w = np.array([1.0, 0.0, 0.0])
    i, rows, size, since = _run(signed, w)
    assert (i, rows, since) == (2, [1], 1)
    assert w.tolist() == [0.0, -1.0, -1.0]
    assert size == 1.0 + 2.0  # ‖w‖ before, plus R for the mistake
    i, rows, _, _ = _run(signed, w, i=3)  # the caller decided row 2; on from 3
    assert (i, rows) == (4, [3])
    assert w.tolist() == [0.0, 0.0, -1.0]


def test_a_non_finite_margin_stops_the_run():
    signed = np.array([[1.0, 1.0], [np.nan, 1.0]])
    assert _run(signed, np.array([1.0, 0.0]))[0] == 1


def test_without_an_intercept_the_last_weight_stays():
    signed = np.array([[-1.0, -1.0]])
    w = np.array([0.5, 3.0])  # margin -3.5
    rows = np.empty(1, dtype=np.intp)
    dense_kernel.run(signed, w, 0, 0, rows, 1e-12, 4.0, 0, 2.0, False)
    assert w.tolist() == [-0.5, 3.0]


def test_learn_many_runs_where_numba_can_cache_nowhere(tmp_path):
    """No writable cache place: compiled in the process, and learn_many is still learn_one."""
    code = (
        "import numpy as np\n"
        "from stream_perceptron.model.perceptron import Perceptron\n"
        "rng = np.random.default_rng(7)\n"
        "X = rng.normal(size=(400, 6)); y = np.where(X @ rng.normal(size=6) > 0, 1, -1)\n"
        "many, one = Perceptron(), Perceptron()\n"
        "flags = many.learn_many(X, y).mistakes.tolist()\n"
        "for x, v in zip(X, y):\n    one.learn_one(x, v)\n"
        "assert many.weights.tobytes() == one.weights.tobytes() and many.intercept == one.intercept\n"
        "print(sum(flags), one.mistakes)\n"
    )
    env = {**os.environ, "NUMBA_CACHE_LOCATOR_CLASSES": "UserProvidedCacheLocator",
           "NUMBA_CACHE_DIR": str(tmp_path / "not-a-dir" / "x")}
    (tmp_path / "not-a-dir").write_text("a file, so no directory can be made under it")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    many, one = done.stdout.split()
    assert int(many) == int(one) > 0


def test_calls_shorter_than_the_threshold_do_not_load_numba():
    """The worker's polls (2,000 records by default) stay in numpy: no numba in the process."""
    code = (
        "import sys\n"
        "import numpy as np\n"
        "from stream_perceptron.model.dense_pass import COMPILED_MIN_ROWS\n"
        "from stream_perceptron.model.perceptron import Perceptron\n"
        "X = np.random.default_rng(1).normal(size=(COMPILED_MIN_ROWS - 1, 4))\n"
        "Perceptron().learn_many(X, np.where(X[:, 0] > 0, 1, -1))\n"
        "print('numba' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False"], done.stderr[-2000:]
