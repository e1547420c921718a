"""A restart that falls back past a damaged newest checkpoint replays what the restored one never
learned: a partition's offset is committed only once every kept checkpoint holds it, except on a
handoff (revocation, shutdown). An in-memory edge stands in for Kafka."""

from __future__ import annotations

import pytest

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.errors import CheckpointError
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker


class GroupEdge:
    """The consumer side of an edge: an assignment, the group's commits, the seeks made."""

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
    """A worker that learned offsets 0..n-1 of in[0] and checkpointed them."""
    edge = GroupEdge({})
    worker = _worker(tmp_path, edge)
    _assign(worker, edge, 0)
    worker.process(_batch(0, 0, n))
    assert worker.checkpoint("shutdown")


def _tear_newest(tmp_path) -> None:
    newest = sorted((tmp_path / "ck").glob("ckpt-*.json"))[-1]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])


def test_a_partition_taken_since_the_previous_checkpoint_is_replayed_after_a_fallback(tmp_path):
    edge = GroupEdge({("in", 1): 1000})  # another member had processed in[1] up to 1000
    worker = _worker(tmp_path, edge)
    _assign(worker, edge, 0)
    worker.process(_batch(0, 0, 500))
    assert worker.checkpoint("interval")  # 1: in[0]
    assert edge.committed_[("in", 0)] == 500  # every kept checkpoint holds in[0]
    _assign(worker, edge, 1)  # in[1] starts at the group's commit
    worker.process(_batch(1, 1000, 1000))
    assert worker.checkpoint("interval")  # 2: in[0], in[1] = 2000
    assert edge.committed_[("in", 1)] == 1000  # checkpoint 1 never saw in[1]: not committed yet
    _tear_newest(tmp_path)

    again = GroupEdge(edge.committed_)
    restarted = _worker(tmp_path, again)  # falls back to checkpoint 1
    _assign(restarted, again, 0, 1)
    assert restarted.learner.stats.seen == 500
    assert again.seeks == {("in", 0): 500, ("in", 1): 1000}  # in[1] 1000..1999 replayed


def test_a_partition_is_committed_once_every_kept_checkpoint_holds_it(tmp_path):
    edge = GroupEdge({})
    worker = _worker(tmp_path, edge, keep=2)
    _assign(worker, edge, 0)
    worker.process(_batch(0, 0, 10))
    assert worker.checkpoint("interval")
    _assign(worker, edge, 1)
    worker.process(_batch(1, 0, 10))
    assert worker.checkpoint("interval")  # kept: {in0}, {in0, in1}
    assert ("in", 1) not in edge.committed_
    worker.process(_batch(1, 10, 10))
    assert worker.checkpoint("interval")  # kept: {in0, in1}, {in0, in1}
    assert edge.committed_ == {("in", 0): 10, ("in", 1): 20}


@pytest.mark.parametrize("reason", ["revocation", "shutdown"])
def test_a_handoff_commits_every_partition_even_with_nothing_new(tmp_path, reason):
    # the next owner starts at the group's commit: it must be where this worker stopped
    edge = GroupEdge({})
    worker = _worker(tmp_path, edge)
    _assign(worker, edge, 0)
    worker.process(_batch(0, 0, 10))
    assert worker.checkpoint("interval")
    _assign(worker, edge, 1)
    worker.process(_batch(1, 0, 10))
    assert worker.checkpoint("interval")
    assert ("in", 1) not in edge.committed_
    assert worker.checkpoint(reason)  # nothing new since: no file written, the commit still made
    assert edge.committed_ == {("in", 0): 10, ("in", 1): 10}
    assert len(list((tmp_path / "ck").glob("ckpt-*.json"))) == 2


def test_an_intact_checkpoint_this_worker_cannot_restore_is_one_error(tmp_path):
    from stream_perceptron.state.checkpoint import Checkpoint, CheckpointStore

    _checkpointed(tmp_path, 10)
    store = CheckpointStore(tmp_path / "ck")
    good = store.load()
    assert good is not None
    stats = {k: v for k, v in good.stats.items() if k != "window_mistakes"}  # as a foreign writer might
    store.save(Checkpoint(good.model, good.config, stats, good.offsets))
    with pytest.raises(CheckpointError, match=r"is intact but not one this worker can restore \(KeyError"):
        _worker(tmp_path, GroupEdge({}))


def test_a_partition_the_checkpoint_holds_starts_at_the_checkpoint_not_the_group_commit(tmp_path):
    # the group's commit may be ahead (another owner since) or behind: the checkpoint wins
    _checkpointed(tmp_path, 500)
    for committed in (900, 100):
        again = GroupEdge({("in", 0): committed, ("in", 1): 40})
        restarted = _worker(tmp_path, again)
        _assign(restarted, again, 0, 1)
        assert again.seeks == {("in", 0): 500, ("in", 1): 40}


def test_a_worker_with_n_features_unset_adopts_the_checkpoint_s(tmp_path):
    settings = Settings(observe={"enabled": False}, model={"n_features": 8},
                        checkpoint={"dir": str(tmp_path / "ck")})
    edge = GroupEdge({})
    worker = Worker(settings, edge=edge)
    worker.restore()
    _assign(worker, edge, 0)
    worker.process(_batch(0, 0, 10))
    assert worker.checkpoint("shutdown")
    restarted = _worker(tmp_path, GroupEdge({}))  # n_features unset
    assert restarted.learner.model.config()["n_features"] == 8
    assert restarted.learner.model.name_limit == 8  # named rows as the trained model took them
