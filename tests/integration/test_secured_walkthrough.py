"""The walk-through for a secured cluster (docs/deploy.md, "A secured cluster (SASL_SSL and TLS)"),
run as the page writes it against the project's Apache Kafka launcher.

The commands are read from the page's ``bash`` blocks, so the page and this test cannot drift
apart: the first block starts the launcher (``python -m tests.apache_kafka --secure``), the next
sets the six ``SP_KAFKA__*`` variables, the last runs ``produce``, ``run --until-caught-up`` and
``checkpoint show``. Only the two values the launcher prints (its directory and its SASL_SSL
address) replace the page's examples; and the worker's observe port is 0, so that a parallel
test's worker cannot hold it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import apache_kafka as jars
from tests.integration.conftest import _no_apache_kafka
from tests.unit.test_docs import _prose

pytestmark = [pytest.mark.apache_kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "deploy.md"
SECTION = "## A secured cluster (SASL_SSL and TLS)"
SIX = ["SP_KAFKA__BOOTSTRAP_SERVERS", "SP_KAFKA__SECURITY_PROTOCOL", "SP_KAFKA__SASL_MECHANISM",
       "SP_KAFKA__SASL_USERNAME", "SP_KAFKA__SASL_PASSWORD", "SP_KAFKA__SSL_CAFILE"]


def walkthrough_blocks(text: str) -> list[str]:
    """The ``bash`` blocks of the section, in order."""
    start = text.index(SECTION + "\n")
    end = text.find("\n## ", start + len(SECTION))
    section = text[start: end if end >= 0 else None]
    return [m.group(1) for m in re.finditer(r"^```bash\n(.*?)^```", section, re.M | re.S)]


def test_the_walkthrough_has_its_three_blocks_and_the_six_variables():
    """Without a broker: the page has what the broker test runs, and says the rule it shows."""
    launch, variables, commands = walkthrough_blocks(PAGE.read_text())
    assert launch.strip() == ".venv/bin/python -m tests.apache_kafka --secure"
    assert re.findall(r"^export (SP_\w+)=", variables, re.M) == SIX
    assert re.search(r"^KAFKA_DIR=", variables, re.M)
    assert [ln.split()[1] for ln in commands.splitlines() if ln.strip()] == ["produce", "run", "checkpoint"]
    prose = " ".join(_prose(PAGE.read_text()))
    assert "The bootstrap host must be a name in the broker's certificate" in prose
    assert ("stream-perceptron: TLS with Kafka at vm:33313 failed: the name 'vm' is not in the broker's"
            " certificate (SP_KAFKA__SSL_CAFILE=") in prose
    assert ("host name checked: 'vm'): certificate verify failed: Hostname mismatch, certificate is not"
            " valid for 'vm'.") in prose


def _loopback_alias() -> str | None:
    """A name of this machine that reaches 127.0.0.1 but is not in the test certificate
    (localhost, 127.0.0.1), such as the host name in /etc/hosts; None where there is none."""
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        return None
    return name if address == "127.0.0.1" and name not in ("localhost", "127.0.0.1") else None


def _start_launcher(command: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """Run the page's launcher command from the repository root until it says it is ready;
    return it and what it printed (``dir``, ``sasl``)."""
    proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    printed: dict[str, str] = {}
    lines: list[str] = []
    deadline = time.monotonic() + 180
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if m := re.search(r"storage and logs in (\S+)\)", line):
            printed["dir"] = m.group(1)
        if m := re.match(r"\s+SASL_SSL\s+(\S+)", line):
            printed["sasl"] = m.group(1)
        if line.startswith("Ctrl-C stops it"):
            return proc, printed
    _stop(proc)
    raise AssertionError("the launcher did not get ready:\n" + "".join(lines))


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()


def _bash(script: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SP_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["SP_OBSERVE__PORT"] = "0"
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.timeout(420)
def test_the_secured_walkthrough_runs_as_written(tmp_path):
    """The launcher's secured broker, the six variables, 2,000 records produced into two
    partitions, a worker over SASL_SSL until caught up (exit 0), both partitions' states shown;
    and with a name of this machine that the certificate does not hold, the worker stops with
    exit 2 and the page's one line, at once."""
    reason = jars.why_not()
    if reason is not None:
        _no_apache_kafka(reason)
    launch, variables, commands = walkthrough_blocks(PAGE.read_text())
    proc, printed = _start_launcher(launch.strip())
    try:
        assert set(printed) == {"dir", "sasl"}, printed
        variables = re.sub(r"^KAFKA_DIR=.*$", f"KAFKA_DIR={printed['dir']}", variables, flags=re.M)
        variables = re.sub(r"^export SP_KAFKA__BOOTSTRAP_SERVERS=.*$",
                           f"export SP_KAFKA__BOOTSTRAP_SERVERS={printed['sasl']}", variables, flags=re.M)
        done = _bash(variables + commands, tmp_path, 240)
        assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-5000:])
        assert "sent 2000 records to examples" in done.stdout, done.stdout[-3000:]
        shown = json.loads(done.stdout[done.stdout.index("{"):])
        states = shown["partitions"]
        assert sorted(states) == ["examples:0", "examples:1"], states
        assert sum(s["labeled"] for s in states.values()) == 2000
        alias = _loopback_alias()
        if alias is not None:
            port = printed["sasl"].rsplit(":", 1)[1]
            wrong = _bash(variables + f"export SP_KAFKA__BOOTSTRAP_SERVERS={alias}:{port}\n"
                          "stream-perceptron run --until-caught-up\n", tmp_path, 120)
            ours = [ln for ln in wrong.stderr.splitlines() if ln.startswith("stream-perceptron:")]
            assert wrong.returncode == 2, (wrong.returncode, wrong.stderr[-3000:])
            assert len(ours) == 1, ours
            ca_file = f"{printed['dir']}/tls/ca.pem"
            assert ours[0] == (
                f"stream-perceptron: TLS with Kafka at {alias}:{port} failed: the name '{alias}' is not"
                f" in the broker's certificate (SP_KAFKA__SSL_CAFILE={ca_file}; host name checked:"
                f" '{alias}'): certificate verify failed: Hostname mismatch, certificate is not valid"
                f" for '{alias}'."), ours
    finally:
        _stop(proc)
