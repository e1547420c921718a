"""When the worker must not checkpoint: a batch that raised half-way, and outputs the edge gave up.
An in-memory edge stands in for Kafka (the broker-backed versions are in tests/faults)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.errors import KafkaEdgeError, UndeliveredError
from stream_perceptron.kafka.edge import Batch, EdgeBase, InRecord, Retry, Unsent
from stream_perceptron.settings import KafkaSettings, Settings
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.worker.loop import Worker
from stream_perceptron.worker.observe import Observer


class _OneInputPartition:
    """The consumer side of an edge holding partition 0 of ``in``; commits noted in ``commits``."""

    commits: list[dict]

    transactional = False  # the at-least-once mode
    in_transaction = False

    def assignment(self):
        return [("in", 0)]

    def commit(self, offsets):
        self.commits.append(dict(offsets))

    def highwater(self, topic, partition):
        return None

    def committed(self, topic, partition):
        return None

    def seek(self, topic, partition, offset):
        pass

    def log_suppressed(self):
        pass


class FailingEdge(_OneInputPartition):
    """Accepts records; ``send_many`` raises on call number ``fail_send``, ``flush`` raises
    ``flush_error`` once."""

    def __init__(self, fail_send: int | None = None, flush_error: Exception | None = None) -> None:
        self.fail_send, self.flush_error = fail_send, flush_error
        self.sends, self.flushes, self.commits = 0, 0, []

    def send(self, topic, key, value):
        self.send_many(topic, [key], [value])

    def send_many(self, topic, keys, values):
        self.sends += 1
        if self.sends == self.fail_send:
            raise KafkaEdgeError("sending to predictions failed: MessageSizeTooLargeError")

    def flush(self):
        self.flushes += 1
        error, self.flush_error = self.flush_error, None
        if error is not None:
            raise error


def _batch(start: int, n: int) -> Batch:
    records = [InRecord("in", 0, i, None, input_record([1.0, float(i % 7) - 3.0], 1 if i % 2 else -1, i), 0)
               for i in range(start, start + n)]
    return Batch.of(records)


def _worker(tmp_path, edge) -> Worker:
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)})
    return Worker(settings, edge=edge)  # type: ignore[arg-type]


def test_a_batch_that_raised_half_way_is_never_checkpointed(tmp_path, caplog):
    edge = FailingEdge(fail_send=4)  # the second chunk's predictions of the second batch
    w = _worker(tmp_path, edge)
    for chunk in _batch(0, 20).chunks(10):  # as run() cuts a poll batch: sends 1 and 2
        w.process(chunk)
    assert w.checkpoint("interval")
    saved = DirectoryStore(tmp_path).load("in", 0)
    assert saved.offsets == {"in": {0: 20}}
    with pytest.raises(KafkaEdgeError):
        for chunk in _batch(20, 20).chunks(10):
            w.process(chunk)  # the first chunk finishes (send 3); the second learns, then raises
    assert w.offsets == {"in": {0: 30}}  # the second chunk's rows were learned, its offsets not
    assert not w.checkpoint("shutdown")
    assert not w.checkpoint("revocation")  # as edge.close() would call it
    assert DirectoryStore(tmp_path).load("in", 0).offsets == {"in": {0: 20}}
    assert edge.commits == [{("in", 0): 20}]
    assert "did not finish" in caplog.text and not w.checkpoint_ok


def test_outputs_given_up_stop_the_worker_and_no_checkpoint_covers_them(tmp_path, caplog):
    edge = FailingEdge(flush_error=UndeliveredError("1 records could not be delivered"))
    w = _worker(tmp_path, edge)
    w.process(_batch(0, 10))
    assert not w.checkpoint("interval")
    assert w.shutdown.asked  # the run loop ends; run() returns 1 from the refused final checkpoint
    w.process(_batch(10, 10))  # a batch already polled still finishes
    assert not w.checkpoint("shutdown")  # a flush would succeed now: the records are gone anyway
    assert edge.flushes == 1 and edge.commits == []
    assert DirectoryStore(tmp_path).load("in", 0) is None
    assert "outputs since the last checkpoint were given up" in caplog.text


def test_an_idle_worker_still_confirms_its_statistics_records(tmp_path, caplog):
    edge = FailingEdge()
    w = _worker(tmp_path, edge)
    w.process(_batch(0, 10))
    assert w.checkpoint("interval") and edge.flushes == 1
    assert w.checkpoint("interval") and edge.flushes == 1  # nothing sent since: nothing to do
    w.publish_stats()  # idle, so the model and offsets stay as checkpointed
    edge.flush_error = KafkaEdgeError("flush failed after 5 attempts")
    assert not w.checkpoint("interval")  # the broker does not acknowledge: said, not silent
    assert edge.flushes == 2 and "outputs not acknowledged" in caplog.text
    assert w.checkpoint("interval") and edge.flushes == 3  # the same records, confirmed now
    assert w.checkpoint("interval") and edge.flushes == 3
    stored = sorted((tmp_path / "partitions/in/0").glob("ckpt-*.json"))
    assert [c.name for c in stored] == ["ckpt-000000000001.json"]
    assert edge.commits == [{("in", 0): 10}] and w.counters.checkpoints == 1


def test_an_idle_worker_is_ready_again_once_its_statistics_records_are_confirmed(tmp_path):
    edge = FailingEdge()
    settings = Settings(observe={"enabled": True, "host": "127.0.0.1", "port": 0},
                        checkpoint={"dir": str(tmp_path)})
    w = Worker(settings, edge=edge)  # type: ignore[arg-type]
    with w.observer:
        w.observer.polled()
        w.observer.assigned([("in", 0)])
        w.process(_batch(0, 10))
        assert w.checkpoint("interval") and w.observer.readiness()[0]
        w.publish_stats()
        edge.flush_error = KafkaEdgeError("flush failed after 5 attempts")
        assert not w.checkpoint("interval")
        assert w.observer.readiness() == (False, "the last checkpoint failed")
        assert w.checkpoint("interval")  # confirmed now; nothing new to write
        assert w.observer.readiness()[0], w.observer.readiness()


def test_a_transient_flush_failure_only_postpones_the_checkpoint(tmp_path):
    edge = FailingEdge(flush_error=KafkaEdgeError("flush failed after 5 attempts"))
    w = _worker(tmp_path, edge)
    w.process(_batch(0, 10))
    assert not w.checkpoint("interval")
    assert not w.shutdown.asked
    assert w.checkpoint("interval")
    assert DirectoryStore(tmp_path).load("in", 0).offsets == {"in": {0: 10}}


class _RoundEdge(EdgeBase):
    """An edge whose one flush round reports a permanent and two transient failures."""

    def _init_client_state(self) -> None:
        self.resent: list[bytes] = []
        self.replaced = 0

    def send_many(self, topic, keys, values):
        self.resent += list(values)

    def _flush_once(self):
        self._unsent = [Unsent("p", None, b"huge", False, "MessageSizeTooLarge"),
                        Unsent("p", None, b"a", True, "NotEnoughReplicas"),
                        Unsent("p", None, b"b", True, "NotEnoughReplicas")]
        return self._settle_unsent()

    def _replace_producer(self):
        self.replaced += 1

    def _retriable(self, exc):
        return None


def test_a_permanent_failure_gives_up_the_whole_round_and_says_so():
    edge = _RoundEdge(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", print, print)
    with pytest.raises(UndeliveredError, match=r"could not be delivered.*\(2 more failed transiently\)"):
        edge.flush()
    assert edge.replaced == 1 and edge.resent == [] and edge._unsent == []


class _UnansweredEdge(EdgeBase):
    """Every flush round leaves records unacknowledged (a frozen broker)."""

    def _init_client_state(self) -> None:
        self.rounds = 0

    def _flush_once(self):
        self.rounds += 1
        return "3 records not acknowledged within 1000 ms"


def test_a_flush_gives_up_without_retrying_once_a_stop_is_asked():
    edge = _UnansweredEdge(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", print, print,
                           retry=Retry(attempts=4, backoff_s=0.01))
    with pytest.raises(KafkaEdgeError, match="flush failed after 4 attempts"):
        edge.flush()
    assert edge.rounds == 4
    asked = iter([False, True])  # the stop comes during the second round
    stopped = _UnansweredEdge(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", print, print,
                              retry=Retry(attempts=4, backoff_s=0.01), stopping=lambda: next(asked))
    with pytest.raises(KafkaEdgeError, match="flush given up after 2 of 4 attempts, a stop was asked"):
        stopped.flush()
    assert stopped.rounds == 2


def test_the_worker_stops_a_flush_only_between_the_stop_and_its_shutdown(tmp_path):
    w = _worker(tmp_path, FailingEdge())
    edge = _UnansweredEdge(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", print, print)
    assert w.shutdown.pending is False
    w.stop()
    assert w.shutdown.pending is True  # an interval or revocation checkpoint in progress
    w.shutdown.begun = True
    assert w.shutdown.pending is False  # the shutdown's own checkpoint flushes in full
    real = Worker(Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path / "r")}))
    assert real.edge.stopping() is False  # the edge the worker opens asks it
    real.stop()
    assert real.edge.stopping() is True
    real.shutdown.begun = True
    assert real.edge.stopping() is False
    assert edge.stopping() is False  # an edge on its own never gives up early


class _OutageEdge(_OneInputPartition, EdgeBase):
    """Outputs fail transiently in the first flush round; while the outage lasts, the resends
    after the first ``resends_before_outage`` raise (as a send that timed out on metadata does)."""

    def _init_client_state(self) -> None:
        self.pending: list[bytes] = []
        self.delivered: list[bytes] = []
        self.rounds = 0
        self.outage = False
        self.resends_before_outage = 1
        self.commits: list[dict] = []

    def send_many(self, topic, keys, values):
        for value in values:
            if self.outage:
                if not self.resends_before_outage:
                    raise KafkaEdgeError(f"sending to {topic} failed: KafkaTimeoutError")
                self.resends_before_outage -= 1
            self.pending.append(value)

    def _flush_once(self):
        self.rounds += 1
        pending, self.pending = self.pending, []
        if self.rounds == 1:
            self._unsent = [Unsent("predictions", None, v, True, "RequestTimedOutError") for v in pending]
            self.outage = True
        else:
            self.delivered += pending
        return self._settle_unsent()

    def _replace_producer(self):
        raise AssertionError("no permanent failure here")

    def _retriable(self, exc):
        return None


def test_records_whose_resend_failed_are_kept_and_sent_before_the_next_checkpoint(tmp_path):
    edge = _OutageEdge(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", print, print,
                       retry=Retry(attempts=3, backoff_s=0.0))
    w = _worker(tmp_path, edge)
    w.process(_batch(0, 10))
    sent = list(edge.pending)
    assert len(sent) == 10
    assert not w.checkpoint("interval")  # one record resent, then the resends failed
    assert [u.value for u in edge._unsent] == sent[1:]  # kept, in order, for the next flush
    edge.outage = False
    assert w.checkpoint("interval")
    assert sorted(edge.delivered) == sorted(sent)  # every prediction acknowledged before ...
    assert DirectoryStore(tmp_path).load("in", 0).offsets == {"in": {0: 10}}  # ... their offsets
    assert edge.commits == [{("in", 0): 10}]


def test_a_resend_that_fails_keeps_the_rest_ahead_of_failures_reported_meanwhile():
    edge = _OutageEdge(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", print, print)
    later = Unsent("predictions", None, b"later", True, "RequestTimedOutError")
    failed = [Unsent("predictions", None, v, True, "RequestTimedOutError") for v in (b"a", b"b", b"c")]
    edge._unsent = list(failed)
    edge.outage = True
    original = edge.send_many

    def send_many(topic, keys, values):  # a delivery report arrives during the first resend
        if later not in edge._unsent:
            edge._unsent.append(later)
        original(topic, keys, values)

    edge.send_many = send_many  # type: ignore[method-assign]
    with pytest.raises(KafkaEdgeError, match="KafkaTimeoutError"):
        edge._settle_unsent()
    assert edge.pending == [b"a"]
    assert [u.value for u in edge._unsent] == [b"b", b"c", b"later"]


class _UnreachableEdge(_OneInputPartition):
    commits: list[dict] = []

    def start(self):
        raise KafkaEdgeError("cannot reach Kafka at 127.0.0.1:1")


def test_the_worker_stays_alive_while_it_waits_for_kafka(tmp_path, monkeypatch):
    # the backoff between attempts doubles up to 30 s; /healthz must hear from the worker
    # throughout, or an orchestrator kills a worker that is only waiting for its cluster
    settings = Settings(observe={"enabled": True, "host": "127.0.0.1", "port": 0},
                        checkpoint={"dir": str(tmp_path)})
    w = Worker(settings, edge=_UnreachableEdge())  # type: ignore[arg-type]
    monkeypatch.setattr(w, "_check_topics", lambda: None)
    beats: list[float] = []
    monkeypatch.setattr(w.observer, "polled", lambda: beats.append(time.monotonic()))
    stopper = threading.Timer(3.6, w.stop)  # after the backoffs of 0.5, 1 and 2 s
    stopper.start()
    try:
        assert w._start_edge() is False
    finally:
        stopper.cancel()
    assert len(beats) >= 5
    assert max(b - a for a, b in zip(beats, beats[1:], strict=False)) < 1.5  # not once per 2 s backoff


class _StoppedDuringPollEdge(FailingEdge):
    """Every flush fails (a frozen broker); the first poll returns a batch, and a stop is asked
    while it runs (a SIGTERM during a poll, or during the revocation checkpoint a poll runs).
    ``close`` revokes the partition, as leaving the group does. ``worker``: the worker it serves
    (set once the worker is built)."""

    def __init__(self) -> None:
        super().__init__()
        self.worker: Worker | None = None
        self.polls, self.closed = 0, False

    def start(self):
        pass

    def poll(self, timeout_ms, max_records):
        self.polls += 1
        self.worker.stop()
        return [_batch(0, 10)] if self.polls == 1 else []

    def flush(self):
        self.flushes += 1
        raise KafkaEdgeError("flush failed after 5 attempts: 10 records not acknowledged")

    def close(self):
        self.worker._on_revoked([("in", 0)])
        self.closed = True


def _stopped_during_poll(tmp_path, monkeypatch, owns_process: bool = False, edge_class=None,
                         observer=None, **checkpoint) -> tuple[Worker, _StoppedDuringPollEdge]:
    """A worker on a :class:`_StoppedDuringPollEdge` (or ``edge_class``), checkpointing to
    ``tmp_path``, not run yet."""
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path), **checkpoint})
    edge = (edge_class or _StoppedDuringPollEdge)()
    w = Worker(settings, edge=edge, owns_process=owns_process, observer=observer)  # type: ignore[arg-type]
    edge.worker = w
    monkeypatch.setattr(w, "_check_topics", lambda: None)
    return w, edge


def test_a_stop_during_a_poll_goes_straight_to_the_shutdown_checkpoint(tmp_path, monkeypatch, caplog):
    # Each checkpoint against a frozen broker costs a round of flush retries (a minute and more
    # with the default request timeout), so the shutdown makes one attempt: a checkpoint interval
    # has passed, but no interval checkpoint comes first, and the revocation close() runs does not
    # try again.
    caplog.set_level(logging.INFO, logger="stream_perceptron")
    w, edge = _stopped_during_poll(tmp_path, monkeypatch, every_seconds=0.1)
    time.sleep(0.2)  # the interval is due
    assert w.run() == 1  # the shutdown checkpoint could not be written
    assert edge.polls == 1 and edge.closed
    assert w.offsets == {"in": {0: 10}}  # the batch polled was finished
    assert edge.flushes == 1  # the shutdown checkpoint's only
    assert "checkpoint (shutdown) postponed" in caplog.text
    assert "checkpoint (interval)" not in caplog.text
    assert "the shutdown checkpoint failed a moment ago; not tried again" in caplog.text
    assert "checkpoint (revocation)" not in caplog.text
    assert DirectoryStore(tmp_path).load("in", 0) is None and edge.commits == []


def test_after_a_shutdown_checkpoint_the_revocation_still_hands_the_partitions_over(tmp_path, monkeypatch):
    # the shutdown checkpoint written, the revocation close() runs commits what was withheld
    w, edge = _stopped_during_poll(tmp_path, monkeypatch)
    edge.flush = lambda: None  # the broker answers
    assert w.run() == 0
    assert DirectoryStore(tmp_path).load("in", 0).offsets == {"in": {0: 10}}
    assert edge.commits and edge.commits[-1] == {("in", 0): 10}


class _SlowBrokerEdge(_OneInputPartition, EdgeBase):
    """Each flush round takes 25 s of ``clock`` and fails transiently, until ``failures`` ran out;
    ``alive`` records what /healthz would answer during each round."""

    def _init_client_state(self) -> None:
        self.commits: list[dict] = []
        self.failures = 4
        self.alive: list[bool] = []

    def send_many(self, topic, keys, values):
        pass

    def _flush_once(self):
        self.clock[0] += 25.0
        self.alive.append(self.observer.liveness()[0])
        if self.failures:
            self.failures -= 1
            return "1 record not acknowledged: RequestTimedOutError"
        return None

    def _replace_producer(self):
        raise AssertionError("no permanent failure here")

    def _retriable(self, exc):
        return None


def test_the_worker_stays_alive_while_a_flush_retries_against_a_slow_broker(tmp_path):
    # five rounds of 25 s, 125 s in all, against a liveness limit of 60 s: an orchestrator must
    # not kill a worker that is waiting for its broker (docs/deploy.md), only one that hangs
    from stream_perceptron.worker.observe import Observer

    clock = [0.0]
    observer = Observer(port=0, liveness_timeout_s=60.0, clock=lambda: clock[0])
    edge = _SlowBrokerEdge(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", print, print,
                           retry=Retry(attempts=5, backoff_s=0.0), heartbeat=observer.polled)
    w = Worker(Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)}), edge=edge,
               observer=observer)
    edge.clock, edge.observer = clock, observer
    w.observer._started_at = 0.0  # as start() would, without serving HTTP
    w.observer.polled()
    w.process(_batch(0, 10))
    assert w.checkpoint("interval")
    assert clock[0] == 125.0 and edge.alive == [True] * 5


class _FlakyCommits(EdgeBase):
    """Commits fail transiently twice, then succeed."""

    def _init_client_state(self) -> None:
        self.beats, self.attempts = 0, 0

    def _retriable(self, exc):
        return True

    def commit_once(self):
        self.attempts += 1
        if self.attempts < 3:
            raise RuntimeError("NotCoordinatorForGroup")


def test_each_retry_of_a_commit_or_send_reports_the_worker_alive():
    edge = _FlakyCommits(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", print, print,
                         retry=Retry(attempts=5, backoff_s=0.0),
                         heartbeat=lambda: setattr(edge, "beats", edge.beats + 1))
    edge._describe = str  # type: ignore[method-assign]
    edge._retrying("committing offsets", edge.commit_once)
    assert (edge.attempts, edge.beats) == (3, 3)


class _HangingFlushEdge(_StoppedDuringPollEdge):
    """The shutdown checkpoint's flush waits, as for a broker that never answers, until the
    test lets it fail."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def flush(self):
        self.flushes += 1
        self.release.wait(10)
        raise KafkaEdgeError("flush failed after 5 attempts: 10 records not acknowledged")


def _hanging_shutdown(tmp_path, monkeypatch, timeout_s: float, owns_process: bool = True,
                      edge_class=None, observer=None) -> tuple[Worker, _HangingFlushEdge, list]:
    """A worker whose shutdown hangs in its checkpoint's flush (or whatever ``edge_class`` makes
    it wait on), and the exits it asks for (the stand-in exit lets the edge go, so the test goes
    on where the process would have ended)."""
    w, edge = _stopped_during_poll(tmp_path, monkeypatch, owns_process, edge_class or _HangingFlushEdge,
                                   observer, shutdown_timeout_s=timeout_s)
    exits: list[tuple[int, float]] = []

    def exit_process(code: int) -> None:
        exits.append((code, time.monotonic()))
        edge.release.set()

    w.exit_process = exit_process  # type: ignore[method-assign]
    return w, edge, exits


def test_a_shutdown_past_its_deadline_says_so_and_exits_1(tmp_path, monkeypatch, caplog):
    # Against a frozen broker a shutdown waits for minutes of retries; past
    # SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S the worker exits 1 at once, as the grace period's SIGKILL
    # would, but with a line that says what it was waiting for and where a restart resumes.
    w, edge, exits = _hanging_shutdown(tmp_path, monkeypatch, 0.3)
    reported: list[int] = []  # the held-back client lines, written before the exit skips the CLI's
    edge.log_suppressed = lambda: reported.append(len(exits))  # type: ignore[method-assign]
    started = time.monotonic()
    w.run()
    assert reported[0] == 0  # before the exit
    assert [code for code, _ in exits] == [1]
    assert 0.3 <= exits[0][1] - started < 3.0
    line = next(r for r in caplog.records if "shutdown not done" in r.getMessage())
    assert line.levelno == logging.ERROR
    message = line.getMessage()
    assert "after the shutdown began (SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S=0.3)" in message
    assert "while writing the shutdown checkpoint (flushing the outputs first): exiting 1 now" in message
    assert "a restart resumes from in[0] from its start (no stored state yet)" in message
    assert edge.flushes == 1 and DirectoryStore(tmp_path).load("in", 0) is None


def test_a_shutdown_done_in_time_never_exits(tmp_path, monkeypatch):
    w, edge, exits = _hanging_shutdown(tmp_path, monkeypatch, 0.3)
    edge.release.set()  # the flush fails at once: the shutdown ends well within its deadline
    assert w.run() == 1
    time.sleep(0.5)
    assert exits == []


def test_a_worker_run_by_another_program_leaves_its_shutdown_to_it(tmp_path, monkeypatch):
    # the demo, or a test: exiting the process is not the worker's to do
    w, edge, exits = _hanging_shutdown(tmp_path, monkeypatch, 0.2, owns_process=False)
    codes: list[int] = []
    t = threading.Thread(target=lambda: codes.append(w.run()))
    t.start()
    time.sleep(0.8)
    assert exits == [] and t.is_alive()  # still in the flush
    edge.release.set()
    t.join(10)
    assert codes == [1] and exits == []


class _SlowCommitEdge(_StoppedDuringPollEdge):
    """Flushes at once; the commit after the shutdown checkpoint waits until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def flush(self):
        self.flushes += 1

    def commit(self, offsets):
        self.release.wait(10)
        super().commit(offsets)


def test_a_deadline_past_the_checkpoint_names_the_commit_and_the_new_checkpoint(
        tmp_path, monkeypatch, caplog):
    w, edge, exits = _hanging_shutdown(tmp_path, monkeypatch, 0.3, edge_class=_SlowCommitEdge)
    w.run()
    assert [code for code, _ in exits] == [1]
    written = DirectoryStore(tmp_path).load("in", 0)
    assert written is not None and written.offsets == {"in": {0: 10}}
    line = next(r.getMessage() for r in caplog.records if "shutdown not done" in r.getMessage())
    assert "while committing the stored states' offsets to the group" in line
    assert line.endswith(f"a restart resumes from in[0] from {written.path}")


def test_a_deadline_is_disarmed_once_the_shutdown_has_closed_the_clients(tmp_path, monkeypatch):
    # what follows the shutdown (stopping the HTTP endpoint, releasing the directory) never waits
    # on Kafka, so no expiry may turn a finished shutdown into exit 1
    w, edge, exits = _hanging_shutdown(tmp_path, monkeypatch, 0.3,
                                       observer=Observer(host="127.0.0.1", port=0, liveness_timeout_s=60))
    edge.release.set()
    stop = w.observer.stop

    def stop_later():
        time.sleep(0.6)  # past the deadline, after the clients were closed
        stop()

    monkeypatch.setattr(w.observer, "stop", stop_later)
    assert w.run() == 1  # the shutdown checkpoint failed (its flush did), the clients closed
    assert exits == []


class _CommitRefusedEdge(FailingEdge):
    """Flushes at once; each commit raises while ``refusing`` (a coordinator away)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = True
        self.assigned = [("in", 0)]

    def assignment(self):
        return list(self.assigned)

    def commit(self, offsets):
        if self.refusing:
            raise KafkaEdgeError("commit failed after 2 attempts: NotCoordinatorError")
        super().commit(offsets)

    def seek(self, topic, partition, offset):  # an assignment starts at the checkpoint's offset
        pass


def test_a_commit_that_failed_is_sent_again_at_the_hand_over_with_nothing_new(tmp_path, caplog):
    # the checkpoint stood, its commit failed; a revocation with nothing new since writes no
    # checkpoint, and without the re-send the next owner would start from the older commit
    edge = _CommitRefusedEdge()
    w = _worker(tmp_path, edge)
    for chunk in _batch(0, 20).chunks(10):
        w.process(chunk)
    assert w.checkpoint("interval")  # its commit refused
    assert edge.commits == [] and "sent again at the next checkpoint or hand-over" in caplog.text
    edge.refusing = False
    w._on_revoked([("in", 0)])  # nothing new: no checkpoint written, the commit sent again
    assert edge.commits == [{("in", 0): 20}]
    assert DirectoryStore(tmp_path).load("in", 0).offsets == {"in": {0: 20}}


def test_a_hand_over_s_own_commit_that_failed_is_not_tried_again_at_once(tmp_path):
    # the shutdown's commit refused, the revocation closing runs a moment later would meet the
    # same refusal, with its own wait
    edge = _CommitRefusedEdge()
    w = _worker(tmp_path, edge)
    for chunk in _batch(0, 20).chunks(10):
        w.process(chunk)
    attempts: list[dict] = []
    refuse = edge.commit

    def count_attempts(offsets):
        attempts.append(dict(offsets))
        refuse(offsets)

    edge.commit = count_attempts  # type: ignore[method-assign]
    assert w.checkpoint("shutdown")
    w._on_revoked([("in", 0)])
    assert attempts == [{("in", 0): 20}]


def test_a_commit_still_failed_at_the_hand_over_is_never_sent_after_it(tmp_path):
    # Once the partition may be another worker's, an old offset sent later could move the
    # group's commit back past what that worker committed since: here the partition comes back
    # and is handed over again with nothing new, and the old offset stays unsent.
    edge = _CommitRefusedEdge()
    w = _worker(tmp_path, edge)
    for chunk in _batch(0, 20).chunks(10):
        w.process(chunk)
    assert w.checkpoint("interval")
    w._on_revoked([("in", 0)])  # the hand-over's commit refused too
    edge.refusing = False
    edge.committed = lambda topic, partition: 25  # type: ignore[method-assign]
    w._on_assigned([("in", 0)])  # back, after another worker committed past 20
    w._on_revoked([("in", 0)])
    assert edge.commits == []


def test_a_shutdown_past_its_deadline_exits_even_if_its_last_lines_fail(tmp_path, monkeypatch, caplog):
    w, edge, exits = _hanging_shutdown(tmp_path, monkeypatch, 0.2)

    def broken_edge_logging():
        raise RuntimeError("a client that cannot say what it held back")

    edge.log_suppressed = broken_edge_logging  # type: ignore[method-assign]
    w.run()
    assert [code for code, _ in exits] == [1]
    assert "shutdown not done" in caplog.text


class SlowFlushEdge(_OneInputPartition):
    """Records every send and flush in ``events``, in order; a flush waits for ``go``."""

    def __init__(self, flush_error: Exception | None = None) -> None:
        self.events: list[tuple[str, int]] = []
        self.commits, self.flush_error = [], flush_error
        self.go, self.flushing = threading.Event(), threading.Event()

    def send(self, topic, key, value):
        self.send_many(topic, [key], [value])

    def send_many(self, topic, keys, values):
        self.events.append(("send", len(values)))

    def flush(self):
        self.flushing.set()
        assert self.go.wait(10)
        self.events.append(("flush", 0))
        error, self.flush_error = self.flush_error, None
        if error is not None:
            raise error


def test_a_checkpoint_beside_the_loop_stores_after_the_flush_and_commits_after_the_store(tmp_path):
    edge = SlowFlushEdge()
    w = _worker(tmp_path, edge)
    w.process(_batch(0, 10))
    assert w.checkpointer.checkpoint("interval", aside=True)
    assert edge.flushing.wait(5) and w.checkpointer.holding
    w.process(_batch(10, 10))  # the next poll: learned, its predictions held
    assert edge.events == [("send", 10)] and DirectoryStore(tmp_path).load("in", 0) is None
    w.checkpointer.settle()  # the flush has not returned: nothing moves
    assert edge.commits == [] and w.checkpointer.holding
    edge.go.set()
    w.checkpointer.settle(wait=True)
    assert edge.events == [("send", 10), ("flush", 0), ("send", 10)]  # held, then sent in order
    assert DirectoryStore(tmp_path).load("in", 0).offsets == {"in": {0: 10}}  # the snapshot's
    assert edge.commits == [{("in", 0): 10}] and w.checkpoint_ok
    assert w.checkpoint("shutdown") and edge.commits[-1] == {("in", 0): 20}


def test_a_checkpoint_that_comes_due_while_one_runs_waits_for_it(tmp_path):
    edge = SlowFlushEdge()
    w = _worker(tmp_path, edge)
    w.process(_batch(0, 10))
    assert w.checkpointer.checkpoint("interval", aside=True) and edge.flushing.wait(5)
    w.process(_batch(10, 10))
    assert w.checkpointer.checkpoint("interval", aside=True)  # in flight: nothing done
    assert [e for e in edge.events if e[0] == "flush"] == []
    edge.go.set()
    w.checkpointer.settle(wait=True)
    assert w.checkpointer.checkpoint("interval", aside=True)
    w.checkpointer.settle(wait=True)
    assert DirectoryStore(tmp_path).load("in", 0).offsets == {"in": {0: 20}}
    assert edge.commits == [{("in", 0): 10}, {("in", 0): 20}]


@pytest.mark.parametrize("error", [UndeliveredError("1 records could not be delivered"),
                                   KafkaEdgeError("flush failed after 5 attempts")])
def test_a_flush_beside_the_loop_that_fails_stores_nothing(tmp_path, caplog, error):
    edge = SlowFlushEdge(flush_error=error)
    w = _worker(tmp_path, edge)
    w.process(_batch(0, 10))
    assert w.checkpointer.checkpoint("interval", aside=True) and edge.flushing.wait(5)
    w.process(_batch(10, 10))
    edge.go.set()
    w.checkpointer.settle(wait=True)
    assert edge.events[-1] == ("send", 10)  # the held predictions still go out
    assert DirectoryStore(tmp_path).load("in", 0) is None and edge.commits == []
    assert w.counters.checkpoint_failures == 1
    given_up = isinstance(error, UndeliveredError)
    assert w.shutdown.asked is given_up
    assert w.checkpoint("shutdown") is not given_up  # postponed: the next one stores both batches
