"""Broker trouble: the broker frozen (SIGSTOP) for 30 s mid-stream, and no broker at start-up.

Each test runs its own embedded broker (tansu, memory only), so topics are created after it
starts. The reference is the core over the rows actually in the input topic, in offset order
(so a producer retry that duplicated an input record could not fool the comparison).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer

from stream_perceptron.commands.broker import EmbeddedBroker, free_port
from stream_perceptron.commands.read import read_topic
from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka.admin import client_config, ensure_topics
from stream_perceptron.kafka.edge import Edge, Partition, Retry
from stream_perceptron.settings import CheckpointSettings, KafkaSettings, Settings
from stream_perceptron.state.directory import DirectoryStore
from tests.integration.conftest import BACKENDS
from tests.integration.helpers import (
    core_reference,
    encode_stream,
    new_edge,
    noisy_stream,
    predictions_by_offset,
)
from tests.integration.helpers import started as started_edge

from .support import (
    LogTail,
    committed,
    fault_settings,
    reap,
    run_until_caught_up,
    start_worker,
    stopped,
    trouble_lines,
    wait_until,
)

# kafka-python 3.0.12 leaks one socket when a client is closed while a connection to the broker
# is being opened (see test_rebalance.py), which these rows do on purpose: the broker stops
# answering, or is not there yet. The rows' brokers are their own, on ports of their own, so the
# broker tests' teardown filter (tests/integration/conftest.py) does not cover them, and the
# socket can be collected in the middle of any of them. Seen in a full run in row 3b (a socket to
# its broker collected while the predictions were read back) and in row 3e.
pytestmark = [
    pytest.mark.faults,
    pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"),
]

OWN = " stream_perceptron."  # in a log line: written by the worker's own code, not a client's


def own_lines(text: str) -> list[str]:
    """The worker's own WARNING and ERROR lines: the confluent-kafka edge also passes on
    librdkafka's lines under its logger, and those are the client's words."""
    return [ln for ln in trouble_lines(text, OWN) if " librdkafka " not in ln]

STALL_S = float(os.environ.get("SP_FAULTS_STALL_S", "15"))  # past every client timeout set here

TOPICS = {"input": "examples", "predictions": "predictions", "stats": "stats",
          "dead_letter": "dead-letters"}


@pytest.fixture
def own_broker() -> Iterator[EmbeddedBroker]:
    """A private embedded broker (this test freezes or replaces it)."""
    broker = EmbeddedBroker()
    broker.start()
    try:
        yield broker
    finally:
        if broker.pid is not None:
            try:
                os.kill(broker.pid, signal.SIGCONT)  # never leave it frozen
            except ProcessLookupError:
                pass
        broker.stop()


def _kafka(bootstrap: str, **overrides: object) -> KafkaSettings:
    fields: dict[str, object] = {
        "bootstrap_servers": bootstrap, "group_id": "faults", "client_id": "sp-faults",
        "session_timeout_ms": 1_000, "heartbeat_interval_ms": 200,  # tansu: joins in ~0.5 s
        "request_timeout_ms": 10_000, "linger_ms": 5, "max_poll_records": 500,
    }
    fields.update(overrides)
    return KafkaSettings(**fields)  # type: ignore[arg-type]


def _create_topics(kafka: KafkaSettings) -> None:
    ensure_topics(kafka, {TOPICS["input"]: 1, TOPICS["predictions"]: 1, TOPICS["stats"]: 1,
                          TOPICS["dead_letter"]: 1})


class PacedProducer(threading.Thread):
    """Sends ``values`` to the input topic (``topic``) at ``rate`` records/s (idempotent
    producer, ``acks=all``)."""

    def __init__(self, kafka: KafkaSettings, values: list[bytes], rate: float,
                 topic: str = TOPICS["input"]) -> None:
        super().__init__(daemon=True)
        self.kafka, self.values, self.rate, self.topic = kafka, values, rate, topic
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            producer = KafkaProducer(**client_config(self.kafka), acks="all", linger_ms=5,
                                     enable_idempotence=True)
            try:
                started = time.monotonic()
                for i, value in enumerate(self.values):
                    producer.send(self.topic, key=str(i).encode(), value=value)
                    self.sent += 1
                    ahead = self.sent / self.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                producer.flush(timeout=120)
            finally:
                producer.close(timeout=30)
        except BaseException as exc:  # reported by the test
            self.error = exc


def _paced_run(own_broker: EmbeddedBroker, kafka: KafkaSettings, n: int, ckpt_dir: Path,
               seed: int, **checkpoint: object) -> tuple[Settings, PacedProducer]:
    """The topics, a worker's settings (checkpoints every 1,000 records or second, and any other
    ``checkpoint`` settings) and a producer of ``n`` records paced at 4,000 rec/s, not started."""
    _create_topics(kafka)
    values = encode_stream(noisy_stream(n, d=8, noise=0.1, seed=seed))
    settings = fault_settings(kafka, TOPICS, ckpt_dir,
                              checkpoint={"every_examples": 1000, "every_seconds": 1, **checkpoint},
                              stats={"every_examples": 500, "every_seconds": 1})
    return settings, PacedProducer(_kafka(own_broker.bootstrap), values, rate=4000)


def _freeze_once_seen(own_broker: EmbeddedBroker, producer: PacedProducer, tail: LogTail,
                      seen: int, proc: subprocess.Popen[bytes], log: Path) -> int:
    """Start the paced producer, wait until the worker has seen ``seen`` records, then SIGSTOP
    the broker; returns where the log stood at the freeze."""
    producer.start()
    wait_until(lambda: tail.poll().seen >= seen, 60, "progress before the freeze", alive=proc, log=log)
    _freeze(own_broker.pid)
    return len(tail.text)


def _catch_up(producer: PacedProducer, settings: Settings, tmp_path: Path) -> None:
    """Once the broker is back: wait for the paced producer, then run a worker with
    ``--until-caught-up`` to the end of the input."""
    producer.join(timeout=120)
    assert not producer.is_alive() and producer.error is None, producer.error
    run_until_caught_up(settings, tmp_path / "final.log", timeout_s=90)


def assert_exact_against_input(kafka: KafkaSettings, ckpt_dir: Path, n: int,
                               topics: dict[str, str] = TOPICS) -> dict[str, int]:
    """The input topic holds ``n`` records; the newest checkpoint equals the core over them
    (nothing lost, nothing applied twice); a prediction for every offset, its copies identical
    and equal to the core's score; the group committed ``n``. Returns the counts."""
    rows = [(v["x"], v["y"]) for _, _, _, v in read_topic(kafka, topics["input"])]
    assert len(rows) == n, f"the input topic holds {len(rows)} records, {n} were sent"
    model, ref = core_reference(rows, [y for _, y in rows])
    ckpt = DirectoryStore(ckpt_dir).load(topics["input"], 0)
    assert ckpt is not None
    assert ckpt.offsets == {topics["input"]: {0: n}}
    assert ckpt.stats["seen"] == n  # nothing lost, nothing applied twice
    assert ckpt.model["weights"] == model.weights.tolist()
    assert ckpt.model["intercept"] == model.intercept
    assert ckpt.model["mistakes"] == model.mistakes
    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(0, o) for o in range(n)]
    extra = 0
    for (_, offset), copies in preds.items():
        assert all(c == copies[0] for c in copies), offset
        assert copies[0]["score"] == ref.scores[offset]
        extra += len(copies) - 1
    assert committed(kafka, topics["input"]) == {0: n}
    return {"records": n, "predictions": sum(map(len, preds.values())), "offsets predicted": len(preds),
            "mistakes": model.mistakes, "re-emitted predictions": extra}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("backend", BACKENDS)
def test_broker_frozen_for_15_s_while_the_worker_processes(own_broker, tmp_path, backend):
    """SIGSTOP the broker mid-stream for STALL_S (15 s), then SIGCONT: the worker keeps running, logs the
    trouble, recovers by itself, and ends exactly like the core (nothing lost, nothing twice)."""
    # requests time out within the freeze, so the worker has its trouble to tell while it lasts
    kafka = _kafka(own_broker.bootstrap, request_timeout_ms=5_000, backend=backend)
    _create_topics(kafka)
    n = 40_000
    values = encode_stream(noisy_stream(n, d=8, noise=0.1, seed=21))
    ckpt_dir = tmp_path / "ckpt"
    settings = fault_settings(kafka, TOPICS, ckpt_dir,
                              checkpoint={"every_examples": 2000, "every_seconds": 5},
                              stats={"every_examples": 500, "every_seconds": 1})
    producer = PacedProducer(kafka, values, rate=4000)  # ~10 s of input, the stall in between
    log = tmp_path / "worker.log"
    proc = start_worker(settings, log=log)
    tail = LogTail(log)
    try:
        producer.start()
        wait_until(lambda: tail.poll().seen >= 8000, 60, "progress before the stall",
                   alive=proc, log=log)
        _freeze(own_broker.pid)
        frozen_at, seen_at_stop = time.monotonic(), tail.poll().seen
        mark = len(tail.text)
        time.sleep(STALL_S)  # deliberate fault timing: the broker is frozen
        assert proc.poll() is None, "the worker exited while the broker was frozen"
        os.kill(own_broker.pid, signal.SIGCONT)
        during = tail.poll().text[mark:].decode(errors="replace")
        resumed = time.monotonic()
        wait_until(lambda: tail.poll().seen > max(seen_at_stop, 0) + 1000, 90,
                   "progress after the stall", alive=proc, log=log)
        recovered_s = time.monotonic() - resumed
        producer.join(timeout=120)
        assert not producer.is_alive() and producer.error is None, producer.error
        wait_until(lambda: tail.poll().seen >= n, 90, "every record", alive=proc, log=log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        reap(proc)
    # it said what was wrong while the broker was away (one line per problem, not silence)
    trouble = trouble_lines(during)
    own = own_lines(during)
    assert own, "the worker said nothing while the broker was frozen:\n" + during[-3000:]
    figures = assert_exact_against_input(kafka, ckpt_dir, n)
    print(f"\n{backend}: frozen {STALL_S:.0f} s at seen={seen_at_stop} (t={frozen_at:.0f}); progress again "
          f"{recovered_s:.1f} s after SIGCONT; {figures}; {len(trouble)} warning/error lines, "
          f"the worker's own: {own[:3]}")


# On confluent-kafka this also checks D56 (docs/reliability.md): a synchronous commit after a
# checkpoint held the worker silently for as long as the coordinator was frozen (5 of 12 runs).
@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_worker_killed_while_the_broker_is_frozen_loses_no_prediction(own_broker, tmp_path, backend):
    """Durable before committed, under broker trouble: freeze the broker mid-stream, wait until
    the worker's checkpoint is held up by outputs the broker has not acknowledged, then kill -9
    the worker. A checkpoint written past them would cover predictions that died with the
    process; the restart must instead replay from the last durable checkpoint, and every offset
    ends with its prediction, the model exactly the core's."""
    # A 6 s session: the next checkpoint falls due within 1 s of the freeze and its flush gives up
    # 3 s later, both before librdkafka drops an assignment whose coordinator stays silent past
    # the session (with 1 s the two raced, and a worker that lost its partition first had no
    # checkpoint left to hold up)
    kafka = _kafka(own_broker.bootstrap, request_timeout_ms=3_000, session_timeout_ms=6_000,
                   heartbeat_interval_ms=1_000, backend=backend)
    n, ckpt_dir = 12_000, tmp_path / "ckpt"
    settings, producer = _paced_run(own_broker, kafka, n, ckpt_dir, seed=23)
    log = tmp_path / "worker.log"
    proc = start_worker(settings, log=log)
    tail = LogTail(log)
    try:
        mark = _freeze_once_seen(own_broker, producer, tail, 3000, proc, log)
        try:
            # Checkpoints fall due every second, and a flush gives up a round after
            # request_timeout_ms (3 s) and says so: kill once it has. (A freeze that lands in the
            # commit after a checkpoint retries that first; the kill then comes later.) Without
            # such a line by the deadline the kill comes anyway, and the assertions below fail.
            deadline = time.monotonic() + 75

            def waiting() -> bool:
                text = tail.poll().text[mark:].decode(errors="replace")
                return any("not acknowledged" in ln for ln in own_lines(text))

            while time.monotonic() < deadline and not waiting():
                assert proc.poll() is None, "the worker exited while the broker was frozen"
                time.sleep(0.1)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            os.kill(own_broker.pid, signal.SIGCONT)
        during = tail.poll().text[mark:].decode(errors="replace")
        killed_at = tail.seen
        _catch_up(producer, settings, tmp_path)
    finally:
        reap(proc)
    figures = assert_exact_against_input(kafka, ckpt_dir, n)
    # the kill landed while a checkpoint waited for acknowledgements, in the worker's own words
    assert any("not acknowledged" in ln for ln in own_lines(during)), during[-3000:]
    print(f"\n{backend}: killed at seen={killed_at} while a checkpoint waited; {figures}")


def _sigterm_while_frozen(own_broker: EmbeddedBroker, settings: Settings, producer: PacedProducer,
                          tmp_path: Path) -> tuple[int, float, str]:
    """Start a worker; once it has seen 2,000 records freeze the broker, SIGTERM it 0.5 s later
    and wait for its exit; then thaw the broker and catch up with a worker whose shutdown has
    the default bound. Returns the exit code, the seconds from the signal to the exit, and the
    worker's log from the signal on."""
    log = tmp_path / "worker.log"
    proc = start_worker(settings, log=log)
    tail = LogTail(log)
    try:
        mark = _freeze_once_seen(own_broker, producer, tail, 2000, proc, log)
        try:
            time.sleep(0.5)  # deliberate fault timing: a checkpoint falls due meanwhile
            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=90)
            stopped_s = time.monotonic() - signalled
        finally:
            os.kill(own_broker.pid, signal.SIGCONT)
        after = tail.poll().text[mark:].decode(errors="replace")
        after = after[after.index("SIGTERM: finishing the batch"):]
        default = settings.checkpoint.model_copy(
            update={"shutdown_timeout_s": CheckpointSettings().shutdown_timeout_s})
        _catch_up(producer, settings.model_copy(update={"checkpoint": default}), tmp_path)
    finally:
        reap(proc)
    return code, stopped_s, after


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_while_the_broker_is_frozen_makes_one_shutdown_try_and_loses_nothing(
        own_broker, tmp_path, backend):
    """SIGTERM with the broker frozen: each checkpoint attempt then costs a round of flush
    retries, so the worker makes one, the shutdown's (no interval checkpoint first, no second try
    in the revocation that closing runs), and exits 1 with the previous checkpoint standing. A
    restart once the broker is back ends exactly like the core."""
    # A 3 s session: the partition is not lost before the signal, so closing revokes it.
    kafka = _kafka(own_broker.bootstrap, request_timeout_ms=1_000, session_timeout_ms=3_000,
                   heartbeat_interval_ms=500, backend=backend)
    n, ckpt_dir = 8_000, tmp_path / "ckpt"
    settings, producer = _paced_run(own_broker, kafka, n, ckpt_dir, seed=29)
    code, stopped_s, after = _sigterm_while_frozen(own_broker, settings, producer, tmp_path)
    print(f"\n{backend}: exit {code} {stopped_s:.1f} s after SIGTERM, the broker frozen")
    assert code == 1, after[-3000:]
    postponed = [ln for ln in own_lines(after) if "postponed" in ln]
    # at most the checkpoint in progress when the signal came, then the shutdown's
    assert 1 <= len(postponed) <= 2 and "checkpoint (shutdown) postponed" in postponed[-1], postponed
    assert "the shutdown checkpoint failed a moment ago; not tried again" in after, after[-3000:]
    assert "]: checkpointing" not in after  # the revocation did not try ("revoked [...]: ...")
    figures = assert_exact_against_input(kafka, ckpt_dir, n)
    print(f"\n{figures}")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_shutdown_past_its_deadline_exits_1_at_the_deadline_and_loses_nothing(
        own_broker, tmp_path, backend):
    """SIGTERM with the broker frozen and a 5 s request timeout: the checkpoint in progress, the
    shutdown's round of flush retries and closing would take some 35 s. With
    ``shutdown_timeout_s`` 3 the worker says it is giving up the shutdown, and what it was
    waiting for, 3 s after the signal, and exits 1; a restart once the broker is back ends
    exactly like the core."""
    kafka = _kafka(own_broker.bootstrap, request_timeout_ms=5_000, session_timeout_ms=3_000,
                   heartbeat_interval_ms=500, backend=backend)
    n, ckpt_dir, deadline_s = 8_000, tmp_path / "ckpt", 3.0
    settings, producer = _paced_run(own_broker, kafka, n, ckpt_dir, seed=31,
                                    shutdown_timeout_s=deadline_s)
    code, stopped_s, after = _sigterm_while_frozen(own_broker, settings, producer, tmp_path)
    print(f"\n{backend}: exit {code} {stopped_s:.1f} s after SIGTERM, the broker frozen")
    assert code == 1, after[-3000:]
    assert deadline_s <= stopped_s < deadline_s + 5, (stopped_s, after[-3000:])
    overran = [ln for ln in own_lines(after) if "shutdown not done" in ln]
    assert len(overran) == 1 and " ERROR " in overran[0], after[-3000:]
    assert re.search(r"after SIGTERM \(SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S=3\), while (writing the"
                     r" (interval|shutdown) checkpoint|committing|finishing the batch|closing the"
                     r" Kafka)", overran[0]), overran[0]
    resumes_from = overran[0].split("exiting 1 now; a restart resumes from ")[1].strip()
    resumes_from = resumes_from.split(" from ", 1)[1]  # "<topic>[0] from <its newest file>"
    restored = (tmp_path / "final.log").read_text()
    assert f"restored {resumes_from}:" in restored, (resumes_from, restored[-3000:])
    assert "stopped: " not in after  # the shutdown never finished: the process ended mid-wait
    figures = assert_exact_against_input(kafka, ckpt_dir, n)
    print(f"\n{overran[0]}\n{figures}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_idle_worker_says_so_when_the_broker_freezes(own_broker, tmp_path, backend):
    """No input at all, so the model and offsets never change and there is no checkpoint to
    write; the broker is then frozen. The statistics records the worker keeps publishing go
    unacknowledged, and its checkpoint interval says so in the worker's own log line, without
    waiting for input that cannot come."""
    kafka = _kafka(own_broker.bootstrap, request_timeout_ms=5_000, backend=backend)
    _create_topics(kafka)
    settings = fault_settings(kafka, TOPICS, tmp_path / "ckpt",
                              checkpoint={"every_examples": 1000, "every_seconds": 1},
                              stats={"every_examples": 1000, "every_seconds": 0.5})
    log = tmp_path / "worker.log"
    proc = start_worker(settings, log=log)
    tail = LogTail(log)
    try:
        # the statistics line counts the partitions it published for: one, the input's (a first
        # assignment can be empty while the broker's metadata lacks the new topic)
        wait_until(lambda: b"1 partitions: seen 0" in tail.poll().text and tail.seen == 0, 60,
                   "the worker assigned and publishing statistics", alive=proc, log=log)
        time.sleep(1.5)  # a few statistics records and checkpoint intervals while the broker answers
        assert not own_lines(tail.poll().text.decode(errors="replace"))
        _freeze(own_broker.pid)
        frozen, mark = time.monotonic(), len(tail.text)

        def own_since_frozen() -> list[str]:
            return own_lines(tail.poll().text[mark:].decode(errors="replace"))

        try:
            # confluent-kafka's edge may first pass on the client's "all brokers down"; the line
            # this is about is the checkpoint interval's
            wait_until(lambda: any("not acknowledged" in ln for ln in own_since_frozen()), 40,
                       "the worker's own warning while the broker is frozen", alive=proc, log=log)
            said_s = time.monotonic() - frozen
        finally:
            os.kill(own_broker.pid, signal.SIGCONT)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        reap(proc)
    own = own_since_frozen()
    assert any("not acknowledged" in ln for ln in own), own
    assert DirectoryStore(tmp_path / "ckpt").load(TOPICS["input"], 0) is None  # nothing to write
    said = next(ln for ln in own if "not acknowledged" in ln)
    print(f"\nthe worker said so {said_s:.1f} s into the freeze: {said}")


# How long a commit holds the worker's loop while the broker is frozen. confluent-kafka hands it
# to librdkafka and returns at once (its synchronous commit has no timeout: D56); kafka-python
# waits request_timeout_ms an attempt, then gives up (the worker logs it; the checkpoint stands).
COMMIT_FROZEN_AT_MOST_S = {"kafka-python": 2 * 2.0 + 0.25 + 2.0, "confluent-kafka": 0.5}


def _assigned_edge(own_broker: EmbeddedBroker, backend: str, request_timeout_ms: int
                   ) -> tuple[KafkaSettings, Edge]:
    """A started edge of ``backend`` (2 attempts a call) holding the one partition of ``in``."""
    kafka = _kafka(own_broker.bootstrap, request_timeout_ms=request_timeout_ms, backend=backend)
    ensure_topics(kafka, {"in": 1})
    edge = new_edge(kafka, "in", retry=Retry(attempts=2))
    edge.start()
    deadline = time.monotonic() + 30
    while not edge.assignment():
        if time.monotonic() > deadline:
            edge.close()
            raise AssertionError("never assigned")
        edge.poll(timeout_ms=200, max_records=10)
    return kafka, edge


def _commit_into(edge: Edge, offsets: dict[Partition, int], errors: list[KafkaEdgeError],
                 assigned: list[list[Partition]] | None = None) -> None:
    """``edge.commit(offsets)``, its error kept in ``errors``, and in ``assigned`` the edge's
    assignment as the commit began (a partition not assigned is skipped, not committed)."""
    if assigned is not None:
        assigned.append(edge.assignment())
    try:
        edge.commit(offsets)
    except KafkaEdgeError as exc:
        errors.append(exc)


def _freeze(pid: int, timeout_s: float = 5.0) -> None:
    """SIGSTOP the process and return once every thread of it is stopped: a request sent after
    this call is answered only after SIGCONT."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    while not stopped(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"pid {pid} is not stopped {timeout_s} s after SIGSTOP")
        time.sleep(0.01)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_commit_while_the_broker_is_frozen_holds_the_loop_a_bounded_time(own_broker, backend):
    """The edge's commit with the coordinator frozen returns within its bound, and polls go on;
    on confluent-kafka the commit is in place once the broker is back and the edge has closed."""
    kafka, edge = _assigned_edge(own_broker, backend, request_timeout_ms=2_000)
    assigned: list[list[Partition]] = []
    try:
        edge.commit({("in", 0): 3})
        _freeze(own_broker.pid)
        try:
            # on a thread of its own, so that a commit that never returns fails the test
            errors: list[KafkaEdgeError] = []
            committing = threading.Thread(target=_commit_into, daemon=True,
                                          args=(edge, {("in", 0): 7}, errors, assigned))
            started = time.monotonic()
            committing.start()
            committing.join(COMMIT_FROZEN_AT_MOST_S[backend])
            held_s = time.monotonic() - started
            assert not committing.is_alive(), f"the commit held the loop over {held_s:.1f} s"
            polled = time.monotonic()
            for _ in range(5):
                edge.poll(timeout_ms=200, max_records=10)
            polls_s = time.monotonic() - polled
        finally:
            os.kill(own_broker.pid, signal.SIGCONT)
            committing.join(60)
    finally:
        edge.close()
    error = errors[0] if errors else None
    print(f"\n{backend}: commit held the loop {held_s:.2f} s ({error or 'no error'});"
          f" 5 polls of 200 ms took {polls_s:.2f} s")
    assert assigned == [[("in", 0)]], f"the partition was not assigned as the commit began: {assigned}"
    assert polls_s < 5 * 0.2 + 2.0
    if backend == "confluent-kafka":
        assert error is None
        with started_edge(kafka, "in") as fresh:
            assert fresh.committed("in", 0) == 7
    else:
        assert error is not None and "commit" in str(error)


# How long close() may take with the broker frozen right after a commit: librdkafka's close
# waited for the commit in flight until the broker was back (D58); the confluent-kafka edge
# leaves it behind 2 × request_timeout_ms (2 s here) after its last callback. kafka-python's
# commit is synchronous and has given up before close() is called.
CLOSE_FROZEN_AT_MOST_S = 10.0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
def test_close_with_the_broker_frozen_after_a_commit_returns_within_its_bound(own_broker, backend):
    """Freeze the broker, commit, close: close() returns within its bound (on confluent-kafka
    with the commit still in flight), and the edge can be replaced by a new one that reads the
    group's offsets once the broker is back."""
    kafka, edge = _assigned_edge(own_broker, backend, request_timeout_ms=1_000)
    closing: threading.Thread | None = None
    try:
        edge.commit({("in", 0): 3})
        _freeze(own_broker.pid)
        try:
            errors: list[KafkaEdgeError] = []
            _commit_into(edge, {("in", 0): 7}, errors)
            # on a thread of its own, so that a close that never returns fails the test
            closing = threading.Thread(target=edge.close, daemon=True)
            started = time.monotonic()
            closing.start()
            closing.join(CLOSE_FROZEN_AT_MOST_S)
            took_s = time.monotonic() - started
            assert not closing.is_alive(), f"close() still waits after {took_s:.1f} s"
        finally:
            os.kill(own_broker.pid, signal.SIGCONT)
    finally:
        if closing is None:
            edge.close()
    print(f"\n{backend}: close() took {took_s:.2f} s with the broker frozen"
          f" ({errors[0] if errors else 'the commit in flight'})")
    with started_edge(kafka, "in") as fresh:
        assert fresh.committed("in", 0) in (3, 7)  # the first for sure; the second if it landed


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
def test_broker_unreachable_at_start_then_appears(tmp_path, backend):
    """Start the worker against a port where nothing listens; it must retry with backoff, log
    clearly and stay up; then a broker starts on that port and nothing is lost or doubled."""
    port = free_port()
    kafka = _kafka(f"127.0.0.1:{port}", backend=backend)
    ckpt_dir = tmp_path / "ckpt"
    settings = fault_settings(kafka, TOPICS, ckpt_dir,
                              stats={"every_examples": 500, "every_seconds": 1})
    log = tmp_path / "worker.log"
    proc = start_worker(settings, log=log)
    broker = None
    try:
        # the worker runs with no broker until it has retried three times (its start-up, imports
        # included, takes a while on a loaded machine: the wait is for the lines, not a clock)
        wait_until(lambda: len(trouble_lines(log.read_text(), f"127.0.0.1:{port}")) >= 3, 30,
                   "three retry lines naming the address", alive=proc, log=log)
        time.sleep(1)  # and goes on retrying
        assert proc.poll() is None, (
            f"the worker exited ({proc.returncode}) with no broker:\n{log.read_text()[-3000:]}")
        text = log.read_text()
        retries = trouble_lines(text, f"127.0.0.1:{port}")
        delays = [float(d) for d in re.findall(r"retrying in ([0-9.]+) s", "\n".join(retries))]
        assert len(delays) >= 3 and delays == sorted(delays) and delays[-1] > delays[0], (
            f"no backoff: {delays}")
        assert "Traceback" not in text
        broker = EmbeddedBroker(port=port)
        broker.start()
        _create_topics(kafka)
        n = 5000
        values = encode_stream(noisy_stream(n, d=8, noise=0.1, seed=22))
        producer = PacedProducer(kafka, values, rate=1e9)
        producer.run()
        assert producer.error is None, producer.error
        tail = LogTail(log)
        wait_until(lambda: tail.poll().seen >= n, 60, "every record", alive=proc, log=log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
        assert_exact_against_input(kafka, ckpt_dir, n)
    finally:
        reap(proc)
        if broker is not None:
            broker.stop()
