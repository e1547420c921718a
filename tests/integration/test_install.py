"""``pip install stream-perceptron`` without extras, for real: a fresh virtualenv, the package
installed from this source with its dependencies from the package index. The model and
learn_many work there with numpy and river only, river's ``check_estimator`` once scikit-learn is
added (river's checks import it; river does not install it), and the console script says in one
line which extra it needs. (tests/unit/test_extras.py shows the same in this environment, its
extras refused; this shows the install itself pulls none in.)

About 35 s with pip's cache warm (numpy, scipy, river and scikit-learn are downloaded once).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stream_perceptron.extras import PACKAGES
from tests.unit.test_extras import LEARN_MANY

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv holding ``pip install stream-perceptron`` (no extras) and what it pulled in."""
    where = tmp_path_factory.mktemp("install")
    source = where / "source"  # a copy: pip builds in the tree it is given
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "stream_perceptron", source / "stream_perceptron",
                    ignore=shutil.ignore_patterns("__pycache__"))
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    done = subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", str(source)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def test_the_install_pulls_in_no_extra(bare_venv):
    listed = subprocess.run([bare_venv / "bin" / "python", "-m", "pip", "list", "--format", "json"],
                            capture_output=True, text=True, check=True, timeout=60).stdout
    installed = {p["name"].lower() for p in json.loads(listed)}
    extras = {package for packages in PACKAGES.values() for _, package in packages}
    assert {"stream-perceptron", "numpy", "river"} <= installed
    assert not installed & (extras | {"llvmlite", "pysimdjson"})


def test_the_model_learns_there_as_it_does_here(bare_venv, tmp_path):
    code = LEARN_MANY + (
        "import sys\n"
        "import stream_perceptron\n"
        "one = Perceptron()\n"
        "for x, label in [({'a': 1.0}, True), ({'a': -1.0, 'b': 1.0}, False)]:\n"
        "    one.learn_one(x, label)\n"
        "assert one.predict_one({'a': 2.0}) is True\n"
        "print(stream_perceptron.__file__, 'numba' in sys.modules, digest)\n"
    )
    done = subprocess.run([bare_venv / "bin" / "python", "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    where, numba, digest = done.stdout.split()
    assert Path(where).is_relative_to(bare_venv) and numba == "False"
    here: dict[str, object] = {}
    exec(LEARN_MANY, here)  # noqa: S102 - the same rows here, numba's loop deciding
    assert digest == here["digest"]


def test_river_s_check_estimator_passes_there_with_scikit_learn(bare_venv, tmp_path):
    python = bare_venv / "bin" / "python"
    added = subprocess.run([python, "-m", "pip", "install", "--quiet", "scikit-learn"], capture_output=True,
                           text=True, timeout=240)
    assert added.returncode == 0, added.stderr[-3000:]
    code = ("from river import checks\n"
            "from stream_perceptron import Perceptron\n"
            "checks.check_estimator(Perceptron())\n")
    done = subprocess.run([python, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_console_script_says_to_install_worker(bare_venv, tmp_path):
    done = subprocess.run([bare_venv / "bin" / "stream-perceptron", "run"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-3000:]
    assert done.stderr.endswith("pip install 'stream-perceptron[worker]'\n")
