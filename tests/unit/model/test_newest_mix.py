"""The newest mix of each partition from model-topic records, and scoring with it: the same floats
as a perceptron holding the mix."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron import Perceptron
from stream_perceptron.model.mixing import MixLog, Published, adopt, mix
from stream_perceptron.model.newest_mix import Adopted
from stream_perceptron.state.model_topic import ModelTopicIndex, encode


def _records(topic: str, partitions: int, points: int, seed: int) -> list[dict]:
    """Model-topic records as the worker writes them: partitions take turns reaching a mixing
    point (every 10 records), each publishing its state, mixing the newest of all and logging
    the adoption; values through JSON, as a reader gets them."""
    rng = np.random.default_rng(seed)
    newest: dict[int, Published] = {}
    logs = {p: MixLog() for p in range(partitions)}
    entries: dict[int, list] = {p: [] for p in range(partitions)}
    out = []
    for n in range(points):
        p = int(rng.integers(partitions))
        ml = logs[p]
        own = Published(p, rng.normal(size=3), float(rng.normal()), int(rng.integers(5)), ml.version + 1,
                        10 * (ml.version + 1))
        newest[p] = own
        entries[p] = [*entries[p][-2:], ml.adopted(own.offset, mix(newest.values(), "mistakes"), n)]
        record = {"topic": topic, "partition": p, "state": own.record(), "log": entries[p], "ts": 0.0}
        out.append(orjson.loads(orjson.dumps(record)))
    return out


def _newest(records: list[dict | None], epoch: int = 1) -> dict:
    """The newest mix of each partition, as a reader of the model topic finds them: each record
    written as the worker writes it (chunks and a manifest, under the claim ``epoch``; None: the
    partition's records tombstoned)."""
    index = ModelTopicIndex()
    for r in records:
        if r is None:
            for key in index.stale("in", 0, epoch + 1, "next"):
                index.add(key, None)
            continue
        for out in encode({**r, "offset": r["log"][-1]["offset"] if r["log"] else 0}, epoch=epoch,
                          writer=f"w-{epoch}", chunk_bytes=1 << 16):
            index.add(out.key, out.value)
    return {key: Adopted.from_record(record) for key, record in index.records().items()}


def test_the_newest_record_of_each_partition_gives_its_last_logged_adoption():
    records = _records("in", 3, 40, seed=1) + _records("other", 2, 10, seed=2)
    got = _newest(records)
    assert sorted(got) == [("in", 0), ("in", 1), ("in", 2), ("other", 0), ("other", 1)]
    for (topic, p), adopted in got.items():
        last = [r for r in records if (r["topic"], r["partition"]) == (topic, p)][-1]["log"][-1]
        assert adopted is not None and (adopted.topic, adopted.partition) == (topic, p)
        assert (adopted.version, adopted.offset) == (last["epoch"], last["offset"])
        assert adopted.mix.record() == last["mix"]  # bit for bit, through JSON
        shown = adopted.record()
        assert shown == {"topic": topic, "partition": p, "version": last["epoch"], "epoch": last["epoch"],
                         "offset": last["offset"],
                         "weights": last["mix"]["weights"], "intercept": last["mix"]["intercept"],
                         "partitions": last["mix"]["partitions"], "mu": last["mix"]["mu"]}


def test_a_later_record_replaces_an_earlier_one_and_an_empty_log_gives_none():
    records = _records("in", 1, 3, seed=3)
    assert _newest(records)[("in", 0)].version == 3  # type: ignore[union-attr]
    assert _newest(records[:1])[("in", 0)].version == 1  # type: ignore[union-attr]
    assert _newest([*records, {**records[-1], "log": []}]) == {("in", 0): None}
    assert _newest([*records, None]) == {}  # tombstoned
    assert _newest([]) == {}


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(1, 12))
def test_scores_are_those_of_a_perceptron_holding_the_mix_bit_for_bit(seed, d):
    rng = np.random.default_rng(seed)
    states = [Published(p, rng.normal(size=d) * 10.0 ** rng.integers(-3, 4), float(rng.normal()),
                        int(rng.integers(4)), 1, 10) for p in range(3)]
    m = mix(states, "mistakes")
    adopted = Adopted("in", 0, 1, 10, m)
    model = Perceptron()
    model.learn_one(rng.normal(size=d), 1)  # a model of width d that answers ±1, then the mix adopted
    model.learn_one(rng.normal(size=d), -1)
    adopt(model, m)
    for x in rng.normal(size=(20, d)) * 10.0 ** rng.integers(-3, 4):
        s = adopted.score(x.tolist())
        assert s == model.score_one(x)  # the same float
        assert s == float((x * m.weights).sum() + m.intercept)
        assert adopted.predict(x.tolist()) == (1 if s > 0 else -1) == model.predict_one(x)


def test_a_point_on_the_boundary_is_predicted_negative_and_a_row_of_another_width_is_refused():
    adopted = Adopted("in", 0, 1, 10, mix([Published(0, np.array([1.0, -1.0]), 0.0, 1, 1, 10)]))
    assert adopted.score([2.0, 2.0]) == 0.0 and adopted.predict([2.0, 2.0]) == -1
    assert adopted.predict([2.0, 1.0]) == 1
    with pytest.raises(ValueError, match="a row of 3 values, for a mix of 2 weights"):
        adopted.score([1.0, 2.0, 3.0])
