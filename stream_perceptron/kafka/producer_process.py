"""The kafka-python edge with its producer in a second process (``SP_KAFKA__PRODUCER_PROCESS``).

kafka-python is pure Python: its producer's ``send`` costs about as much as everything else the
worker does per record, and both hold the one GIL. :class:`SplitKafkaEdge` keeps the consumer in
the worker and moves the producer into a child process, so that decoding, learning and encoding
run beside producing, on a second core.

The edge's contract is unchanged (:mod:`stream_perceptron.kafka.edge`). The child runs a producer-only
:class:`~stream_perceptron.kafka.python_edge.KafkaEdge`, so records are sent, retried and reported exactly
as in one process; only the place differs:

* :meth:`SplitKafkaEdge.send_many` writes the batch to a pipe and returns. A full pipe blocks,
  as a full producer buffer does in one process.
* :meth:`SplitKafkaEdge.flush` asks the child to flush everything sent before it (the pipe keeps
  order) and to hand back the records whose delivery failed; the parent then resends transient
  failures and gives up permanent ones, as in one process. A checkpoint is written only after a
  flush that returned, so its offsets never run ahead of acknowledged outputs.
* A send the child could not queue even after its retries is reported at once; the parent raises
  it from its next ``send_many`` or ``flush``, and every later call raises too: nothing sent after
  a lost record can be checkpointed.
* The child exits when the worker's end of the pipe closes, and checks its parent every
  :data:`PARENT_CHECK_S`: a worker killed with SIGKILL leaves no producer behind. A reply that
  finds the worker gone (exited at its shutdown deadline during a flush) ends it too, without a
  word. What the child had not delivered then is replayed from the last checkpoint, as in one
  process.
* Signals are the worker's: the child runs in a process group of its own and ignores SIGINT
  and SIGTERM, so Ctrl+C at a terminal (sent to the whole foreground group) or a SIGTERM to
  every process of a service drains the worker through its producer, which exits with it.
* A child that stops reading cannot hold the worker: a write to the pipe that waits longer
  than the flush timeout plus :data:`REPLY_MARGIN_S` fails, and the child is killed.
* A failure inside the child reaches the worker as one line (``["e", …]`` before it is ready,
  ``["x", …]`` after), which the worker raises.
* Transactions (the exactly-once mode) are not carried over the pipe: the factory gives an
  exactly-once worker the kafka-python edge with its producer in the worker's process
  (:func:`stream_perceptron.kafka.factory.open_edge`), and this edge refuses to be transactional.
* The child is ``python -m stream_perceptron.kafka.producer_process FD``: it imports the edge and
  kafka-python, not the model. Its settings, secrets included, come through the pipe, never
  through its command line or environment (the worker's ``SP_`` variables are left out of it).

Messages on the pipe are msgpack arrays whose first element names them:

===========================  ==========================  ==========================================
parent → child               child → parent              meaning
===========================  ==========================  ==========================================
``["s", topic, keys, vals]`` (nothing)                   send these records
``["p", topic, key, val, p]`` (nothing)                   send this record to partition ``p``
``["f", timeout_s]``         ``["f", ok, unsent]``       flush; ``unsent``: failed deliveries
``["r"]``                    ``["r"]``                   replace the producer (permanent error)
``["c", graceful]``          ``["c"]``                   close the producer and exit
``["start", settings, …]``   ``["ready", append]``       the child's producer started; ``append``
                                                         is its fast path's refusal (or nil)
``["start", settings, …]``   ``["e", …]``                the child's producer did not start
—                            ``["x", description]``      a send failed after its retries
===========================  ==========================  ==========================================
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import msgspec
from kafka.errors import KafkaTimeoutError
from pydantic import SecretStr

from stream_perceptron.errors import KafkaAuthError, KafkaEdgeError
from stream_perceptron.kafka.edge import Unsent
from stream_perceptron.kafka.python_edge import KafkaEdge
from stream_perceptron.logs import JsonFormatter, setup_logging
from stream_perceptron.runtime import limit_malloc_arenas, tune_gc
from stream_perceptron.settings import KafkaSettings

log = logging.getLogger(__name__)

#: Seconds between the child's checks that the worker is still its parent.
PARENT_CHECK_S = 0.5
#: Seconds the child may take to import kafka-python and start its producer.
START_TIMEOUT_S = 60.0
#: Seconds a reply may take beyond the operation's own timeout.
REPLY_MARGIN_S = 30.0

_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode


class SplitKafkaEdge(KafkaEdge):
    """:class:`~stream_perceptron.kafka.python_edge.KafkaEdge` with its producer in a child process."""

    _log = log

    def _init_client_state(self) -> None:
        if self.transactional:
            raise KafkaEdgeError("the producer process carries no transactions: an exactly-once"
                                 " edge keeps its producer in the worker's process")
        super()._init_client_state()
        self._child: subprocess.Popen[bytes] | None = None
        self._failure: str | None = None  # a send the child lost: sticky, see the module doc

    @property
    def producer_pid(self) -> int | None:
        """The producer process's id while it runs."""
        return self._child.pid if self._child is not None and self._child.poll() is None else None

    # -- the child's lifecycle ---------------------------------------------------------------

    def _new_producer(self) -> Connection:
        """Start the child and wait until its producer is up; the pipe to it."""
        ours, theirs = socket.socketpair()
        # a write waits at most this long for a child that does not read (see _gone)
        wait_s = int(self._timeout_ms / 1000 + REPLY_MARGIN_S)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", wait_s, 0))
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SP_")}
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                env=env, process_group=0,
            )
        finally:
            theirs.close()
        conn = Connection(ours.detach())
        self._child = child
        root = logging.getLogger()
        fmt = "json" if any(isinstance(h.formatter, JsonFormatter) for h in root.handlers) else "text"
        start = ["start", _revealed(self._kafka), self._input_topic, root.level, fmt]
        try:
            try:
                conn.send_bytes(_encode(start))
            except OSError as exc:
                raise self._gone("starting the producer process", exc) from None
            reply = self._reply(conn, START_TIMEOUT_S, "starting the producer process")
        except KafkaEdgeError:
            self._failure = None  # a start that failed is retried with a new child
            self._end_child(conn)
            raise
        if reply[0] == "e":
            self._end_child(conn)
            error = KafkaAuthError if reply[1] == "auth" else KafkaEdgeError
            raise error(reply[2])
        self._fast_paths["append"] = reply[1]  # the child's producer appends, or not
        log.info("producer process %d started", child.pid)
        return conn

    def _replace_producer(self) -> None:
        conn = self._require(self._producer)
        self._call(conn, ["r"], REPLY_MARGIN_S + self._timeout_ms / 1000, "replacing the producer")

    def _close_producer(self, producer: Any, *, graceful: bool = True) -> None:
        timeout_s = 2 * self._timeout_ms / 1000 + REPLY_MARGIN_S
        try:
            self._call(producer, ["c", graceful], timeout_s, "closing the producer")
        except KafkaEdgeError as exc:
            log.warning("%s", exc)
        self._end_child(producer)

    def _end_child(self, conn: Connection) -> None:
        conn.close()
        child, self._child = self._child, None
        if child is None:
            return
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            log.warning("producer process %d did not exit; killing it", child.pid)
            child.kill()
            child.wait(5)

    # -- producing ---------------------------------------------------------------------------

    def send_many(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes]) -> None:
        """Hand the records to the producer process (in order; delivery is confirmed by flush)."""
        self._hand_over(["s", topic, keys, values])

    def _send_to(self, topic: str, key: bytes | None, value: bytes, partition: int) -> None:
        """Hand the record for ``partition`` to the producer process (after what was sent)."""
        self._hand_over(["p", topic, key, value, partition])

    def _hand_over(self, message: list[Any]) -> None:
        conn = self._require(self._producer)
        self._check_child(conn)
        try:
            conn.send_bytes(_encode(message))
        except OSError as exc:
            raise self._gone("sending", exc) from None

    def _flush_once(self) -> str | None:
        conn = self._require(self._producer)
        self._check_child(conn)
        timeout_s = self._timeout_ms / 1000
        _, ok, unsent = self._call(conn, ["f", timeout_s], timeout_s + REPLY_MARGIN_S, "flushing")
        if self._failure is not None:  # reported while the flush ran
            raise KafkaEdgeError(self._failure)
        self._unsent += [Unsent(*u) for u in unsent]
        if not ok:
            return f"records not acknowledged within {self._timeout_ms} ms"
        return self._settle_unsent()

    # -- the pipe ----------------------------------------------------------------------------

    def _call(self, conn: Connection, message: list[Any], timeout_s: float, what: str) -> list[Any]:
        """Send ``message``; its reply (failure reports that arrive first are remembered, and a
        late reply to an earlier request that timed out is passed over)."""
        try:
            conn.send_bytes(_encode(message))
        except OSError as exc:
            raise self._gone(what, exc) from None
        while True:
            reply = self._reply(conn, timeout_s, what)
            if reply[0] == message[0]:
                return reply
            if reply[0] == "x":
                self._lost(reply[1])

    def _reply(self, conn: Connection, timeout_s: float, what: str) -> list[Any]:
        try:
            if not conn.poll(timeout_s):
                raise self._lost(f"{what}: no answer from the producer process in {timeout_s:.0f} s")
            reply: list[Any] = _decode(conn.recv_bytes())
        except (EOFError, OSError) as exc:
            raise self._gone(what, exc) from None
        return reply

    def _check_child(self, conn: Connection) -> None:
        """Raise what the child reported lost, if anything (a poll that does not wait)."""
        if self._failure is None:
            try:
                while conn.poll():
                    reply = _decode(conn.recv_bytes())
                    if reply[0] == "x":
                        self._lost(reply[1])
            except (EOFError, OSError) as exc:
                self._gone("reading reports", exc)
        if self._failure is not None:
            raise KafkaEdgeError(self._failure)

    def _gone(self, what: str, exc: BaseException) -> KafkaEdgeError:
        """The pipe failed while ``what``: the child exited, or (a write that timed out) stopped
        reading, and is then killed, as a frame may be half written."""
        if isinstance(exc, BlockingIOError | TimeoutError):
            if self._child is not None:
                self._child.kill()
            return self._lost(f"{what}: the producer process read nothing for"
                              f" {self._timeout_ms / 1000 + REPLY_MARGIN_S:.0f} s; killed it")
        code = None
        if self._child is not None:
            try:  # its end closed: it is exiting, or has
                code = self._child.wait(1)
            except subprocess.TimeoutExpired:
                pass
        why = f"exit code {code}" if code is not None else (str(exc) or "its end of the pipe closed")
        return self._lost(f"{what}: the producer process is gone ({why})")

    def _lost(self, description: str) -> KafkaEdgeError:
        """Remember the first loss (every later send and flush raises it); the error to raise."""
        if self._failure is None:
            self._failure = description
            log.error("producer process: %s", description)
        return KafkaEdgeError(self._failure)


def _revealed(kafka: KafkaSettings) -> dict[str, Any]:
    """``kafka`` as plain values, secrets revealed: only for the pipe to the child."""
    out: dict[str, Any] = {}
    for name, value in kafka.model_dump().items():
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        elif isinstance(value, Path):
            value = str(value)
        out[name] = value
    return out


class _Child:
    """The producer process: a producer-only :class:`KafkaEdge` serving the pipe."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.failed = False  # a send was lost: later sends are dropped (the worker raises)
        self.worker_gone = False  # a reply found the worker's end closed

    def reply(self, *message: Any) -> None:
        """Send ``message`` to the worker. A worker that exited meanwhile (at its shutdown
        deadline, or killed) is noted, for :meth:`serve` to end: nobody is left to tell."""
        try:
            self.conn.send_bytes(_encode(list(message)))
        except OSError:  # BrokenPipeError: the worker's end is closed
            self.worker_gone = True

    def run(self) -> None:
        """Start the producer and serve the pipe; any failure is sent to the worker as one line."""
        parent = os.getppid()
        try:
            _, kafka, input_topic, level, fmt = _decode(self.conn.recv_bytes())
            setup_logging(level, fmt)
            limit_malloc_arenas()  # tuned as the worker is
            self.edge = KafkaEdge(KafkaSettings.model_validate(kafka), input_topic, _ignore, _ignore)
            self.edge._producer = self.edge._new_producer()
        except Exception as exc:  # reported to the worker, which raises it
            kind = "auth" if isinstance(exc, KafkaAuthError) else "other"
            self.reply("e", kind, f"cannot start the producer: {KafkaEdge._describe(exc)}")
            return
        tune_gc()
        self.reply("ready", self.edge._fast_paths["append"])
        try:
            self.serve(parent)
        except Exception as exc:  # the worker raises it from its next call, as one line
            log.debug("producer process failed", exc_info=True)
            self.edge.log_suppressed()  # while the worker waits: its last line comes after
            self.reply("x", f"the producer process failed: {KafkaEdge._describe(exc)}")
            sys.exit(1)

    def serve(self, parent: int) -> None:
        edge = self.edge
        while True:
            try:
                if not self.conn.poll(PARENT_CHECK_S):
                    if os.getppid() != parent:
                        break  # the worker died without closing the pipe
                    continue
                message = _decode(self.conn.recv_bytes())
            except (EOFError, OSError):
                break  # the worker's end closed
            if self.handle(message):
                return
            if self.worker_gone:
                break
        # the worker is gone: drop what is queued (it is replayed from the last checkpoint)
        producer, edge._producer = edge._producer, None
        edge._close_producer(producer, graceful=False)

    def handle(self, message: list[Any]) -> bool:
        """Serve one message; True once the producer is closed."""
        edge, kind = self.edge, message[0]
        if kind in ("s", "p"):
            if not self.failed:
                try:
                    if kind == "s":
                        edge.send_many(message[1], message[2], message[3])
                    else:
                        edge.send(message[1], message[2], message[3], message[4])
                except KafkaEdgeError as exc:
                    self.failed = True
                    self.reply("x", str(exc))
        elif kind == "f":
            ok = _flush(edge, message[1])
            unsent, edge._unsent = edge._unsent, []
            self.reply("f", ok, [[u.topic, u.key, u.value, u.retriable, u.error, u.code, u.partition]
                                 for u in unsent])
        elif kind == "r":
            edge._replace_producer()
            self.reply("r")
        elif kind == "c":
            producer, edge._producer = edge._producer, None
            edge._close_producer(producer, graceful=message[1])
            # its client's lines held back, while the worker waits for this reply: never once
            # the worker is gone, whose last line must stay last
            edge.log_suppressed()
            self.reply("c")
            return True
        return False


def _flush(edge: KafkaEdge, timeout_s: float) -> bool:
    """Flush the child's producer; False when not everything was acknowledged in time."""
    try:
        edge._require(edge._producer).flush(timeout=timeout_s)
    except KafkaTimeoutError:
        return False
    return True


def _ignore(_partitions: list[tuple[str, int]]) -> None:
    return None


if __name__ == "__main__":
    for _signum in (signal.SIGINT, signal.SIGTERM):  # the worker's to act on; see the module doc
        signal.signal(_signum, signal.SIG_IGN)
    _Child(Connection(int(sys.argv[1]))).run()
