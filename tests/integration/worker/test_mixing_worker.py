"""Parameter mixing over a broker: two worker processes, four partitions, one killed with SIGKILL
and restarted; every re-emitted prediction equals the first, and each partition's final state is
an offline replay of its input with its logged mixes. The rows cover both stores and both
backends (the directory store on kafka-python, the Kafka store on confluent-kafka), with no bound
on staleness and with SP_MIX__MAX_STALENESS = 1 (the partitions then wait, paused, for each other,
and for the killed worker's for at most SP_MIX__MAX_WAIT_S)."""

from __future__ import annotations

import random
import re
import signal
import time

import numpy as np
import pytest

from stream_perceptron.model.mixing import Mix, adopt
from stream_perceptron.worker.partition import new_learner
from stream_perceptron.worker.stores import open_store
from tests.integration.helpers import (
    encode_stream,
    mixing_records,
    noisy_stream,
    predictions_by_offset,
    send_all,
    start_process,
    topics_for,
    wait_for,
    worker_settings,
)

PARTS, N, EVERY = 4, 600, 40  # N records per partition
ROWS = [(backend, store, bound) for bound in (None, 1)
        for backend, store in (("kafka-python", "directory"), ("confluent-kafka", "kafka"))]
EDGE_STARTED = re.compile(r"kafka edge( \(confluent-kafka\))? started")


def _replay(settings, stream, mixes):
    """A partition's learner after its ``stream``, adopting each logged mix at its offset."""
    learner = new_learner(settings)
    bounds = [0, *sorted(mixes), len(stream)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        if b > a:
            learner.step(np.array([x for x, _ in stream[a:b]]), np.array([y for _, y in stream[a:b]]))
        if b in mixes:
            adopt(learner.model, Mix.from_record(mixes[b]["mix"]))
    return learner


# Each read of the predictions makes a consumer; kafka-python leaves a socket of one now and then
# (tests/integration/conftest.py, _kafka_client_sockets_finalized), and a collection in the middle
# of the test would fail it for that
@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
@pytest.mark.parametrize(("backend", "store", "bound"), ROWS,
                         ids=[f"{b}-{s}" + ("" if t is None else f"-s{t}") for b, s, t in ROWS])
def test_kill_9_with_mixing_on_re_emits_identical_predictions_and_replays_exactly(
    fast_kafka, new_topic, tmp_path, backend, store, bound
):
    kafka = fast_kafka(max_poll_records=50)
    topics = topics_for(new_topic, partitions=PARTS)
    model_topic = new_topic()
    stream = noisy_stream(PARTS * N, d=5, noise=0.1, seed=43)
    shares = {p: stream[p * N:(p + 1) * N] for p in range(PARTS)}
    values = {p: encode_stream(shares[p]) for p in range(PARTS)}
    # no interval checkpoint: what the killed worker did past its last revocation is redone.
    # The directory store: one directory shared by the workers; the Kafka store: a state topic,
    # and a directory of each worker's own that holds no state
    checkpoint = {"every_examples": 10**9, "every_seconds": 3600}
    if store == "kafka":
        checkpoint.update(store="kafka", topic=f"{topics['input']}-state")

    def settings_of(name: str):
        folder = tmp_path / (name if store == "kafka" else "states")
        kafka = fast_kafka(max_poll_records=50, client_id=name, backend=backend)
        bounded = {} if bound is None else {"max_staleness": bound, "max_wait_s": 2.0}
        return worker_settings(kafka, topics, folder, checkpoint=checkpoint,
                               mix={"every_examples": EVERY, "topic": model_topic, **bounded})

    settings = {c: settings_of(f"worker-{c}") for c in "ab"}
    procs = {c: start_process(settings[c], log=tmp_path / f"{c}.log") for c in "ab"}
    rng = random.Random(43)
    try:
        # both in the group before any record: the worker killed holds partitions, none stored
        wait_for(lambda: all(" assigned " in (tmp_path / f"{c}.log").read_text() for c in "ab"), 20,
                 "both workers to hold partitions", every_s=0.1)
        half = N // 2
        for p in range(PARTS):
            send_all(kafka, topics["input"], values[p][:half], partition=p)
        wait_for(lambda: len(predictions_by_offset(kafka, topics["predictions"])) >= PARTS * half // 2,
                 20, "half of the first half's predictions", every_s=0.3)
        time.sleep(rng.uniform(0.0, 0.3))
        procs["a"].send_signal(signal.SIGKILL)
        assert procs["a"].wait(timeout=10) == -signal.SIGKILL
        procs["a"] = start_process(settings["a"], log=tmp_path / "a2.log")
        # its signal handlers are in place once its edge has started: a SIGTERM then checkpoints
        wait_for(lambda: EDGE_STARTED.search((tmp_path / "a2.log").read_text()), 15,
                 "the restarted worker's edge", every_s=0.1)
        for p in range(PARTS):
            send_all(kafka, topics["input"], values[p][half:], partition=p)
        wait_for(lambda: len(predictions_by_offset(kafka, topics["predictions"])) == PARTS * N, 25,
                 "a prediction for every offset", every_s=0.5)

        def points_logged() -> bool:  # the last point follows the last prediction, after any wait
            offsets = {(r["partition"], e["offset"]) for r in mixing_records(kafka, model_topic)
                       for e in r["log"]}
            return all(sum(q == p for q, _ in offsets) == N // EVERY for p in range(PARTS))

        wait_for(points_logged, 25, "every mixing point logged", every_s=0.5)
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=15) for proc in procs.values()]
    logs = "".join((tmp_path / f).read_text() for f in ("a.log", "b.log", "a2.log"))
    assert codes == [0, 0], logs[-3000:]

    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(p, o) for p in range(PARTS) for o in range(N)]
    duplicated = 0
    for offset, copies in preds.items():
        assert all(c == copies[0] for c in copies), offset  # re-emissions are identical
        duplicated += len(copies) > 1
    assert duplicated > 0, logs[-3000:]  # the kill made a worker redo predictions

    # every adoption, as every model-topic record logged it: one mix per (partition, offset)
    logged: dict[tuple[int, int], dict] = {}
    for record in mixing_records(kafka, model_topic):
        for entry in record["log"]:
            key = (record["partition"], entry["offset"])
            assert logged.setdefault(key, entry) == entry
            if bound is not None and "stale" not in entry:  # no wait ran out: every state within s
                assert min(entry["mix"]["epochs"]) >= entry["epoch"] - bound, entry
    states = open_store(settings_of("reader"), partitions=None)
    try:
        finals = {p: states.load(topics["input"], p) for p in range(PARTS)}
    finally:
        states.close()
    for p in range(PARTS):
        mixes = {o: e for (q, o), e in logged.items() if q == p}
        assert len(mixes) == N // EVERY  # every mixing point logged
        assert any(len(e["mix"]["partitions"]) > 1 for e in mixes.values())  # partitions mixed
        final = finals[p]
        assert final is not None and final.offsets == {topics["input"]: {p: N}}
        learner = _replay(settings["a"], shares[p], mixes)
        assert final.model["weights"] == learner.model.weights.tolist()  # bit for bit
        assert final.model["intercept"] == learner.model.intercept
        assert final.model["mistakes"] == learner.model.mistakes
        assert final.stats["mix"]["epoch"] == N // EVERY
    if store == "kafka":
        assert not any((tmp_path / f"worker-{c}" / "partitions").exists() for c in "ab")
