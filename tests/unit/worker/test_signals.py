"""The worker's signal handler: a signal that lands while the main thread writes a log line."""

from __future__ import annotations

import io
import logging
import math
import signal
import threading
from collections.abc import Callable
from types import FrameType

from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker


class _SignalMidWrite(io.RawIOBase):
    """A raw stream that, on its first write, runs ``handler`` as a signal would: in the middle
    of the main thread's write, with the logging handler's lock held."""

    def __init__(self, handler) -> None:
        self.handler, self.fired, self.data = handler, False, b""

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        if not self.fired:
            self.fired = True
            self.handler(signal.SIGTERM, None)
        self.data += bytes(b)
        return len(b)


def _worker_and_handler(tmp_path) -> tuple[Worker, Callable[[int, FrameType | None], None]]:
    """A worker and the SIGTERM handler it installs; the process's own handlers are put back.
    The handler arms the shutdown's deadline, which no run here disarms: the worker does not own
    this process, so its deadline is infinite and starts no timer that could end it later."""
    worker = Worker(Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)}))
    assert worker.shutdown.deadline.seconds == math.inf
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    with worker._signals():
        handle = signal.getsignal(signal.SIGTERM)
    assert {s: signal.getsignal(s) for s in before} == before  # put back after the run
    assert callable(handle)
    return worker, handle


def test_a_signal_during_a_log_write_is_logged_after_it_not_inside_it(tmp_path, capsys):
    worker, handle = _worker_and_handler(tmp_path)
    raw = _SignalMidWrite(handle)
    stream = io.TextIOWrapper(io.BufferedWriter(raw), write_through=True)
    handler = logging.StreamHandler(stream)
    log = logging.getLogger("stream_perceptron")
    # only this handler: others that earlier tests in this process left behind are not this test's
    saved = (log.handlers[:], log.level, log.propagate)
    log.handlers, log.propagate = [handler], False
    log.setLevel(logging.INFO)
    try:
        log.info("a line the signal interrupts")
        for t in threading.enumerate():
            if t.name == "sp-signal-log":
                t.join(5)
    finally:
        log.handlers, log.propagate = saved[0], saved[2]
        log.setLevel(saved[1])
    assert worker.shutdown.asked
    assert worker.shutdown.deadline.armed  # the shutdown's deadline counts from the signal
    text = raw.data.decode()
    assert text.index("a line the signal interrupts") < text.index("SIGTERM: finishing the batch")
    err = capsys.readouterr().err
    assert "Logging error" not in err and "reentrant" not in err


def test_a_signal_still_stops_the_worker_when_no_thread_can_start(tmp_path, monkeypatch):
    # at a process limit (pids cgroup, RLIMIT_NPROC) the line is lost, the stop is not
    worker, handle = _worker_and_handler(tmp_path)

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    handle(signal.SIGTERM, None)
    assert worker.shutdown.asked
