"""Each input partition owns its state: restored from the store on every assignment (never from
what the worker remembers), committed once stored and never below the group's commit, fenced
when another worker has claimed it since, seeded by a `fit` or version-1 checkpoint, and learned
the same however partitions interleave. An in-memory edge stands in for Kafka (the broker-backed
versions are in tests/faults/test_partitions.py)."""

from __future__ import annotations

import re

import pytest

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.errors import CheckpointError
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker


class GroupEdge:
    """The consumer side of an edge: an assignment, the group's commits, the seeks made."""

    transactional = False  # the at-least-once mode
    in_transaction = False

    def __init__(self, committed: dict[tuple[str, int], int]) -> None:
        self.assigned: list[tuple[str, int]] = []
        self.committed_ = dict(committed)
        self.seeks: dict[tuple[str, int], int] = {}

    def assignment(self):
        return sorted(self.assigned)

    def committed(self, topic, partition):
        return self.committed_.get((topic, partition))

    def seek(self, topic, partition, offset):
        self.seeks[(topic, partition)] = offset

    def commit(self, offsets):
        self.committed_.update(offsets)

    def highwater(self, topic, partition):
        return None

    def send(self, topic, key, value):
        pass

    def send_many(self, topic, keys, values):
        pass

    def flush(self):
        pass


def _batch(partition: int, start: int, n: int) -> Batch:
    return Batch.of([InRecord("in", partition, i, None,
                              input_record([1.0, float(i % 7) - 3.0], 1 if i % 2 else -1, i), 0)
                     for i in range(start, start + n)])


def _worker(tmp_path, edge: GroupEdge, keep: int = 3) -> Worker:
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path / "ck"), "keep": keep})
    worker = Worker(settings, edge=edge)
    worker.restore()
    return worker


def _assign(worker: Worker, edge: GroupEdge, *partitions: int) -> None:
    new = [("in", p) for p in partitions]
    edge.assigned += new
    worker._on_assigned(new)


def _checkpointed(tmp_path, n: int) -> None:
    """A worker that learned offsets 0..n-1 of in[0] and stored them."""
    edge = GroupEdge({})
    worker = _worker(tmp_path, edge)
    _assign(worker, edge, 0)
    worker.process(_batch(0, 0, n))
    assert worker.checkpoint("shutdown")


def _files(tmp_path, partition: int = 0) -> list:
    return sorted((tmp_path / "ck" / "partitions" / "in" / str(partition)).glob("ckpt-*.json"))


def test_a_torn_newest_state_falls_back_and_the_commit_never_goes_back(tmp_path):
    edge = GroupEdge({})
    worker = _worker(tmp_path, edge)
    _assign(worker, edge, 0)
    worker.process(_batch(0, 0, 500))
    assert worker.checkpoint("interval")
    worker.process(_batch(0, 500, 500))
    assert worker.checkpoint("interval")
    assert edge.committed_ == {("in", 0): 1000}  # committed once stored
    newest = _files(tmp_path)[-1]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])

    again = GroupEdge(edge.committed_)
    restarted = _worker(tmp_path, again)
    _assign(restarted, again, 0)
    assert restarted.learner.stats.seen == 500 and again.seeks == {("in", 0): 500}  # replayed
    restarted.process(_batch(0, 500, 200))
    assert restarted.checkpoint("interval")
    assert again.committed_ == {("in", 0): 1000}  # 700 < 1000: not committed
    restarted.process(_batch(0, 700, 400))
    assert restarted.checkpoint("interval")
    assert again.committed_ == {("in", 0): 1100}


@pytest.mark.parametrize("reason", ["revocation", "shutdown"])
def test_a_handoff_stores_and_commits_every_moved_partition(tmp_path, reason):
    edge = GroupEdge({})
    worker = _worker(tmp_path, edge)
    _assign(worker, edge, 0, 1)
    worker.process(_batch(0, 0, 10))
    worker.process(_batch(1, 0, 30))
    assert worker.checkpoint(reason)
    assert edge.committed_ == {("in", 0): 10, ("in", 1): 30}
    assert len(_files(tmp_path, 0)) == len(_files(tmp_path, 1)) == 1
    assert worker.checkpoint(reason)  # nothing moved since: nothing stored again
    assert len(_files(tmp_path, 0)) == 1


def test_an_intact_state_this_worker_cannot_restore_is_one_error(tmp_path):
    from stream_perceptron.state.stored import StateFiles, StoredState

    _checkpointed(tmp_path, 10)
    store = StateFiles(tmp_path / "ck" / "partitions" / "in" / "0")
    good = store.load()
    assert good is not None
    stats = {k: v for k, v in good.stats.items() if k != "window_mistakes"}  # as a foreign writer might
    store.save(StoredState(good.model, good.config, stats, good.offsets))
    edge = GroupEdge({})
    worker = _worker(tmp_path, edge)
    _assign(worker, edge, 0)  # raised by the loop after the poll that ran the callback
    assert isinstance(worker._refused, CheckpointError) and worker.shutdown.asked
    assert re.search(r"is intact but not one this worker can restore \(KeyError", str(worker._refused))


def test_a_partition_s_stored_state_wins_over_the_group_commit(tmp_path):
    # the group's commit may be ahead (another owner since) or behind: the stored state wins
    _checkpointed(tmp_path, 500)
    for committed in (900, 100):
        again = GroupEdge({("in", 0): committed, ("in", 1): 40})
        restarted = _worker(tmp_path, again)
        _assign(restarted, again, 0, 1)
        assert again.seeks == {("in", 0): 500, ("in", 1): 40}


def test_a_reassigned_partition_is_restored_from_the_store_not_from_memory(tmp_path):
    # w1 held in[0], lost it to w2, which went on; w1 gets it back: it resumes from w2's state
    e1, e2 = GroupEdge({}), GroupEdge({})
    w1, w2 = _worker(tmp_path, e1), _worker(tmp_path, e2)
    _assign(w1, e1, 0)
    w1.process(_batch(0, 0, 100))
    w1._on_revoked([("in", 0)])
    e1.assigned = []
    _assign(w2, e2, 0)
    assert e2.seeks == {("in", 0): 100}
    w2.process(_batch(0, 100, 50))
    w2._on_revoked([("in", 0)])
    _assign(w1, e1, 0)
    assert e1.seeks == {("in", 0): 150} and w1.partitions.assigned[("in", 0)].learner.stats.seen == 150


def test_a_worker_that_lost_its_partition_while_stalled_cannot_overwrite_the_new_owner(tmp_path, caplog):
    e1, e2 = GroupEdge({}), GroupEdge({})
    w1, w2 = _worker(tmp_path, e1), _worker(tmp_path, e2)
    _assign(w1, e1, 0)
    w1.process(_batch(0, 0, 100))
    assert w1.checkpoint("interval")
    _assign(w2, e2, 0)  # w1 stalled past its session: the group gave in[0] to w2, which claims it
    w2.process(_batch(0, 100, 100))
    assert w2.checkpoint("interval")
    w1.process(_batch(0, 100, 50))  # w1 resumes with the batch it had polled
    assert w1.checkpoint("interval")  # the other partitions' states would be stored
    assert "was claimed by another worker since this one did" in caplog.text
    assert w1.partitions.assigned[("in", 0)].fenced and e1.committed_ == {("in", 0): 100}
    w1.process(_batch(0, 150, 50))  # nothing more of it is processed here
    assert w1.partitions.assigned[("in", 0)].next_offset == 150
    from stream_perceptron.state.directory import DirectoryStore

    assert DirectoryStore(tmp_path / "ck").load("in", 0).offsets == {"in": {0: 200}}  # w2's


def test_a_partition_s_learning_does_not_depend_on_how_partitions_interleave(tmp_path):
    def run(order, where):
        edge = GroupEdge({})
        worker = _worker(where, edge)
        _assign(worker, edge, 0, 1)
        for part, start, n in order:
            worker.process(_batch(part, start, n))
        return {tp: (st.learner.model.weights.tolist(), st.learner.model.intercept, st.next_offset)
                for tp, st in worker.partitions.assigned.items()}

    a = run([(0, 0, 40), (1, 0, 40), (0, 40, 40), (1, 40, 40)], tmp_path / "a")
    b = run([(1, 0, 80), (0, 0, 10), (0, 10, 70)], tmp_path / "b")
    assert a == b


def test_a_fit_checkpoint_seeds_each_partition_without_a_state_of_its_own(tmp_path):
    from stream_perceptron.state.stored import StateFiles, StoredState
    from stream_perceptron.worker.partition import new_learner

    learner = new_learner(Settings())
    fitted = learner.model
    for i in range(50):
        fitted.learn_one([1.0, float(i % 7) - 3.0], 1 if i % 2 else -1)
    model_state, stats_state = learner.state()
    StateFiles(tmp_path / "ck").save(
        StoredState(model_state, fitted.config(), stats_state, {}, model_id="ab" * 16))
    _checkpointed(tmp_path, 10)  # in[0] has a state of its own now (seeded, then learned)
    edge = GroupEdge({("in", 1): 7})
    worker = _worker(tmp_path, edge)
    _assign(worker, edge, 0, 1)
    seeded = worker.partitions.assigned[("in", 1)]
    assert seeded.learner.model.weights.tolist() == fitted.weights.tolist()
    assert seeded.model_id != "ab" * 16 and edge.seeks[("in", 1)] == 7  # a new model, at the commit
    assert worker.partitions.assigned[("in", 0)].learner.model.weights.tolist() != fitted.weights.tolist()


def test_a_version_1_directory_resumes_its_partition_where_it_stopped(tmp_path):
    from stream_perceptron.state.stored import StateFiles

    _checkpointed(tmp_path, 300)
    state = StateFiles(tmp_path / "ck" / "partitions" / "in" / "0").load()
    import shutil

    shutil.rmtree(tmp_path / "ck" / "partitions")
    StateFiles(tmp_path / "ck").save(state)  # a version-1 worker's checkpoint: at the top
    edge = GroupEdge({("in", 0): 100})
    worker = _worker(tmp_path, edge)
    _assign(worker, edge, 0)
    assert edge.seeks == {("in", 0): 300} and worker.partitions.assigned[("in", 0)].model_id == state.model_id
    assert worker.learner.stats.seen == 300


def test_a_worker_with_n_features_unset_adopts_the_stored_width(tmp_path):
    settings = Settings(observe={"enabled": False}, model={"n_features": 8},
                        checkpoint={"dir": str(tmp_path / "ck")})
    edge = GroupEdge({})
    worker = Worker(settings, edge=edge)
    worker.restore()
    _assign(worker, edge, 0)
    worker.process(_batch(0, 0, 10))
    assert worker.checkpoint("shutdown")
    again = GroupEdge({})
    restarted = _worker(tmp_path, again)  # n_features unset
    _assign(restarted, again, 0)
    assert restarted.learner.model.config()["n_features"] == 8
    assert restarted.learner.model.name_limit == 8  # named rows as the trained model took them


def test_a_partition_with_a_group_commit_and_no_stored_state_is_a_warning(tmp_path, caplog):
    # the sign of workers of one group on directories of their own: each starts the other's
    # partitions from zero weights at the commit
    edge = GroupEdge({("in", 0): 300, ("in", 1): 0})
    worker = _worker(tmp_path, edge)
    _assign(worker, edge, 0, 1)
    lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(lines) == 1 and lines[0].startswith(
        "in[0] has no stored state but the group committed offset 300: its model starts from zero"
        " weights there."), lines
    assert "share SP_CHECKPOINT__DIR (a shared volume) or use SP_CHECKPOINT__STORE=kafka" in lines[0]


def test_exactly_once_waits_for_the_state_the_group_s_commit_was_made_with(tmp_path, caplog):
    # a transaction left open in the state topic holds its newest state back from read_committed
    # readers: the assignment reads again until the state at the group's commit shows
    from stream_perceptron.state.directory import DirectoryStore

    _checkpointed(tmp_path, 100)
    edge = GroupEdge({})
    w = _worker(tmp_path, edge)
    _assign(w, edge, 0)
    w.process(_batch(0, 100, 50))
    assert w.checkpoint("interval")  # in[0] at 150; the group's commit too

    class HeldBack(DirectoryStore):
        """Answers the state before the newest for the first two loads."""

        loads = 0

        def load(self, topic, partition):
            HeldBack.loads += 1
            files = self.files(topic, partition)
            if HeldBack.loads <= 2:
                from stream_perceptron.state.stored import read

                return read(sorted(files.directory.glob("ckpt-*.json"))[-2])
            return super().load(topic, partition)

    settings = Settings(observe={"enabled": False}, output={"guarantee": "exactly-once"},
                        checkpoint={"dir": str(tmp_path / "ck"), "store": "kafka", "every_seconds": 5})
    again = GroupEdge(edge.committed_)
    restarted = Worker(settings, edge=again, store=HeldBack(tmp_path / "ck"))
    restarted.partitions.state_wait_s = 10
    _assign(restarted, again, 0)
    assert HeldBack.loads == 3 and again.seeks == {("in", 0): 150}
    assert "the stored state is at 100, the group's commit at 150: waiting" in caplog.text


def test_an_assignment_delivered_while_the_worker_shuts_down_is_not_taken(tmp_path):
    # confluent-kafka may deliver one while it closes, when the group's commits can no longer be read
    edge = GroupEdge({})
    worker = _worker(tmp_path, edge)
    worker.shutdown.begun = True
    _assign(worker, edge, 0)
    assert worker.partitions.assigned == {} and edge.seeks == {}


def test_a_group_commit_that_cannot_be_read_leaves_the_stored_state_in_charge(tmp_path, caplog):
    from stream_perceptron.errors import KafkaEdgeError

    _checkpointed(tmp_path, 40)

    class Unreadable(GroupEdge):
        def committed(self, topic, partition):
            raise KafkaEdgeError("fetching the committed offsets failed: the handle is closing")

    edge = Unreadable({})
    worker = _worker(tmp_path, edge)
    _assign(worker, edge, 0)
    assert edge.seeks == {("in", 0): 40} and worker._refused is None
    assert "the group's committed offset could not be read" in caplog.text
