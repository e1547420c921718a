"""Checkpoints: exact round trip, atomicity, fallback past damaged files, configuration checks."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import orjson
import pytest

from stream_perceptron import Perceptron, RunningStats
from stream_perceptron.errors import CheckpointError, CheckpointMismatchError, CheckpointUnreadableError
from stream_perceptron.model.learner import Learner
from stream_perceptron.state.stored import StateFiles, StoredState, new_model_id, read
from tests.symlinks import point


def _trained(seed=0, n=300, d=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.exp(rng.normal(size=(n, 1)))  # awkward floats
    y = np.where(X @ rng.normal(size=d) > 0, 1, -1).astype(np.int8)
    learner = Learner(Perceptron(), RunningStats(window=50))
    learner.step(X, y)
    return learner


def _ckpt(learner, offsets=None):
    model, stats = learner.state()
    return StoredState(model=model, config=learner.model.config(), stats=stats,
                      offsets=offsets or {"in": {0: 300}})


def test_round_trip_restores_bit_identical_weights(tmp_path):
    learner = _trained()
    store = StateFiles(tmp_path)
    store.save(_ckpt(learner, {"in": {0: 300, 3: 12}}))
    loaded = store.load()
    restored = Learner(Perceptron(), RunningStats(window=50))
    restored.restore(loaded.model, loaded.stats)
    assert restored.model.weights.tobytes() == learner.model.weights.tobytes()
    assert restored.model.intercept == learner.model.intercept
    assert restored.model.mistakes == learner.model.mistakes
    assert restored.stats.snapshot() == learner.stats.snapshot()
    assert loaded.offsets == {"in": {0: 300, 3: 12}}


def test_the_model_id_round_trips_and_a_file_without_one_still_reads(tmp_path):
    model_id = new_model_id()
    assert len(model_id) == 32 and int(model_id, 16) >= 0 and model_id != new_model_id()
    store = StateFiles(tmp_path)
    ckpt = _ckpt(_trained())
    ckpt.model_id = model_id
    path = store.save(ckpt)
    assert orjson.loads(path.read_bytes().split(b"\n")[1])["model_id"] == model_id
    assert store.load().model_id == model_id
    older = store.save(_ckpt(_trained()))  # as a build before model_id wrote it
    raw = older.read_bytes()
    assert b"model_id" not in raw
    # named by its checksum: every restart from this file gives the model the same id
    named = orjson.loads(raw.split(b"\n")[0])["sha256"][:32]
    assert store.load().model_id == named == StateFiles(tmp_path).load().model_id


def test_keeps_the_last_k(tmp_path):
    store = StateFiles(tmp_path, keep=2)
    learner = _trained()
    for i in range(5):
        store.save(_ckpt(learner, {"in": {0: i}}))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt-000000000004.json", "ckpt-000000000005.json"]
    assert store.load().offsets == {"in": {0: 4}}


def _with_header(raw: bytes, **changes) -> bytes:
    head, _, body = raw.partition(b"\n")
    header = {**orjson.loads(head), **changes}
    return orjson.dumps(header) + b"\n" + body


def _signed_body(raw: bytes, body: bytes) -> bytes:
    """A file whose checksum holds but whose body is not a checkpoint's."""
    head, _, _ = raw.partition(b"\n")
    header = {**orjson.loads(head), "length": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    return orjson.dumps(header) + b"\n" + body


_DAMAGE = {
    "truncate": lambda raw: raw[: len(raw) // 2],
    "flip": lambda raw: raw[:-20] + bytes([raw[-20] ^ 1]) + raw[-19:],
    "empty": lambda raw: b"",
    "garbage_header": lambda raw: b"not json\n" + raw,
    # one changed byte that keeps the header JSON: a length that is no index
    "length_float": lambda raw: raw.replace(b'"length":', b'"length":0.', 1),
    "length_infinite": lambda raw: _with_header(raw, length=None).replace(b":null", b":1e999"),
    "length_negative": lambda raw: _with_header(raw, length=-1),
    "length_text": lambda raw: _with_header(raw, length="12"),
    "length_bool": lambda raw: _with_header(raw, length=True),
    "sha256_missing": lambda raw: _with_header(raw, sha256=None),
    "body_not_json": lambda raw: _signed_body(raw, b"{not json"),
    "body_not_an_object": lambda raw: _signed_body(raw, b"[1, 2]"),
    "body_missing_offsets": lambda raw: _signed_body(raw, b'{"model": {}, "config": {}, "stats": {}}'),
    "body_bad_offset": lambda raw: _signed_body(
        raw, b'{"model": {}, "config": {}, "stats": {}, "offsets": {"in": {"0": "x"}}, "created": 0}'),
    "body_bad_model_id": lambda raw: _signed_body(
        raw, b'{"model": {}, "config": {}, "stats": {}, "offsets": {}, "created": 0, "model_id": 7}'),
}


@pytest.mark.parametrize("damage", sorted(_DAMAGE))
def test_damaged_newest_file_falls_back_to_the_previous(tmp_path, damage, caplog):
    store = StateFiles(tmp_path)
    store.save(_ckpt(_trained(1), {"in": {0: 100}}))
    newest = store.save(_ckpt(_trained(2), {"in": {0: 200}}))
    newest.write_bytes(_DAMAGE[damage](newest.read_bytes()))
    loaded = store.load()
    assert loaded.offsets == {"in": {0: 100}}
    assert "skipping checkpoint" in caplog.text
    with pytest.raises(CheckpointError):
        read(newest)


def test_leftover_temp_file_is_ignored(tmp_path):
    store = StateFiles(tmp_path)
    store.save(_ckpt(_trained(), {"in": {0: 1}}))
    (tmp_path / ".ckpt-000000000002.json.tmp").write_bytes(b"half a write")
    assert store.load().offsets == {"in": {0: 1}}
    assert store.save(_ckpt(_trained(), {"in": {0: 2}})).name == "ckpt-000000000002.json"


def test_empty_directory_has_no_checkpoint(tmp_path):
    assert StateFiles(tmp_path / "missing").load() is None


def test_mismatched_configuration_fails_clearly(tmp_path):
    store = StateFiles(tmp_path)
    store.save(_ckpt(_trained(d=6)))
    loaded = store.load()
    with pytest.raises(CheckpointMismatchError,
                       match=r"fit_intercept=True there, False here \(SP_MODEL__FIT_INTERCEPT\)"):
        loaded.check_config({"n_features": None, "fit_intercept": False})
    with pytest.raises(CheckpointMismatchError, match=r"n_features=6 there, 4 here \(SP_MODEL__N_FEATURES\)"
                                                      r".*point SP_CHECKPOINT__DIR elsewhere"):
        loaded.check_config({"n_features": 4, "fit_intercept": True})
    loaded.check_config({"n_features": 6, "fit_intercept": True})
    loaded.check_config({"n_features": None, "fit_intercept": True})


def test_unwritable_directory_raises_and_keeps_the_old_checkpoint(tmp_path):
    store = StateFiles(tmp_path)
    store.save(_ckpt(_trained(), {"in": {0: 1}}))
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CheckpointError, match="cannot write checkpoint"):
        StateFiles(blocker / "sub").save(_ckpt(_trained()))
    assert store.load().offsets == {"in": {0: 1}}


def test_storage_returning_during_a_save_still_gives_the_newest_number(tmp_path, monkeypatch):
    real, blocker, link = tmp_path / "real", tmp_path / "blocker", tmp_path / "store"
    real.mkdir()
    blocker.write_text("not a directory\n")
    point(link, real)
    store, learner = StateFiles(link, keep=3), _trained()
    for offset in (1, 2, 3, 4):
        store.save(_ckpt(learner, {"in": {0: offset}}))
    point(link, blocker)  # the storage goes away: the directory is now a regular file
    with pytest.raises(CheckpointError):
        store.save(_ckpt(learner, {"in": {0: 5}}))
    real_mkdir = Path.mkdir

    def storage_returns(self, *args, **kwargs):  # ...just as the next save begins
        point(link, real)
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", storage_returns)
    path = store.save(_ckpt(learner, {"in": {0: 6}}))
    monkeypatch.undo()
    assert path.name == "ckpt-000000000005.json"
    assert [p.name for p in StateFiles(link).files()] == [
        "ckpt-000000000003.json", "ckpt-000000000004.json", "ckpt-000000000005.json"]
    assert StateFiles(link).load().offsets == {"in": {0: 6}}  # what a restart would load


def test_a_loaded_store_numbers_past_every_file_it_saw(tmp_path):
    learner = _trained()
    first = StateFiles(tmp_path)
    for offset in (1, 2):
        first.save(_ckpt(learner, {"in": {0: offset}}))
    (tmp_path / "ckpt-000000000002.json").write_text("damaged")
    second = StateFiles(tmp_path)
    assert second.load().offsets == {"in": {0: 1}}
    assert second.save(_ckpt(learner, {"in": {0: 3}})).name == "ckpt-000000000003.json"
    assert StateFiles(tmp_path).load().offsets == {"in": {0: 3}}


def test_a_checkpoint_path_that_is_not_a_directory_is_refused(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(CheckpointError, match="is not a directory"):
        StateFiles(tmp_path / "file").load()
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(CheckpointError, match="a symlink to nothing"):
        StateFiles(tmp_path / "dangling").load()
    assert StateFiles(tmp_path / "absent").load() is None  # a first start


def test_a_newest_checkpoint_that_cannot_be_read_stops_the_load(tmp_path):
    store, learner = StateFiles(tmp_path), _trained()
    for offset in (1, 2):
        store.save(_ckpt(learner, {"in": {0: offset}}))
    (tmp_path / "ckpt-000000000003.json").mkdir()  # reading it fails with an OSError, not damage
    with pytest.raises(CheckpointUnreadableError, match="ckpt-000000000003.json"):
        StateFiles(tmp_path).load()


def test_an_old_checkpoint_that_cannot_be_pruned_does_not_fail_the_save(tmp_path, caplog):
    (tmp_path / "ckpt-000000000001.json").mkdir()
    (tmp_path / "ckpt-000000000001.json" / "x").write_text("")
    store = StateFiles(tmp_path, keep=1)
    path = store.save(_ckpt(_trained(), {"in": {0: 5}}))
    assert path.name == "ckpt-000000000002.json"
    assert "cannot remove old checkpoint" in caplog.text
    assert StateFiles(tmp_path).load().offsets == {"in": {0: 5}}


def test_a_directory_that_cannot_be_listed_is_one_error_not_damage(tmp_path, monkeypatch):
    # EACCES or EIO on the directory itself (a volume mounted for another user, say)
    store = StateFiles(tmp_path)

    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", refuse)
    with pytest.raises(CheckpointUnreadableError,
                       match="^cannot list checkpoint directory .*: Permission denied$"):
        store.load()


def test_a_directory_the_first_save_creates_is_made_durable_in_its_parent(tmp_path, monkeypatch):
    import stream_perceptron.state.stored as stored

    synced: list[Path] = []
    real = stored._fsync_dir
    monkeypatch.setattr(stored, "_fsync_dir", lambda d: (synced.append(Path(d)), real(d)))
    StateFiles(tmp_path / "a" / "b").save(_ckpt(_trained()))
    assert synced == [tmp_path, tmp_path / "a", tmp_path / "a" / "b"]
    synced.clear()
    StateFiles(tmp_path / "a" / "b").save(_ckpt(_trained()))
    assert synced == [tmp_path / "a" / "b"]  # nothing new above it


def test_set_aside_moves_every_checkpoint_file_into_a_subdirectory_load_does_not_read(tmp_path):
    store = StateFiles(tmp_path, keep=3)
    assert store.set_aside() is None  # nothing to move
    for _ in range(2):
        store.save(_ckpt(_trained(d=3)))
    (tmp_path / "ckpt-000000000003.json").write_text("damaged")  # moved too: not a model to keep
    before = {p.name: p.read_bytes() for p in tmp_path.glob("ckpt-*.json")}
    aside = store.set_aside()
    assert aside is not None and aside.parent == tmp_path and aside.name.startswith("replaced-")
    assert {p.name: p.read_bytes() for p in aside.iterdir()} == before
    assert list(tmp_path.glob("ckpt-*.json")) == [] and StateFiles(tmp_path).load() is None
    newest = store.save(_ckpt(_trained(d=3)))
    second = store.set_aside()  # the same second: a directory of its own
    assert second is not None and second != aside and [p.name for p in second.iterdir()] == [newest.name]


def test_a_reader_whose_listed_files_were_all_pruned_lists_again(tmp_path, monkeypatch, caplog):
    # a reader beside a running worker (a test polling its directory, `checkpoint show`) lists
    # the files, is descheduled while the worker saves `keep` more, and finds every listed file
    # pruned: it must read the newer ones, not report the directory as holding none valid
    from stream_perceptron.state import stored as module

    learner = _trained()
    writer = StateFiles(tmp_path, keep=2)
    for offset in (100, 200):
        writer.save(_ckpt(learner, {"in": {0: offset}}))
    real_read, calls = module.read, []

    def read_after_the_writer_moved_on(path, seq=0):
        if not calls:  # before the first read: the worker saves twice, pruning what was listed
            for offset in (300, 400):
                writer.save(_ckpt(learner, {"in": {0: offset}}))
        calls.append(path.name)
        return real_read(path, seq)

    monkeypatch.setattr(module, "read", read_after_the_writer_moved_on)
    loaded = StateFiles(tmp_path).load()
    assert loaded is not None and loaded.offsets == {"in": {0: 400}}
    assert calls[:2] == ["ckpt-000000000002.json", "ckpt-000000000001.json"]  # both pruned
    assert "skipping checkpoint" not in caplog.text  # pruned is not damaged
