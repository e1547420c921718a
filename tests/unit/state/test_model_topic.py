"""The model topic's records as an audit reads them: every mixing record written, with the epoch
of the claim it was written under."""

from __future__ import annotations

from stream_perceptron.state.model_topic import ModelTopicIndex, encode, written, written_under_claims


def _record(offset: int, weights: int = 0) -> dict:
    return {"topic": "in", "partition": 0, "offset": offset,
            "state": {"weights": [0.5] * weights}, "log": [], "ts": 0.0}


def test_every_record_comes_with_the_epoch_of_its_claim_tombstoned_or_not():
    owner = encode(_record(3), epoch=2, writer="b-2", chunk_bytes=1024)
    zombie = encode(_record(9, weights=400), epoch=1, writer="a-1", chunk_bytes=1024)
    later = encode(_record(12), epoch=2, writer="b-2", chunk_bytes=1024)
    assert len(zombie) > 2  # chunks, then the manifest
    topic = [(r.key, r.value) for r in (*owner, *zombie, *later)]
    topic += [(r.key, None) for r in owner if ":chunk:" in r.key]  # b's first record tombstoned
    got = written_under_claims(topic)
    assert [(epoch, r["offset"]) for epoch, r in got] == [(2, 3), (1, 9), (2, 12)]
    assert got[1][1] == _record(9, weights=400)  # put together from its chunks
    assert written(topic) == [r for _, r in got]


def test_chunks_without_their_manifest_are_no_record():
    whole = encode(_record(5, weights=400), epoch=1, writer="a-1", chunk_bytes=1024)
    assert written_under_claims([(r.key, r.value) for r in whole[:-1]]) == []
    assert written_under_claims([(r.key, r.value) for r in whole[1:]]) == []  # a chunk missing


def test_a_partitions_highest_epoch_stays_when_its_record_is_superseded_or_tombstoned():
    index = ModelTopicIndex()
    assert index.epoch("in", 0) == -1  # none read
    owner = encode(_record(3), epoch=4, writer="b-4", chunk_bytes=1024)
    for r in (*encode(_record(1), epoch=2, writer="a-2", chunk_bytes=1024), *owner,
              *encode(_record(9), epoch=3, writer="a-3", chunk_bytes=1024)):
        index.add(r.key, r.value)
    assert index.epoch("in", 0) == 4 and index.epoch("in", 1) == -1
    for r in owner:
        index.add(r.key, None)
    assert index.newest("in")[0]["offset"] == 9 and index.epoch("in", 0) == 4
