"""The worker on the Kafka store (SP_CHECKPOINT__STORE=kafka): two workers with no directory in
common hand partitions over through the state topic, and a restart resumes each partition from
its state there, exactly (the broker-backed many-worker rows are in tests/faults/test_partitions.py)."""

from __future__ import annotations

import pytest

from stream_perceptron.worker.stores import open_store
from tests.integration.conftest import BACKENDS
from tests.integration.helpers import (
    ThreadedWorker,
    core_reference,
    encode_stream,
    noisy_stream,
    predictions_by_offset,
    send_all,
    topics_for,
    wait_for,
    worker_settings,
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
def test_partitions_move_between_workers_through_the_state_topic(
    backend, kafka_settings, new_topic, tmp_path
):
    kafka = kafka_settings(backend=backend)
    topics = topics_for(new_topic, partitions=2)
    state_topic = f"{topics['input']}-state"  # made by the first worker, compacted

    def settings(name: str):
        return worker_settings(kafka_settings(backend=backend, client_id=name), topics, tmp_path / name,
                               checkpoint={"store": "kafka", "topic": state_topic,
                                           "every_examples": 300, "every_seconds": 1})

    n = 2000
    stream = noisy_stream(n, d=5, noise=0.05, seed=12)
    values = encode_stream(stream)
    halves = {0: stream[: n // 2], 1: stream[n // 2 :]}
    send_all(kafka, topics["input"], values[: n // 4], partition=0)
    send_all(kafka, topics["input"], values[n // 2 : 3 * n // 4], partition=1)
    a = ThreadedWorker(settings("a")).start()
    wait_for(lambda: len(predictions_by_offset(kafka, topics["predictions"])) == n // 2, 60,
             "worker a to predict the first half")
    assert a.stop() == 0  # stores both partitions' states in the topic, in nothing else
    send_all(kafka, topics["input"], values[n // 4 : n // 2], partition=0)
    send_all(kafka, topics["input"], values[3 * n // 4 :], partition=1)
    b = ThreadedWorker(settings("b")).start()  # another directory: the topic alone carries the state
    try:
        wait_for(lambda: len(predictions_by_offset(kafka, topics["predictions"])) == n, 60,
                 "worker b to predict the rest")
    finally:
        assert b.stop() == 0
    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(p, o) for p in (0, 1) for o in range(n // 2)]
    assert all(len(copies) == 1 for copies in preds.values())  # b resumed where a stopped
    assert not (tmp_path / "a" / "partitions").exists() and not (tmp_path / "b" / "partitions").exists()
    store = open_store(settings("reader"), partitions=None)
    try:
        for p, rows in halves.items():
            model, _ = core_reference(rows, [y for _, y in rows])
            state = store.load(topics["input"], p)
            assert state is not None and state.offsets == {topics["input"]: {p: n // 2}}
            assert state.model["weights"] == model.weights.tolist()  # bit-identical
            assert state.model["mistakes"] == model.mistakes and state.stats["seen"] == n // 2
    finally:
        store.close()
