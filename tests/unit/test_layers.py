"""The layers of the package, held: what may import what (STYLE.md, "The shape of the house").

:func:`violations` reads every module of a package tree (its source, not the import system) and
lists what breaks a rule; :func:`loaded_by` imports modules in a fresh interpreter and lists
what came with them. Each rule is also planted, broken, into a copy of the package, to show the
check catches it.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "stream_perceptron"
NAME = "stream_perceptron"

# Sub-packages and top-level modules, and what of the package each may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "throttle": set(),
    "runtime": set(),
    "signals": set(),
    "http_server": set(),  # an HTTP server bounded against hostile clients: no model, no Kafka
    "clean": set(),  # a topic's texts cleaned to be shown: by the views and the metrics' labels
    "logs": {"throttle"},
    "contract": {"errors"},
    "model": {"errors", "contract"},
    "features": {"errors", "contract"},
    "codec": {"errors", "contract", "features"},
    "settings": {"errors", "codec.limits", "features"},
    "state": {"errors"},
    "kafka": {"errors", "settings", "logs", "throttle", "runtime"},
    "sources": {"errors", "contract"},
    "worker": {"errors", "settings", "throttle", "runtime", "signals", "http_server", "clean", "model",
               "features", "codec", "state", "kafka.edge", "kafka.admin", "kafka.factory", "kafka.state_log",
               "kafka.reader", "kafka.registry"},
    "commands": {"errors", "contract", "settings", "throttle", "runtime", "signals", "http_server", "clean",
                 "model", "features", "codec", "state", "sources", "worker", "interop", "kafka.edge",
                 "kafka.admin", "kafka.config", "kafka.reader", "kafka.registry"},
    "interop": {"errors", "model"},  # the model out to river and scikit-learn, and theirs in
    "cli": {"*"},
    "extras": {"cli"},  # the console script: cli once [worker] is installed
    "__init__": {"model", "interop"},
}

# Neither a Kafka client, nor files, the network, processes or the clock, in the pure layers.
IMPURE = {"kafka", "confluent_kafka", "os", "io", "pathlib", "shutil", "tempfile", "socket", "ssl",
          "http", "urllib", "subprocess", "multiprocessing", "signal", "fcntl", "time", "datetime"}
PURE = ("model", "codec", "contract", "features", "worker.plan")
# What a pure module may take from an impure one, by exact import: an in-memory stream is no I/O,
# and fastavro reads a payload only from a file-like object.
PURE_EXCEPTIONS = {"codec.avro": {("io", "BytesIO")}}
# The input contract, shared by model/, codec/ and sources/, imports no library but these (and the
# standard library's modules).
LIBRARIES = {"contract": {"numpy", "orjson"}}
NO_NUMPY = ("kafka",)  # checked again at run time by test_the_kafka_edge_loads_no_numpy

# Only these read the environment or argv, and only these configure logging.
READS_ENV = {"settings", "cli", "kafka.producer_process"}  # the child's environment, SP_* removed
READS_ARGV = {"cli", "kafka.producer_process"}  # its entry point: the pipe's file descriptor
CONFIGURES_LOGGING = {"cli", "logs", "kafka.producer_process"}  # the child's own, as told by cli

BACKENDS = {"kafka.python_edge", "kafka.confluent_edge", "kafka.producer_process"}
CHOOSES_BACKEND = {"kafka.factory", "kafka.producer_process"}  # the process edge wraps kafka-python's


def modules(root: Path) -> dict[str, ast.Module]:
    """Every module of the package at ``root``, by dotted name within it."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)
        found[name] = ast.parse(path.read_text(), str(path))
    return found


def imported(tree: ast.Module) -> set[str]:
    """The absolute names a module imports, at its top or inside functions."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _excepted(tree: ast.Module, allowed: set[tuple[str, str]]) -> set[str]:
    """The names imported by ``from M import N`` with (M, N) in ``allowed``, when every name a
    module imports from M is one of those (``import M`` itself is never excepted)."""
    taken: dict[str, set[str]] = {}
    whole = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            taken.setdefault(node.module, set()).update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            whole.update(alias.name for alias in node.names)
    out = set()
    for module, names in taken.items():
        if module not in whole and {(module, n) for n in names} <= allowed:
            out |= {module} | {f"{module}.{n}" for n in names}
    return out


def _layer(name: str) -> str:
    return name.split(".")[0]


def _within(name: str, allowed: set[str]) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allowed)


def _calls(tree: ast.Module) -> set[str]:
    """Dotted names read or called in a module (``os.environ``, ``logging.basicConfig``, ``open``)."""
    seen = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            seen.add(f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            seen.add(node.func.id)
    return seen


def violations(root: Path = PACKAGE) -> list[str]:
    """What breaks the rules in the package at ``root``; empty when it keeps them."""
    found = []
    for name, tree in modules(root).items():
        layer = _layer(name)
        allowed = ALLOWED.get(layer)
        if allowed is None:
            found.append(f"{name}: not in a known layer (add it to ALLOWED)")
            continue
        excepted = _excepted(tree, PURE_EXCEPTIONS.get(name, set()))
        for target in imported(tree) - excepted:
            top = target.split(".")[0]
            if top == NAME and target != NAME:
                inner = target[len(NAME) + 1:]
                if _layer(inner) != layer and "*" not in allowed and not _within(inner, allowed):
                    found.append(f"{name}: imports {target}")
                if inner in BACKENDS and name not in CHOOSES_BACKEND and layer != "cli":
                    found.append(f"{name}: names a backend ({target}); use kafka.factory.open_edge")
            elif layer in PURE and top in IMPURE:
                found.append(f"{name}: a pure module imports {top}")
            elif (layer in LIBRARIES and top != NAME and top not in sys.stdlib_module_names
                  and top not in LIBRARIES[layer]):
                found.append(f"{name}: imports the library {top}")
            elif layer in NO_NUMPY and top in ("numpy", "river"):
                found.append(f"{name}: the Kafka edge imports {top}")
            elif layer == "state" and top in ("kafka", "confluent_kafka"):
                found.append(f"{name}: the state layer imports the client {top}")
        used = _calls(tree)
        if layer in PURE and "open" in used:
            found.append(f"{name}: a pure module opens files")
        if used & {"os.environ", "os.getenv", "os.environb"} and name not in READS_ENV:
            found.append(f"{name}: reads the environment")
        if "sys.argv" in used and name not in READS_ARGV:
            found.append(f"{name}: reads argv")
        configures = used & {"logging.basicConfig", "setup_logging", "config.dictConfig", "logging.config"}
        if configures and name not in CONFIGURES_LOGGING:
            found.append(f"{name}: configures logging ({', '.join(sorted(configures))})")
    return found


def loaded_by(imports: list[str], path: Path | None = None) -> set[str]:
    """The top-level modules in ``sys.modules`` after importing ``imports`` in a fresh interpreter
    (with ``path`` first on its path, for a planted copy)."""
    code = (
        "import importlib, json, sys\n"
        f"for m in {imports!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=path or PACKAGE.parent, timeout=120, check=True)
    return set(json.loads(out.stdout))


KAFKA_EDGE = ["stream_perceptron.kafka.factory", "stream_perceptron.kafka.python_edge",
              "stream_perceptron.kafka.producer_process", "stream_perceptron.kafka.admin"]


def _confluent() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------------------------- the rules hold


def test_the_package_keeps_its_layers():
    assert violations() == []


def test_the_kafka_edge_loads_no_numpy():
    loaded = loaded_by(KAFKA_EDGE)
    assert "kafka" in loaded
    assert not loaded & {"numpy", "river", "simdjson"}


def test_the_model_loads_no_pandas_and_the_way_out_no_scikit_learn():
    """pandas is optional: the model takes DataFrames without importing pandas itself; and
    scikit-learn is imported only by an export to it."""
    loaded = loaded_by(["stream_perceptron", "stream_perceptron.model.perceptron",
                        "stream_perceptron.model.frames", "stream_perceptron.interop"])
    assert "numpy" in loaded and "river" in loaded
    assert not loaded & {"pandas", "sklearn"}


@pytest.mark.skipif(not _confluent(), reason="confluent-kafka is not installed (pip install '.[confluent]')")
def test_the_confluent_edge_loads_no_kafka_python_and_no_numpy():
    loaded = loaded_by(["stream_perceptron.kafka.confluent_edge"])
    assert "confluent_kafka" in loaded
    assert "kafka" not in loaded and "numpy" not in loaded


# ------------------------------------------------------------------- each rule, planted, is caught


def _planted(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the package with ``line`` appended to ``module`` (a path within it)."""
    copy = tmp_path / NAME
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / module).open("a") as f:
        f.write(f"\n{line}\n")
    return copy


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        ("model/sparse.py", "import time", "model.sparse: a pure module imports time"),
        ("contract.py", "import os", "contract: a pure module imports os"),
        ("contract.py", "import msgspec", "contract: imports the library msgspec"),
        ("contract.py", "from stream_perceptron.codec import limits",
         "contract: imports stream_perceptron.codec"),
        ("codec/inputs.py", "from stream_perceptron.sources import classes",
         "codec.inputs: imports stream_perceptron.sources"),
        ("sources/classes.py", "from stream_perceptron.model import labels",
         "sources.classes: imports stream_perceptron.model"),
        ("codec/inputs.py", "from kafka import KafkaConsumer", "codec.inputs: a pure module imports kafka"),
        ("codec/inputs.py", "from io import BytesIO", "codec.inputs: a pure module imports io"),
        ("codec/avro.py", "from io import open", "codec.avro: a pure module imports io"),
        ("codec/avro.py", "import io", "codec.avro: a pure module imports io"),
        ("model/stats.py", "def f(p):\n    return open(p)", "model.stats: a pure module opens files"),
        ("model/learner.py", "from stream_perceptron.state import stored",
         "model.learner: imports stream_perceptron.state"),
        ("kafka/edge.py", "from stream_perceptron.model import perceptron",
         "kafka.edge: imports stream_perceptron.model"),
        ("kafka/admin.py", "from stream_perceptron.codec.outputs import encode",
         "kafka.admin: imports stream_perceptron.codec.outputs"),
        ("kafka/edge.py", "import numpy", "kafka.edge: the Kafka edge imports numpy"),
        ("state/stored.py", "import kafka", "state.stored: the state layer imports the client kafka"),
        ("worker/loop.py", "from stream_perceptron.kafka.python_edge import KafkaEdge",
         "worker.loop: names a backend (stream_perceptron.kafka.python_edge)"),
        ("commands/demo.py", "import os\nX = os.environ.get('X')", "commands.demo: reads the environment"),
        ("worker/policy.py", "import sys\nA = sys.argv", "worker.policy: reads argv"),
        ("worker/loop.py", "logging.basicConfig()", "worker.loop: configures logging (logging.basicConfig)"),
        ("commands/watch.py", "from stream_perceptron.logs import setup_logging\nsetup_logging()",
         "commands.watch: configures logging (setup_logging)"),
        ("http_server.py", "from stream_perceptron.kafka import edge",
         "http_server: imports stream_perceptron.kafka"),
        ("http_server.py", "from stream_perceptron.model import perceptron",
         "http_server: imports stream_perceptron.model"),
    ],
)
def test_a_planted_violation_is_caught(tmp_path, module, line, expected):
    found = violations(_planted(tmp_path, module, line))
    assert any(v.startswith(expected) for v in found), found


def test_a_planted_numpy_import_in_the_edge_is_caught_at_run_time(tmp_path):
    copy = _planted(tmp_path, "kafka/config.py", "import numpy")  # reached only through imports
    assert "numpy" in loaded_by(KAFKA_EDGE, copy.parent)


@pytest.mark.skipif(not _confluent(), reason="confluent-kafka is not installed (pip install '.[confluent]')")
def test_a_planted_kafka_python_import_in_the_confluent_edge_is_caught_at_run_time(tmp_path):
    copy = _planted(tmp_path, "kafka/config.py", "import kafka.errors")
    assert "kafka" in loaded_by(["stream_perceptron.kafka.confluent_edge"], copy.parent)
