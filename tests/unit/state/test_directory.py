"""The directory store: one set of checkpoint files per partition, claims that fence a worker
that lost its partition, the seed at the top, and a clear error for a directory it cannot use."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from stream_perceptron.errors import CheckpointError, FencedError
from stream_perceptron.model.learner import Learner
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.model.stats import RunningStats
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.state.store import partition_of
from stream_perceptron.state.stored import StateFiles, StoredState


def _state(topic: str, partition: int, offset: int, n: int = 5) -> StoredState:
    learner = Learner(Perceptron(), RunningStats())
    for i in range(n):
        learner.model.learn_one([1.0, float(i % 3) - 1.0], 1 if i % 2 else -1)
    model, stats = learner.state()
    return StoredState(model, learner.model.config(), stats, {topic: {partition: offset}})


def test_each_partition_has_files_of_its_own_and_load_answers_its_newest(tmp_path):
    store = DirectoryStore(tmp_path, keep=2)
    e0, e1 = store.claim("in", 0), store.claim("in", 1)
    for offset in (10, 20, 30):
        store.save(_state("in", 0, offset), e0)
    store.save(_state("in", 1, 7), e1)
    assert store.load("in", 0).offsets == {"in": {0: 30}}
    assert store.load("in", 1).offsets == {"in": {1: 7}}
    assert store.load("in", 2) is None
    assert len(list((tmp_path / "partitions" / "in" / "0").glob("ckpt-*.json"))) == 2  # keep=2
    assert store.partitions() == [("in", 0), ("in", 1)]


def test_a_save_after_another_claim_is_refused_and_stores_nothing(tmp_path):
    mine, theirs = DirectoryStore(tmp_path), DirectoryStore(tmp_path)
    epoch = mine.claim("in", 0)
    mine.save(_state("in", 0, 100), epoch)
    newer = theirs.claim("in", 0)
    assert newer == epoch + 1
    theirs.save(_state("in", 0, 200), newer)
    with pytest.raises(FencedError, match=r"in\[0\] was claimed by another worker since this one did"):
        mine.save(_state("in", 0, 150), epoch)
    assert DirectoryStore(tmp_path).load("in", 0).offsets == {"in": {0: 200}}


def test_claims_from_separate_processes_never_share_an_epoch(tmp_path):
    code = ("import sys; from stream_perceptron.state.directory import DirectoryStore;"
            f" s = DirectoryStore({str(tmp_path)!r});"
            " print(*[s.claim('in', 0) for _ in range(50)])")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    epochs = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        epochs += [int(e) for e in out.split()]
    assert sorted(epochs) == list(range(1, 201))


def test_a_partition_whose_files_are_all_damaged_is_refused(tmp_path):
    store = DirectoryStore(tmp_path)
    store.save(_state("in", 0, 5), store.claim("in", 0))
    (path,) = (tmp_path / "partitions" / "in" / "0").glob("ckpt-*.json")
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(CheckpointError, match="none of the 1 checkpoint files .* is valid"):
        DirectoryStore(tmp_path).load("in", 0)


def test_a_reader_that_lists_before_the_first_file_is_written_sees_no_state(tmp_path, monkeypatch):
    # A reader beside a worker: its listing comes back empty, then the worker writes its first
    # file. That file is not damaged; the reader sees "no state yet", not a refusal.
    writer = DirectoryStore(tmp_path)
    epoch = writer.claim("in", 0)
    listed = StateFiles._files
    written = []

    def list_then_write(self):
        found = listed(self)
        if not written:
            written.append(True)
            writer.save(_state("in", 0, 5), epoch)
        return found

    monkeypatch.setattr(StateFiles, "_files", list_then_write)
    assert DirectoryStore(tmp_path).load("in", 0) is None
    monkeypatch.undo()
    assert DirectoryStore(tmp_path).load("in", 0).offsets == {"in": {0: 5}}


def test_the_seed_is_the_newest_checkpoint_at_the_top(tmp_path):
    assert DirectoryStore(tmp_path).initial() is None
    StateFiles(tmp_path).save(_state("in", 0, 3))
    store = DirectoryStore(tmp_path)
    store.save(_state("in", 0, 9), store.claim("in", 0))
    assert store.initial().offsets == {"in": {0: 3}}  # the partitions' own files are not the initial model


def test_a_directory_that_cannot_be_made_is_one_error_naming_the_setting(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(CheckpointError,
                       match=r"afile/ck cannot be used: Not a directory.*\(SP_CHECKPOINT__DIR\)"):
        DirectoryStore(tmp_path / "afile" / "ck").open()
    DirectoryStore(tmp_path / "new" / "ck").open()
    assert (tmp_path / "new" / "ck").is_dir()


def test_a_state_holds_exactly_one_partition(tmp_path):
    assert partition_of(_state("in", 3, 12)) == ("in", 3, 12)
    two = _state("in", 0, 1)
    two.offsets["in"][1] = 2
    with pytest.raises(ValueError, match="one offset"):
        DirectoryStore(tmp_path).save(two, 1)


@pytest.mark.parametrize(("umask", "file_mode", "dir_mode"), [
    (0o022, 0o600, 0o700),  # the usual umask: the worker's modes
    (0o000, 0o600, 0o700),  # no umask: the worker's modes still
    (0o077, 0o600, 0o700),
    (0o277, 0o400, 0o500),  # a stricter umask wins
])
def test_the_workers_files_are_its_users_alone_unless_the_umask_is_stricter(
        tmp_path, umask, file_mode, dir_mode):
    previous = os.umask(umask)
    try:
        store = DirectoryStore(tmp_path / "ck" / "deep")
        store.open()
        epoch = store.claim("in", 0)
        store.save(_state("in", 0, 7), epoch)
    finally:
        os.umask(previous)
    made = [tmp_path / "ck", tmp_path / "ck" / "deep", *(tmp_path / "ck").rglob("*")]
    modes = {p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in made}
    assert {m for p, m in modes.items() if (tmp_path / p).is_dir()} == {dir_mode}, modes
    assert {m for p, m in modes.items() if (tmp_path / p).is_file()} == {file_mode}, modes
    assert any(p.endswith(".json") for p in modes) and any(p.endswith("claim") for p in modes)


def test_a_directory_that_exists_keeps_its_mode(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o770)
    os.chmod(shared, 0o770)  # a group's volume, as an operator made it
    DirectoryStore(shared).open()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o770
