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


def _versioned(offset: int, version: int) -> dict:
    return {**_record(offset), "state": {"epoch": version}, "log": [{"offset": offset, "mix": "big"}]}


def test_at_most_gives_each_partitions_newest_state_of_a_version_or_earlier_tombstoned_or_not():
    index = ModelTopicIndex(recent=3)

    def add(offset: int, version: int, epoch: int, writer: str) -> list:
        records = encode(_versioned(offset, version), epoch=epoch, writer=writer, chunk_bytes=1024)
        for r in records:
            index.add(r.key, r.value)
        return records

    first = add(10, 1, 1, "a-1")
    add(20, 2, 1, "a-1")
    for r in first:  # its writer tombstones its earlier record
        index.add(r.key, None)
    add(30, 3, 1, "a-1")
    assert [index.at_most("in", n)[0]["offset"] for n in (1, 2, 3, 9)] == [10, 20, 30, 30]
    assert index.at_most("in", 1)[0] == {"state": {"epoch": 1}, "offset": 10}  # no log kept
    add(40, 4, 1, "a-1")  # past the 3 versions kept: version 1's state is gone
    assert index.at_most("in", 1)[0]["offset"] == 40  # none that early: the newest
    # a new owner's claim republishes version 2: of the states within a version, the claim's wins
    add(25, 2, 2, "b-2")
    assert index.at_most("in", 3)[0]["offset"] == 25 and index.at_most("in", 4)[0]["offset"] == 25
    assert ModelTopicIndex().at_most("in", 1) == {}
