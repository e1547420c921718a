"""Each part of the worker built alone, with a fake edge and a temporary store: no Worker."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from stream_perceptron.codec.inputs import LabelRecord, input_record
from stream_perceptron.errors import KafkaEdgeError, UndeliveredError
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.model.drift import Alarm
from stream_perceptron.settings import Settings
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.state.kafka_store import StateRecord
from stream_perceptron.throttle import Throttle
from stream_perceptron.worker.assignment import Partitions
from stream_perceptron.worker.checkpointer import Checkpointer, TransactionalCheckpointer
from stream_perceptron.worker.deadline import ShutdownDeadline
from stream_perceptron.worker.drift_reporter import DriftReporter
from stream_perceptron.worker.joiner import LabelJoiner, stream_clock
from stream_perceptron.worker.mixer import Mixer
from stream_perceptron.worker.observe import NullObserver, Observer
from stream_perceptron.worker.outputs import DeadLetters, Outputs
from stream_perceptron.worker.policy import Counters, Every
from stream_perceptron.worker.process import BatchProcessor
from stream_perceptron.worker.publisher import StatsPublisher
from stream_perceptron.worker.stores import OnOpen
from tests.unit.worker.fakes import FakeEdge, MemoryModelTopic


def _settings(tmp_path, **sections) -> Settings:
    return Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)}, **sections)


def _events(n: int, start: int = 0, *, partition: int = 0, labeled: bool = True) -> Batch:
    rng = np.random.default_rng(start)
    return Batch.of([InRecord("in", partition, i, str(i).encode(),
                              input_record(np.round(rng.normal(size=2), 2).tolist(),
                                           (1 if i % 3 else -1) if labeled else None, i), 1000 + i)
                     for i in range(start, start + n)])


class Parts:
    """The parts a worker composes, built by hand around one fake edge and one store."""

    def __init__(self, tmp_path, edge: FakeEdge | None = None, **sections) -> None:
        self.settings = settings = _settings(tmp_path, **sections)
        self.edge = edge or FakeEdge()
        self.store = DirectoryStore(tmp_path)
        self.counters = Counters()
        self.outputs = Outputs(self.edge)
        self.model_topic = MemoryModelTopic()
        self.mixer = Mixer(settings, self.model_topic)
        self.partitions = Partitions(settings, self.store, self.edge, self.mixer, NullObserver(), started=0.0)
        self.dead_letters = DeadLetters(self.outputs, settings.topics.dead_letter,
                                        settings.limits.codec_limits(), self.counters)
        self.drifts = DriftReporter(self.outputs, NullObserver(), topic=settings.topics.stats,
                                    client_id="w1", lines=Throttle(0))
        self.joiner = LabelJoiner(self.outputs, self.dead_letters, self.drifts,
                                  topic=settings.topics.outcomes)
        self.processor = BatchProcessor(settings, self.partitions, self.outputs, self.dead_letters,
                                        self.joiner, self.mixer, self.drifts, observer=NullObserver(),
                                        counters=self.counters)
        self.stopped = False

    def checkpointer(self, kind=Checkpointer, store=None) -> Checkpointer:
        return kind(self.edge, store or self.store, self.partitions, self.outputs,
                    policy=Every(1000, 60.0), deadline=ShutdownDeadline(float("inf"), print),
                    observer=NullObserver(), counters=self.counters, lines=Throttle(0),
                    stop=lambda: setattr(self, "stopped", True))


# -- outputs ---------------------------------------------------------------------------------------


def test_outputs_know_what_the_next_checkpoint_must_confirm():
    edge = FakeEdge()
    outputs = Outputs(edge)
    assert not outputs.unconfirmed
    outputs.send("stats", b"k", b"{}")
    assert outputs.unconfirmed
    outputs.flush()
    assert not outputs.unconfirmed and edge.flushes == 1
    outputs.send_many("predictions", [], [])  # nothing sent: nothing to confirm
    assert not outputs.unconfirmed


def test_outputs_open_the_transaction_before_the_first_record_it_holds():
    edge = FakeEdge(transactional=True)
    outputs = Outputs(edge)
    outputs.send("stats", None, b"{}")
    outputs.send_many("predictions", [None, None], [b"1", b"2"])
    assert edge.in_transaction and len(edge.sent) == 3  # one transaction, begun once
    edge.commit_transaction({})
    outputs.confirmed()
    assert not outputs.unconfirmed


def test_a_dead_letter_names_its_record_and_counts_for_its_partition(tmp_path):
    parts = Parts(tmp_path)
    st = parts.partitions.open("in", 0)
    parts.dead_letters.send(st, _events(3), 1, "x is empty")
    (dead,) = parts.edge.records("dead-letters")
    assert (dead["offset"], dead["error"]) == (1, "x is empty")
    assert st.dead_letters == parts.counters.dead_letters == 1


# -- partitions ------------------------------------------------------------------------------------


def test_partitions_restore_each_partition_from_its_own_stored_state_and_seek_there(tmp_path):
    parts = Parts(tmp_path)
    parts.processor.process(_events(40))
    st = parts.partitions.assigned[("in", 0)]
    parts.store.save(st.state(), st.epoch)
    again = Parts(tmp_path, FakeEdge(committed={("in", 0): 10}))
    restored = again.partitions.take("in", 0)
    assert again.edge.seeks == {("in", 0): 40} and restored.learner.stats.seen == 40
    assert restored.learner.model.weights.tolist() == st.learner.model.weights.tolist()
    again.partitions.release([("in", 0)])
    assert again.partitions.assigned == {} and again.partitions.released[("in", 0)] is restored
    assert again.partitions.take("in", 0) is not restored  # never reused: restored anew


def test_a_partition_without_a_state_starts_at_the_group_commit(tmp_path):
    parts = Parts(tmp_path, FakeEdge(committed={("in", 0): 7}))
    st = parts.partitions.take("in", 0)
    assert (st.start, st.next_offset, parts.edge.seeks) == (7, None, {("in", 0): 7})


# -- the batch processor ---------------------------------------------------------------------------


def test_the_processor_predicts_learns_and_dead_letters_one_partitions_batch(tmp_path):
    parts = Parts(tmp_path)
    batch = _events(10)
    values = list(batch.values)
    values[4] = b'{"x": [1.0, 2.0, 3.0], "y": 1}'  # another width
    batch = Batch("in", 0, batch.offsets, batch.keys, values, batch.timestamps_ms)
    parts.processor.process(batch)
    st = parts.partitions.assigned[("in", 0)]
    assert [p["offset"] for p in parts.edge.records("predictions")] == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    assert [d["offset"] for d in parts.edge.records("dead-letters")] == [4]
    assert st.next_offset == 10 and st.dirty and parts.counters.records == 10
    assert st.learner.stats.seen == 9


def test_a_label_record_joins_its_kept_event_at_its_place(tmp_path):
    parts = Parts(tmp_path, labels={"pending_max": 10})
    events = _events(3, labeled=False)
    label = InRecord("in", 0, 3, b"l", b'{"id": 1, "y": 1}', 2000)
    unknown = InRecord("in", 0, 4, b"u", b'{"id": 99, "y": 1}', 2001)
    parts.processor.process(Batch.of([*(events.record(i) for i in range(3)), label, unknown]))
    (outcome,) = parts.edge.records("outcomes")
    assert (outcome["id"], outcome["event_offset"], outcome["offset"]) == (1, 1, 3)
    (dead,) = parts.edge.records("dead-letters")
    assert dead["offset"] == 4 and "unknown id 99" in dead["error"]
    assert parts.partitions.assigned[("in", 0)].learner.stats.labeled == 1


def test_the_joiner_alone_keeps_and_joins_by_id(tmp_path):
    parts = Parts(tmp_path, labels={"pending_max": 10})
    st = parts.partitions.open("in", 0)
    batch = Batch.of([InRecord("in", 0, 0, None, b"", 5), InRecord("in", 0, 1, None, b"", 6)])
    X = np.array([[1.0, -1.0]])
    result = st.learner.step(X, np.array([0], dtype=np.int8), labeled=np.array([False])).result
    clock = stream_clock(batch)
    parts.joiner.keep(st, batch, clock, [[1.0, -1.0]], [0], [0], ["a"], result)
    assert len(st.pending) == 1
    assert parts.joiner.join(st, batch, clock, 1, LabelRecord("a", -1)) == (1, 1)  # θ = 0: a mistake
    assert len(st.pending) == 0 and parts.edge.records("outcomes")[0]["mistake"] is True


# -- mixing ----------------------------------------------------------------------------------------


def test_the_mixer_publishes_and_adopts_at_each_mixing_point(tmp_path):
    parts = Parts(tmp_path, mix={"every_examples": 5})
    parts.processor.process(_events(12))
    written = parts.model_topic.written()
    assert [r["offset"] for r in written] == [0, 5, 10]  # the claim's, then after the 5th and 10th example
    assert [r["log"][-1]["offset"] for r in written[1:]] == [5, 10]
    st = parts.partitions.assigned[("in", 0)]
    assert st.mix is not None and st.mix.version == 2 and st.mix.labeled == 2


# -- checkpoints -----------------------------------------------------------------------------------


def test_a_checkpoint_confirms_the_outputs_then_stores_then_commits(tmp_path):
    parts = Parts(tmp_path)
    checkpointer = parts.checkpointer()
    parts.partitions.take("in", 0)
    parts.processor.process(_events(20))
    assert checkpointer.checkpoint("interval")
    assert parts.edge.flushes == 1 and parts.edge.commits == [{("in", 0): 20}]
    assert parts.store.load("in", 0).offsets == {"in": {0: 20}}
    assert checkpointer.checkpoint("interval") and parts.edge.flushes == 1  # nothing moved


def test_a_batch_that_raised_leaves_nothing_to_store(tmp_path, caplog):
    parts = Parts(tmp_path)
    checkpointer = parts.checkpointer()
    with pytest.raises(RuntimeError), checkpointer.batch("the batch of in[0] from offset 0"):
        parts.processor.process(_events(5))
        raise RuntimeError("half-way")
    assert not checkpointer.checkpoint("shutdown") and not checkpointer.ok
    assert "the batch of in[0] from offset 0 did not finish" in caplog.text
    assert parts.store.load("in", 0) is None


def test_outputs_given_up_stop_the_worker_and_are_never_covered(tmp_path):
    parts = Parts(tmp_path)
    checkpointer = parts.checkpointer()
    parts.processor.process(_events(5))
    parts.edge.flush_error = UndeliveredError("1 record could not be delivered")
    assert not checkpointer.checkpoint("interval") and parts.stopped
    assert not checkpointer.checkpoint("shutdown") and parts.store.load("in", 0) is None


def test_a_commit_that_failed_is_withheld_until_the_next_checkpoint(tmp_path, monkeypatch):
    parts = Parts(tmp_path)
    checkpointer = parts.checkpointer()
    parts.partitions.take("in", 0)
    parts.processor.process(_events(5))
    refused = iter([KafkaEdgeError("NotCoordinator")])

    def commit(offsets):
        error = next(refused, None)
        if error is not None:
            raise error
        parts.edge.commits.append(dict(offsets))

    monkeypatch.setattr(parts.edge, "commit", commit)
    assert checkpointer.checkpoint("interval") and parts.edge.commits == []
    assert checkpointer.checkpoint("interval") and parts.edge.commits == [{("in", 0): 5}]


def test_a_state_restored_past_the_group_commit_is_committed_by_the_next_checkpoint(tmp_path):
    """A worker stopped between storing a state and committing its offset (D84): the next owner
    restores the state and, with nothing new to process, still brings the group's commit to it,
    so the group's lag is not that of records long processed."""
    parts = Parts(tmp_path)
    parts.processor.process(_events(40))
    st = parts.partitions.assigned[("in", 0)]
    parts.store.save(st.state(), st.epoch)
    again = Parts(tmp_path, FakeEdge(committed={("in", 0): 10}))
    checkpointer = again.checkpointer()
    again.partitions.take("in", 0)
    assert checkpointer.checkpoint("revocation") and again.edge.commits == [{("in", 0): 40}]
    assert checkpointer.checkpoint("interval") and again.edge.commits == [{("in", 0): 40}]  # once
    # a state processed past its stored offset commits only what is stored
    third = Parts(tmp_path, FakeEdge(committed={("in", 0): 10}))
    checkpointer = third.checkpointer()
    third.partitions.take("in", 0)
    third.processor.process(_events(5, start=40))
    third.edge.flush_error = KafkaEdgeError("not acknowledged")
    assert not checkpointer.checkpoint("interval") and third.edge.commits == []


class _TopicStore:
    """A transactional store: states as records of a state topic."""

    topic = "states"

    def __init__(self) -> None:
        self.durable_records: list = []

    def encode(self, state, epoch):
        return [StateRecord(0, f"in:0:{epoch}", b"a state")]

    def durable(self, records):
        self.durable_records += records


def test_an_exactly_once_checkpoint_is_one_transaction_of_outputs_states_and_offsets(tmp_path):
    parts = Parts(tmp_path, FakeEdge(transactional=True))
    store = _TopicStore()
    checkpointer = parts.checkpointer(TransactionalCheckpointer, store)
    parts.partitions.take("in", 0)
    parts.processor.process(_events(8))
    assert parts.edge.in_transaction  # opened by the first prediction
    assert checkpointer.checkpoint("interval")
    assert parts.edge.transactions == [{("in", 0): 8}] and not parts.edge.in_transaction
    assert [t for t, _, _ in parts.edge.sent][-1] == "states" and len(store.durable_records) == 1


def test_an_aborted_transaction_restores_every_partition_from_the_store(tmp_path, caplog):
    parts = Parts(tmp_path, FakeEdge(transactional=True))
    checkpointer = parts.checkpointer(TransactionalCheckpointer, _TopicStore())
    first = parts.partitions.take("in", 0)
    parts.processor.process(_events(8))
    parts.edge.abort_next = True
    assert not checkpointer.checkpoint("interval")
    again = parts.partitions.assigned[("in", 0)]
    assert again is not first and again.next_offset is None and again.learner.stats.seen == 0
    assert "aborted, nothing of it visible" in caplog.text


def test_the_kafka_store_is_the_transactional_one():
    store: object = OnOpen(Settings(checkpoint={"store": "kafka"}))
    assert all(callable(getattr(store, name, None)) for name in ("encode", "durable"))


# -- statistics and drift alarms --------------------------------------------------------------------


def test_the_publisher_sends_one_record_per_assigned_partition_with_its_lag(tmp_path):
    parts = Parts(tmp_path, FakeEdge(assigned=[("in", 0), ("in", 1)]))
    parts.edge.highwaters = {("in", 0): 50, ("in", 1): 5}
    publisher = StatsPublisher(parts.settings, parts.edge, parts.outputs, parts.partitions, NullObserver(),
                               lines=Throttle(0), started=0.0)
    for p in (0, 1):
        parts.partitions.take("in", p)
    parts.processor.process(_events(20, partition=0))
    parts.processor.process(_events(5, partition=1))
    records = publisher.publish()
    assert [(r["partition"], r["seen"], r["lag"]) for r in records] == [
        (0, 20, {"in:0": 30}), (1, 5, {"in:1": 0})]
    assert len(parts.edge.records("stats")) == 2 and not publisher.caught_up()


def test_a_drift_alarm_is_an_event_a_counter_and_one_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="stream_perceptron")
    parts = Parts(tmp_path, drift={"detector": "adwin"})
    st = parts.partitions.open("in", 0)
    observer = Observer(port=0)
    reporter = DriftReporter(parts.outputs, observer, topic="stats", client_id="w1", lines=Throttle(60))
    assert st.learner.drift is not None
    st.learner.drift.drifts = 2  # the learner counted these two alarms already
    alarms = [Alarm(row=1, stream="mistakes", rate_before=0.01, rate_after=0.4, labeled=10),
              Alarm(row=3, stream="mistakes", rate_before=0.4, rate_after=0.1, labeled=12)]
    reporter.report(st, alarms, [100, 101, 102, 103])
    events = parts.edge.records("stats")
    assert [(e["event"], e["offset"], e["drifts"]) for e in events] == [("drift", 101, 1), ("drift", 103, 2)]
    assert st.learner.last_drift_offset == 103
    assert [r.getMessage()[:28] for r in caplog.records] == ["in[0]@101: drift alarm 1 (ad"]  # once a minute
