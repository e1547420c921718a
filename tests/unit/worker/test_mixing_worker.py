"""The worker with SP_MIX__EVERY_EXAMPLES: mixing points at exact records, adoptions logged on the
model topic and adopted again, bit for bit, by a replay."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.errors import SettingsError
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.model.mixing import Mix, adopt
from stream_perceptron.settings import Settings
from stream_perceptron.state.kafka_store import KafkaStore
from stream_perceptron.state.model_topic import ModelTopicIndex, written_under_claims
from stream_perceptron.worker.loop import Worker
from stream_perceptron.worker.partition import new_learner
from tests.unit.state.test_kafka_store import MemoryLog
from tests.unit.worker.fakes import MemoryModelTopic
from tests.unit.worker.test_batch import MemoryEdge

EVERY = 20


def _stream(n=400, seed=3):
    """Two partitions' rows; every 7th unlabeled (the same rows in both, so the mixing points of
    the two fall at the same offsets)."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in (0, 1):
        X = np.round(rng.normal(size=(n, 3)), 2)
        y = [int(v) for v in np.where(X @ [1.0, -1.0, 0.5] + 0.1 * p > 0, 1, 0)]
        out[p] = [(x.tolist(), None if i % 7 == 3 else y[i]) for i, x in enumerate(X)]
    return out


def _records(rows, p, a, b):
    return [InRecord("in", p, i, None, input_record(rows[i][0], rows[i][1], i), 0) for i in range(a, b)]


def _mixing_points(rows):
    labeled = [i for i, (_, y) in enumerate(rows) if y is not None]
    return [labeled[k] + 1 for k in range(EVERY - 1, len(labeled), EVERY)]


class FedEdge(MemoryEdge):
    """An in-memory edge whose partitions have nothing to read but what the test feeds: a
    partition never waits for another of its worker at a mixing point (worker/pacing.py)."""

    def highwater(self, topic, partition):
        return 0


def _worker(tmp_path, log=None, store=None, **mix):
    """A worker mixing every EVERY examples on an in-memory edge and model topic (``log``: the
    model topic's records so far), with the directory store in ``tmp_path`` or ``store``."""
    edge, topic = FedEdge(), MemoryModelTopic(log)
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                        mix={"every_examples": EVERY, **mix})
    w = Worker(settings, edge=edge, model_topic=topic, store=store)
    w.model_log = topic  # type: ignore[attr-defined]  # what the test reads back
    return w, edge


def _run(w, data, cuts, shift, rng=None):
    """Rounds between consecutive cuts (shifted by ``shift``), partition 0 then 1 in each; with
    ``rng`` each round's batch is split again at random."""
    n = len(data[0])
    bounds = [0, *[c + shift for c in cuts if c + shift < n], n]
    for a, b in zip(bounds, bounds[1:], strict=False):
        for p in (0, 1):
            inner = [a, b]
            if rng is not None and b - a > 3:
                inner = [a, *sorted(rng.choice(np.arange(a + 1, b), 2, replace=False)), b]
            for s, e in zip(inner, inner[1:], strict=False):
                w.process(Batch.of(_records(data[p], p, s, e)))


def _preds(edge, p):
    return [v for t, _, v in edge.sent if t == "predictions" and v["partition"] == p]


def test_mixing_points_are_records_not_batch_ends(tmp_path):
    data = _stream()
    cuts = _mixing_points(data[0])
    assert cuts == _mixing_points(data[1]) and len(cuts) >= 10
    one, edge1 = _worker(tmp_path / "a")
    _run(one, data, cuts, 0)
    two, edge2 = _worker(tmp_path / "b")
    _run(two, data, cuts, 3, np.random.default_rng(1))  # each batch crosses a mixing point
    for p in (0, 1):
        assert _preds(edge1, p) == _preds(edge2, p)
        a, b = one.partitions.assigned[("in", p)], two.partitions.assigned[("in", p)]
        assert a.learner.model.weights.tobytes() == b.learner.model.weights.tobytes()
        assert a.mix.version == len(cuts)
    logs = [[r["log"] for r in w.model_log.written()] for w in (one, two)]
    assert logs[0] == logs[1]
    # the mix really mixes: partition 0's latest adoption holds both partitions' states
    last = one.partitions.assigned[("in", 0)].mix.last
    assert last["mix"]["partitions"] == [0, 1] and last["offset"] == cuts[-1]
    record = one.publisher.record(one.partitions.assigned[("in", 1)], {})
    assert record["mix"]["version"] == len(cuts) and record["mix"]["staleness"] in (0, 1)
    assert record["mix"]["mu"] == 0.5


def test_a_restored_state_replays_the_logged_adoptions_bit_for_bit(tmp_path):
    data = _stream(seed=4)
    cuts = _mixing_points(data[0])
    first, edge = _worker(tmp_path)
    head = cuts[3] + 10
    _run(first, {p: data[p][:head] for p in (0, 1)}, cuts[:4], 0)  # 4 mixing points, and 10 rows
    assert first.checkpoint("test")
    stored = {p: first.partitions.assigned[("in", p)].next_offset for p in (0, 1)}
    crash = len(data[0]) - 5
    for p in (0, 1):
        first.process(Batch.of(_records(data[p], p, stored[p], crash)))
    before = {p: first.partitions.assigned[("in", p)] for p in (0, 1)}
    emitted = {p: _preds(edge, p) for p in (0, 1)}
    # killed: nothing more stored. A new worker restores and replays partition 1 first, then 0,
    # in other cuts: a fresh mix would differ (partition 1 would not see partition 0's states)
    again, edge2 = _worker(tmp_path, log=list(first.model_log.log))
    old = 0
    again.restore()
    for p in (1, 0):
        for a in range(stored[p], crash, 17):
            again.process(Batch.of(_records(data[p], p, a, min(a + 17, crash))))
    for p in (0, 1):
        replayed = [v for t, _, v in edge2.sent[old:] if t == "predictions" and v["partition"] == p]
        assert replayed == [v for v in emitted[p] if v["offset"] >= stored[p]]
        assert len(replayed) == crash - stored[p]
        a, b = again.partitions.assigned[("in", p)], before[p]
        assert a.learner.state() == b.learner.state()
        assert a.learner.model.weights.tobytes() == b.learner.model.weights.tobytes()
        assert a.mix.get_state() == b.mix.get_state()
        assert not a.mix.replay  # every logged adoption was adopted again


def test_the_final_state_is_an_offline_replay_of_the_input_with_its_logged_mixes(tmp_path):
    data = _stream(seed=5)
    w, edge = _worker(tmp_path, weights="mistakes")
    _run(w, data, _mixing_points(data[0]), 2, np.random.default_rng(2))
    logged = {}
    for v in w.model_log.written():
        for e in v["log"]:
            assert logged.setdefault((v["partition"], e["offset"]), e) == e  # one mix per point
    for p in (0, 1):
        learner = new_learner(w.settings)
        mixes = sorted((o, e) for (q, o), e in logged.items() if q == p)
        bounds = [0, *[o for o, _ in mixes], len(data[p])]
        for k, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
            X = np.array([x for x, _ in data[p][a:b]])
            ys = [y for _, y in data[p][a:b]]
            learner.step(X, np.array([1 if y else -1 for y in ys]), np.array([y is not None for y in ys]))
            if k < len(mixes):
                adopt(learner.model, Mix.from_record(mixes[k][1]["mix"]))
        held = w.partitions.assigned[("in", p)].learner
        assert held.model.weights.tobytes() == learner.model.weights.tobytes()
        assert held.model.intercept == learner.model.intercept
        assert held.model.mistakes == learner.model.mistakes


def test_named_features_without_hashing_are_refused_at_the_first_mixing_point(tmp_path):
    w, _ = _worker(tmp_path)
    rows = [InRecord("in", 0, i, None, orjson.dumps({"x": {"a": float(i % 3) - 1}, "y": i % 2}), 0)
            for i in range(EVERY + 1)]
    with pytest.raises(SettingsError, match="SP_MODEL__HASH_BITS"):
        w.process(Batch.of(rows))


@pytest.mark.parametrize("average", [False, True])
def test_hashed_named_features_mix(tmp_path, average):
    """With SP_MODEL__HASH_BITS every partition's index j is the same hashed name: they mix."""
    topic = MemoryModelTopic()
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                        mix={"every_examples": EVERY}, model={"hash_bits": 6, "average": average})
    w = Worker(settings, edge=MemoryEdge(), model_topic=topic)
    n = 3 * EVERY
    for p in (0, 1):
        w.process(Batch.of([InRecord("in", p, i, None, orjson.dumps(
            {"x": {f"f{(i + p) % 7}": 1.0, "g": -0.5}, "y": (i // 3 + p) % 2}), 0) for i in range(n)]))
    records = topic.written()
    assert len(records) == 2 + 2 * (n // EVERY)  # each partition's claim, then its mixing points
    last = Mix.from_record(records[-1]["log"][-1]["mix"])
    assert last.partitions == (0, 1) and len(last.weights) == 2**6
    assert w.partitions.assigned[("in", 1)].learner.model.weights.tolist() == last.weights.tolist()


def test_a_wide_hashed_model_mixes_through_records_in_chunks(tmp_path):
    """2^20 hashed weights, many of them learned: each mixing record takes several chunks of
    SP_CHECKPOINT__CHUNK_BYTES, and a reader puts them back together bit for bit."""
    topic = MemoryModelTopic()
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path), "chunk_bytes": 65_536},
                        mix={"every_examples": EVERY}, model={"hash_bits": 20})
    w = Worker(settings, edge=MemoryEdge(), model_topic=topic)
    rng = np.random.default_rng(0)
    rows = [InRecord("in", 0, i, None, orjson.dumps(
        {"x": {f"f{j}": float(rng.normal()) for j in rng.choice(50_000, size=200, replace=False)},
         "y": i % 2}), 0) for i in range(2 * EVERY)]
    w.process(Batch.of(rows))
    chunks = [key for key, _ in topic.log if ":chunk:" in key]
    assert len(chunks) > 2 * 3  # every record in several chunks
    assert max(len(v or b"") for _, v in topic.log) <= 65_536
    written = topic.written()
    model = w.partitions.assigned[("in", 0)].learner.model
    last = Mix.from_record(written[-1]["log"][-1]["mix"])
    assert len(last.weights) == 2**20 and np.count_nonzero(model.weights) > 2_000
    assert last.weights.tobytes() == model.weights.tobytes()  # one partition: the mix is its own state


def test_mixing_refuses_exactly_once(tmp_path):
    with pytest.raises(ValueError, match="SP_MIX__EVERY_EXAMPLES=5 with SP_OUTPUT__GUARANTEE"):
        Settings(mix={"every_examples": 5}, output={"guarantee": "exactly-once"},
                 checkpoint={"store": "kafka"})


def test_checkpoint_show_prints_each_partitions_latest_mix(tmp_path):
    from stream_perceptron.commands.checkpoint import show_directory

    data = _stream(seed=6)
    w, _ = _worker(tmp_path)
    _run(w, data, _mixing_points(data[0]), 0)
    assert w.checkpoint("test")
    shown = show_directory(tmp_path)["partitions"]
    for p in (0, 1):
        st = w.partitions.assigned[("in", p)]
        mixed = shown[f"in:{p}"]["mixed"]
        assert mixed["version"] == st.mix.version and mixed["offset"] == st.mix.last["offset"]
        assert mixed["weights"] == st.mix.last["mix"]["weights"] and mixed["partitions"] == [0, 1]
        assert mixed["sum_mu_k"] == st.mix.sum_mu_k > 0
    plain, _ = _worker(tmp_path / "plain", every_examples=0)
    plain.process(Batch.of(_records(data[0], 0, 0, 50)))
    assert plain.checkpoint("test")
    assert "mixed" not in show_directory(tmp_path / "plain")


def test_a_zombies_records_are_ignored_once_the_owner_has_claimed_the_partition(tmp_path):
    """Worker a holds in[0] and mixes; worker b takes in[0] over (a stalled: a zombie) and writes
    its claim; a, waking before its reader has read that claim, mixes again and writes. Every
    reader takes b's record for in[0]."""
    data = _stream(seed=7)
    zombie, _ = _worker(tmp_path / "ck")  # one store: the two claims are of one partition
    log = zombie.model_log.log
    owner, _ = _worker(tmp_path / "ck", log=log)
    point, second = _mixing_points(data[0])[:2]
    zombie.process(Batch.of(_records(data[0], 0, 0, point)))  # its first mixing point: written
    owner.process(Batch.of(_records(data[0], 0, 0, 1)))  # b claims in[0] (a later claim), learns a row
    assert owner.partitions.assigned[("in", 0)].epoch > zombie.partitions.assigned[("in", 0)].epoch
    zombie.model_log.blind = True  # its reader has not read b's claim yet (else it stops: below)
    zombie.process(Batch.of(_records(data[0], 0, point, second + 1)))  # the zombie mixes on, writes
    assert [r["offset"] for r in MemoryModelTopic(log).written()][-1] == second
    index = ModelTopicIndex()
    for key, value in MemoryModelTopic(log).newer():
        index.add(key, value)
    newest = index.newest("in")[0]
    assert newest["offset"] == 0  # b's claim: at its stored offset (none: 0)
    # and the adoption a logged past it, which b adopts again at its offset, as a replay does
    assert [e["offset"] for e in newest["log"]] == [point]
    third, _ = _worker(tmp_path / "c", log=log)  # another partition's mixer sees b's state of in[0]
    third.process(Batch.of(_records(data[1], 1, 0, _mixing_points(data[1])[0])))
    mixed = third.partitions.assigned[("in", 1)].mix.last["mix"]
    # in[0]'s state as b claimed it, before any mixing point of its own (version 0): not mixed;
    # the zombie's, at its second mixing point, is not either
    assert mixed["partitions"] == [1]


def test_with_the_kafka_store_a_zombie_that_stored_no_state_is_ignored_too(tmp_path):
    """As above, on the Kafka store, before the zombie has stored any state of in[0]: the store
    gives the owner the zombie's own epoch (1 + that of the newest stored state). The owner's
    claim record fences the zombie's later records all the same: on the model topic its claim is
    above every epoch the topic has shown for the partition."""
    data = _stream(seed=7)
    state_log = MemoryLog(partitions=1)
    zombie, _ = _worker(tmp_path / "a", store=KafkaStore(state_log, chunk_bytes=1 << 20))
    log = zombie.model_log.log
    owner, _ = _worker(tmp_path / "b", log=log, store=KafkaStore(state_log, chunk_bytes=1 << 20))
    point, second = _mixing_points(data[0])[:2]
    zombie.process(Batch.of(_records(data[0], 0, 0, point)))  # its first mixing point; no state stored
    owner.process(Batch.of(_records(data[0], 0, 0, 1)))  # b claims in[0], learns a row
    zombie.model_log.blind = True  # its reader has not read b's claim yet
    zombie.process(Batch.of(_records(data[0], 0, point, second + 1)))  # the zombie mixes on, writes
    assert [r["offset"] for r in MemoryModelTopic(log).written()][-1] == second
    index = ModelTopicIndex()
    for key, value in MemoryModelTopic(log).newer():
        index.add(key, value)
    assert index.newest("in")[0]["offset"] == 0  # b's claim, not the zombie's record at `second`
    assert owner.partitions.assigned[("in", 0)].epoch == zombie.partitions.assigned[("in", 0)].epoch == 1
    assert [e for e, _ in written_under_claims(log)] == [1, 1, 2, 1]  # a's claim and point, b's, a's


def test_with_the_kafka_store_a_zombies_stored_state_never_replaces_the_owners_mixes(tmp_path):
    """a holds in[0] and stalls before its first mixing point; b claims in[0], mixes there anew (no
    other partition has published yet) and predicts on; c publishes in[1]'s state; a, resumed,
    reaches the same point with b's claim in its view of the model topic: it stops there, making
    no mix, writing no record and storing no state (the Kafka store could not refuse one), though
    in[1]'s state would have given it a mix of its own. b is killed having stored none. The next
    owner d predicts what b did: b's mix is the one the model topic's readers take at that point."""
    data = _stream(seed=9)
    state_log = MemoryLog(partitions=1)

    def worker(name, log=None):
        return _worker(tmp_path / name, log=log, store=KafkaStore(state_log, chunk_bytes=1 << 20))

    zombie, zombie_edge = worker("a")
    log = zombie.model_log.log
    (owner, owner_edge), (other, _) = worker("b", log), worker("c", log)
    point = _mixing_points(data[0])[0]
    zombie.process(Batch.of(_records(data[0], 0, 0, point - 1)))  # stalls before its first mixing point
    owner.process(Batch.of(_records(data[0], 0, 0, point + 20)))  # claims in[0], mixes at `point` alone
    assert owner.partitions.assigned[("in", 0)].mix.last["mix"]["partitions"] == [0]
    other.process(Batch.of(_records(data[1], 1, 0, _mixing_points(data[1])[0])))  # in[1] publishes
    records = len(log)
    zombie.process(Batch.of(_records(data[0], 0, point - 1, point + 10)))  # reaches the point: stops
    st = zombie.partitions.assigned[("in", 0)]
    assert st.fenced and st.mix.last is None and st.mix.version == 0  # no mix
    assert len(log) == records  # no record
    assert len(_preds(zombie_edge, 0)) == point  # none past the point
    assert zombie.checkpoint("test")
    assert KafkaStore(state_log, chunk_bytes=1 << 20).load("in", 0) is None  # no stored state
    index = ModelTopicIndex()
    for key, value in MemoryModelTopic(log).newer():
        index.add(key, value)
    assert index.newest("in")[0]["log"][-1]["mix"]["partitions"] == [0]  # readers take b's mix
    successor, successor_edge = worker("d", log)  # b is killed; d takes in[0] over
    successor.process(Batch.of(_records(data[0], 0, 0, point + 20)))
    assert _preds(successor_edge, 0) == _preds(owner_edge, 0)  # d re-emits what b sent
