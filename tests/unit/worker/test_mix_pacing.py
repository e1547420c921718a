"""Mixing points paced (worker/pacing.py, worker/mixer.py): the partitions of one worker advance
together and adopt synchronous IPM's mix however their records are polled; with
SP_MIX__MAX_STALENESS a partition waits for other workers' partitions behind, at most
SP_MIX__MAX_WAIT_S, and a replay adopts what was logged without waiting."""

from __future__ import annotations

import numpy as np
import pytest

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.model.mixing import Mix, Published, mix
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.settings import Settings
from stream_perceptron.state.model_topic import encode
from stream_perceptron.worker.loop import Worker
from stream_perceptron.worker.pacing import holding
from tests.unit.worker.fakes import MemoryModelTopic, written
from tests.unit.worker.test_batch import MemoryEdge

EVERY = 20


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class LogEdge(MemoryEdge):
    """Each partition's records as a broker holds them: a poll hands out up to ``per_poll``
    records of each partition not paused, from its position, in the order ``order`` gives; the
    high-water mark is the log's end."""

    def __init__(self, logs: dict[int, list[InRecord]], per_poll: int, order=None, one: bool = False) -> None:
        super().__init__()
        self.logs, self.per_poll, self.order, self.one = logs, per_poll, order, one
        self.position = dict.fromkeys(logs, 0)
        self.paused: set[int] = set()
        self.pauses = 0

    def poll(self, timeout_ms, max_records):
        parts = [p for p in (self.order() if self.order else sorted(self.logs)) if p not in self.paused]
        out = []
        for p in parts:
            records = self.logs[p][self.position[p]:self.position[p] + self.per_poll]
            if records:
                self.position[p] += len(records)
                out.append(Batch.of(records))
                if self.one:  # a poll of one partition's records, as kafka-python's mostly are
                    break
        return out

    def highwater(self, topic, partition):
        return len(self.logs[partition])

    def seek(self, topic, partition, offset):
        self.position[partition] = offset

    def pause(self, topic, partition):
        self.paused.add(partition)
        self.pauses += 1

    def resume(self, topic, partition, offset):
        self.paused.discard(partition)
        self.position[partition] = offset


def _stream(parts: int, n: int, seed: int = 3) -> dict[int, list[tuple[list[float], int]]]:
    rng = np.random.default_rng(seed)
    u = rng.normal(size=4)
    out = {}
    for p in range(parts):
        X = np.round(rng.normal(size=(n, 4)), 2)
        out[p] = [(x.tolist(), 1 if x @ u > 0 else -1) for x in X]
    return out


def _logs(data) -> dict[int, list[InRecord]]:
    return {p: [InRecord("in", p, i, None, input_record(x, y, i), 0) for i, (x, y) in enumerate(rows)]
            for p, rows in data.items()}


def _worker(tmp_path, edge, log=None, clock=None, **mix) -> Worker:
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                        mix={"every_examples": EVERY, **mix})
    w = Worker(settings, edge=edge, model_topic=MemoryModelTopic(log))
    if clock is not None:
        w.mixer._clock = clock
    for p in edge.logs:  # assigned before any record, as a rebalance assigns them
        w.partitions.state("in", p)
    return w


def _drain(w: Worker, edge: LogEdge, rounds: int | None = None) -> None:
    """The loop's work without its broker: poll, process the batches in turns, release; for
    ``rounds`` polls, else until nothing is left to poll and no partition waits."""
    for _ in range(rounds or 10_000):
        w.mixer.release(w.partitions.assigned, follow=True)
        batches = edge.poll(0, 0)
        if rounds is None and not batches and not w.mixer.waits:
            return
        w._process_polled(batches, 0.5)
    assert rounds is not None, "the partitions did not get through their records"


def _sync_ipm(data, every: int) -> list[Mix]:
    """Synchronous IPM, offline: each round every partition learns its next ``every`` rows from
    the last mix, then they are mixed."""
    models = {p: Perceptron() for p in data}
    mixes, n = [], len(next(iter(data.values())))
    for a in range(0, n - every + 1, every):
        states = []
        for p, m in models.items():
            before, rows = m.updates, data[p][a:a + every]
            m.learn_many(np.array([x for x, _ in rows]), np.array([y for _, y in rows]))
            states.append(Published(p, m.weights.copy(), m.intercept, m.updates - before, len(mixes) + 1,
                                    a + every))
        mixes.append(mix(states))
        for m in models.values():
            state = m.get_state()
            state.pop("theta_sq", None)
            state["weights"], state["intercept"] = mixes[-1].weights, mixes[-1].intercept
            m.set_state(state)
    return mixes


def test_holding_names_the_partitions_behind_and_the_version_each_must_reach():
    versions = {0: 4, 1: 3, 2: 5, 3: 1, 5: 2}
    # this worker holds 0, 1 and 2 (1 has records to read, 2 has none); the input has 6 partitions
    local = {0: True, 1: True, 2: False}
    assert holding(4, 0, versions, local, partitions=6, bound=None) == {1: 4}
    assert holding(4, 0, versions, local, partitions=6, bound=2) == {1: 4, 3: 2, 4: 2}
    assert holding(4, 0, versions, local, partitions=6, bound=0) == {1: 4, 3: 4, 4: 4, 5: 4}
    assert holding(7, 0, versions, local, partitions=6, bound=1)[2] == 6  # 2 has nothing to read: s
    assert holding(1, 0, {}, {0: True}, partitions=6, bound=1) == {}  # version 0 is within 1 of 1


@pytest.mark.parametrize("one", [False, True], ids=["polls-of-all", "polls-of-one"])
@pytest.mark.parametrize("per_poll", [7, 45, 200])
def test_the_partitions_of_a_worker_adopt_synchronous_ipm_whatever_their_polls(tmp_path, per_poll, one):
    data = _stream(3, 10 * EVERY)
    rng = np.random.default_rng(per_poll)
    edge = LogEdge(_logs(data), per_poll, order=lambda: rng.permutation(3).tolist(), one=one)
    w = _worker(tmp_path, edge)
    _drain(w, edge)
    expected = _sync_ipm(data, EVERY)
    for p in range(3):
        st = w.partitions.assigned[("in", p)]
        assert st.next_offset == 10 * EVERY and st.mix.version == 10
    logged = {}
    for record in w.mixer._reader().written():
        for e in record["log"]:
            logged[(record["partition"], e["offset"])] = e
    for k, m in enumerate(expected, start=1):
        for p in range(3):
            got = Mix.from_record(logged[(p, k * EVERY)]["mix"])
            assert got.versions == (k, k, k)  # every partition's k-th state
            assert got.weights.tobytes() == m.weights.tobytes() and got.intercept == m.intercept
    # a partition polled alone past its mixing point waits there paused; polled with the others, it
    # goes on in the same poll once they have caught up
    assert bool(edge.pauses) == one


def test_a_poll_of_one_partition_waits_for_the_others_and_predictions_do_not_depend_on_the_polls(tmp_path):
    data = _stream(2, 6 * EVERY, seed=5)
    outputs = []
    for per_poll, order in ((6 * EVERY, lambda: [0, 1]), (13, lambda: [1, 0])):
        edge = LogEdge(_logs(data), per_poll, order=order, one=True)
        w = _worker(tmp_path / str(per_poll), edge)
        _drain(w, edge)
        outputs.append(sorted((v["partition"], v["offset"], v["score"]) for t, _, v in edge.sent
                              if t == "predictions"))
    assert outputs[0] == outputs[1] and len(outputs[0]) == 2 * 6 * EVERY


def _remote(log, p: int, version: int, epoch: int = 1) -> None:
    """Another worker's record of partition ``p`` at mix ``version`` (zero weights), on the model topic."""
    state = Published(p, np.zeros(4), 0.0, 0, version, version * EVERY)
    record = {"topic": "in", "partition": p, "offset": version * EVERY, "state": state.record(), "log": [],
              "ts": 0.0}
    records = encode(record, epoch=epoch, writer=f"other-{epoch}", chunk_bytes=1 << 20)
    log.extend((r.key, r.value) for r in records)


def test_a_partition_waits_for_one_behind_until_its_wait_runs_out_then_no_more(tmp_path):
    data = _stream(1, 4 * EVERY, seed=7)
    log: list = []
    _remote(log, 1, 0)  # in[1], another worker's, has claimed its partition and learned nothing
    clock = Clock()
    edge = LogEdge(_logs(data), EVERY)
    w = _worker(tmp_path, edge, log=log, clock=clock, max_staleness=0, max_wait_s=5.0)
    _drain(w, edge, rounds=3)  # up to its first mixing point, where it waits
    st = w.partitions.assigned[("in", 0)]
    assert w.mixer.waiting(st) and st.next_offset == EVERY and st.mix.version == 0
    assert edge.paused == {0}  # its records wait
    clock.now += 4.9
    w.mixer.release(w.partitions.assigned, follow=True)
    assert w.mixer.waiting(st)
    clock.now += 0.2  # the wait runs out: it mixes without in[1], and says so
    _drain(w, edge)
    assert st.mix.version == 4 and st.mix.overdue == 1 and st.mix.paused_s == pytest.approx(5.1)
    entries = [e for r in w.mixer._reader().written() if r["partition"] == 0 for e in r["log"]]
    first, *later = {e["offset"]: e for e in entries}.values()
    assert first["stale"] == {"1": 1} and first["waited_s"] == pytest.approx(5.1)
    # in[1] published nothing since: not waited for again, still named stale, further behind
    assert [e["stale"] for e in later] == [{"1": 2}, {"1": 3}, {"1": 4}]
    assert all("waited_s" not in e for e in later)
    stats = st.mix_statistics()
    assert stats["overdue"] == 1 and stats["stale"] == {"1": 4} and stats["paused_s"] == pytest.approx(5.1)


def test_a_partition_goes_on_once_the_others_are_within_the_bound(tmp_path):
    w, edge, log, clock = _beside(tmp_path, 8, 3, (1,), max_staleness=1, fresh_wait_s=0)
    _drain(w, edge, rounds=4)  # version 1 and 2 need in[1] at 0 and 1: no wait; 3 needs 2
    st = w.partitions.assigned[("in", 0)]
    assert st.mix.version == 2 and w.mixer.waiting(st) and st.next_offset == 3 * EVERY
    clock.now += 1.0
    _remote(log, 1, 2)
    _drain(w, edge)
    assert st.mix.version == 3 and st.mix.overdue == 0 and st.mix.paused_s == pytest.approx(1.0)
    last = st.mix.last
    assert "stale" not in last and last["waited_s"] == pytest.approx(1.0)
    assert last["mix"]["partitions"] == [0, 1] and last["mix"]["epochs"] == [3, 2]


def _beside(tmp_path, seed: int, points: int, remote: tuple[int, ...], **mix):
    """A worker of in[0] (``points`` mixing points of records), another worker's in[1] having
    published the ``remote`` versions on the model topic, and the clock of its waits."""
    log: list = []
    for version in remote:
        _remote(log, 1, version)
    clock = Clock()
    edge = LogEdge(_logs(_stream(1, points * EVERY, seed=seed)), EVERY)
    return _worker(tmp_path, edge, log=log, clock=clock, **mix), edge, log, clock


def test_within_the_bound_a_partition_waits_up_to_the_fresh_wait_for_states_of_its_version(tmp_path):
    """s = 1, SP_MIX__FRESH_WAIT_S = 2: at its second point in[0] may mix in[1]'s first state,
    but waits for its second; in[1] publishes it within the wait, and the mix takes it, not the
    third that came with it. At the third point in[1] does not come: after 2 s in[0] mixes its
    state one version behind, and waits for it no more until it publishes again."""
    w, edge, log, clock = _beside(tmp_path, 8, 4, (1,), max_staleness=1, fresh_wait_s=2.0)
    _drain(w, edge, rounds=4)
    st = w.partitions.assigned[("in", 0)]
    assert st.mix.version == 1 and w.mixer.waiting(st) and edge.paused == {0}
    clock.now += 0.5
    _remote(log, 1, 2)
    _remote(log, 1, 3)  # in[1] went on past its second point before in[0] read the topic
    _drain(w, edge, rounds=2)  # its second point, and its third: in[1] is there, no wait
    entries = {e["offset"] // EVERY: e for e in st.mix_log}
    assert entries[2]["mix"]["epochs"] == [2, 2] and entries[2]["waited_s"] == pytest.approx(0.5)
    assert entries[3]["mix"]["epochs"] == [3, 3] and "waited_s" not in entries[3]
    assert st.mix.version == 3 and w.mixer.waiting(st)  # its fourth: in[1] is within s, not there
    clock.now += 1.9
    w.mixer.release(w.partitions.assigned, follow=True)
    assert w.mixer.waiting(st)
    clock.now += 0.2
    _drain(w, edge)
    assert st.mix.version == 4 and st.mix.overdue == 0 and "stale" not in st.mix.last
    assert st.mix.last["mix"]["epochs"] == [4, 3] and st.mix.paused_s == pytest.approx(2.6)


def test_the_fresh_wait_lasts_the_partitions_lap_plus_the_setting(tmp_path):
    """s = 1, SP_MIX__FRESH_WAIT_S = 1, SP_MIX__MAX_WAIT_S = 10: in[0]'s lap from its first point
    to its second is 4 s, so there it waits 4 + 1 s for in[1]'s second state; its lap to its
    third is 20 s, and there it waits 10 s, the longest any wait at a point lasts."""
    w, edge, log, clock = _beside(tmp_path, 6, 3, (1,), max_staleness=1, fresh_wait_s=1.0, max_wait_s=10.0)
    st = w.partitions.assigned[("in", 0)]
    clock.now += 3.0
    _drain(w, edge, rounds=1)
    assert st.mix.version == 1 and not w.mixer.waiting(st)  # in[1]'s first state is there
    for version, took, waits in ((2, 4.0, 5.0), (3, 20.0, 10.0)):
        clock.now += took
        _drain(w, edge, rounds=1)  # at its point: in[1] is a version behind, within s
        assert st.mix.version == version - 1 and w.mixer.waiting(st)
        clock.now += waits - 0.1
        w.mixer.release(w.partitions.assigned, follow=True)
        assert w.mixer.waiting(st)
        clock.now += 0.2
        w.mixer.release(w.partitions.assigned, follow=True)
        assert st.mix.version == version and st.mix.last["mix"]["epochs"] == [version, version - 1]
        assert st.mix.last["waited_s"] == pytest.approx(waits + 0.1) and st.mix.overdue == 0
        _remote(log, 1, version)


@pytest.mark.parametrize(("lap", "held", "fresh"), [(0.0, 5.0, 2.0), (3.0, 1.0, 5.0), (30.0, 9.0, 1.0)])
def test_the_fresh_wait_counts_from_the_end_of_the_wait_for_the_partitions_beyond_s(
    tmp_path, lap, held, fresh
):
    """in[0] waits ``held`` s at its first point for in[1], of its own worker, then only for in[2],
    another worker's, within s = 1: that wait is the fresh wait (its lap from its opening plus
    2 s) from then, not from ``held`` s ago; with a lap of 30 s, only up to SP_MIX__MAX_WAIT_S
    (10 s) from the start of the whole wait, ``fresh`` s more."""
    data = _stream(2, EVERY, seed=2)
    log: list = []
    _remote(log, 2, 0)
    clock, polled = Clock(), [0]
    edge = LogEdge(_logs(data), EVERY, order=lambda: polled, one=True)
    w = _worker(tmp_path, edge, log=log, clock=clock, max_staleness=1, fresh_wait_s=2.0, max_wait_s=10.0)
    clock.now += lap
    _drain(w, edge, rounds=2)
    st = w.partitions.assigned[("in", 0)]
    assert w.mixer.waiting(st) and st.mix.version == 0
    clock.now += held
    polled[:] = [1]
    _drain(w, edge, rounds=2)  # in[1] at its point: in[0] waits for in[2] alone now
    assert w.mixer.waiting(st) and st.mix.version == 0
    clock.now += fresh - 0.1
    _drain(w, edge, rounds=1)
    assert w.mixer.waiting(st)
    clock.now += 0.2
    _drain(w, edge, rounds=1)
    assert st.mix.version == 1 and st.mix.last["mix"]["partitions"] == [0, 1]
    assert st.mix.last["waited_s"] == pytest.approx(held + fresh + 0.1) and st.mix.overdue == 0


def test_without_a_fresh_wait_a_mix_within_the_bound_takes_no_state_of_a_later_point(tmp_path):
    """s = 1, no fresh wait: in[0] at its first point mixes in[1]'s first state, though its second
    is on the topic too (a mix at point n takes each state of version n or earlier)."""
    w, edge, _, _ = _beside(tmp_path, 4, 2, (1, 2), max_staleness=1, fresh_wait_s=0)
    _drain(w, edge)
    st = w.partitions.assigned[("in", 0)]
    assert [e["mix"]["epochs"] for e in st.mix_log][-2:] == [[1, 1], [2, 2]]


def test_a_state_stored_while_its_partition_waited_replays_the_logged_mix_without_waiting(tmp_path):
    data = _stream(1, 3 * EVERY, seed=9)
    log: list = []
    _remote(log, 1, 0)
    clock = Clock()
    edge = LogEdge(_logs(data), EVERY)
    first = _worker(tmp_path, edge, log=log, clock=clock, max_staleness=0, max_wait_s=1.0)
    _drain(first, edge, rounds=3)
    assert first.checkpoint("test")  # stored at its first mixing point, still to make
    clock.now += 2.0
    _drain(first, edge)  # went on without in[1]: logged; then killed, nothing more stored
    ran = first.partitions.assigned[("in", 0)]
    sent = [v for t, _, v in edge.sent if t == "predictions"]
    # a new owner, in[1] still behind and never waited for: the logged mixes are adopted again
    edge2 = LogEdge(_logs(data), 7)
    again = _worker(tmp_path, edge2, log=log, clock=Clock(), max_staleness=0, max_wait_s=3600.0)
    again.restore()
    st = again.partitions.state("in", 0)
    assert st.next_offset == EVERY and st.mix.remaining(EVERY) == 0  # the point first
    edge2.position[0] = EVERY
    _drain(again, edge2)
    assert st.learner.model.weights.tobytes() == ran.learner.model.weights.tobytes()
    assert st.mix.version == ran.mix.version == 3 and not st.mix.overdue
    assert [v for t, _, v in edge2.sent if t == "predictions"] == [v for v in sent if v["offset"] >= EVERY]


def test_a_wait_reads_the_model_topic_again_only_for_another_workers_partition(tmp_path):
    """This worker's own states are in its index as it writes them: waiting for one of its own
    partitions, the loop's release reads nothing; for another worker's, it reads what came."""
    data = _stream(2, 2 * EVERY, seed=5)
    log: list = []
    edge = LogEdge(_logs(data), EVERY, order=lambda: [0, 1], one=True)
    w = _worker(tmp_path, edge, log=log, max_staleness=0)
    topic, reads = w.mixer._reader(), []
    newer = topic.newer
    topic.newer = lambda: reads.append(1) or newer()  # type: ignore[method-assign]
    _drain(w, edge, rounds=1)  # in[0] to its first mixing point; in[1], polled next, holds it back
    st = w.partitions.assigned[("in", 0)]
    assert w.mixer.waiting(st) and not st.mix_wait.remote
    before = len(reads)
    w.mixer.release(w.partitions.assigned, follow=True)
    assert len(reads) == before and w.mixer.waiting(st)
    _remote(log, 2, 0)  # in[2], another worker's, claimed and behind: read at in[1]'s point
    _drain(w, edge, rounds=2)  # in[1] to its point, waits for in[2]; in[0] too, now
    assert w.mixer.waiting(st) and st.mix_wait.remote
    before = len(reads)
    w.mixer.release(w.partitions.assigned, follow=True)
    assert len(reads) == before + 1


def test_a_partition_claimed_by_another_worker_while_it_waited_stops_at_its_point(tmp_path, caplog):
    """A zombie's waited point (D82): in[0] waits for in[1], of this worker and not polled, so
    nothing reads the model topic meanwhile (the loop's release reads it only for another
    worker's partition); another worker claims in[0]. When the wait runs out, the point reads
    the model topic before it mixes, finds the later claim and stops: no mix, no record."""
    data = _stream(2, 2 * EVERY, seed=6)
    log: list = []
    clock = Clock()
    edge = LogEdge(_logs(data), EVERY, order=lambda: [0])
    w = _worker(tmp_path, edge, log=log, clock=clock, max_staleness=0, max_wait_s=5.0)
    _drain(w, edge, rounds=2)  # in[0] at its first mixing point, held back by in[1]
    st = w.partitions.assigned[("in", 0)]
    assert w.mixer.waiting(st) and not st.mix_wait.remote
    _remote(log, 0, 0, epoch=2)  # the new owner's claim of in[0]
    claimed = len(log)
    clock.now += 5.1
    with caplog.at_level("WARNING", logger="stream_perceptron.worker"):
        w.mixer.release(w.partitions.assigned, follow=True)
    assert st.fenced and st.mix.version == 0 and not w.mixer.waiting(st)
    assert written(log[claimed:]) == []  # no mix record of in[0] after the claim
    assert any(f"stops at its mixing point at offset {EVERY}" in r.message for r in caplog.records)
