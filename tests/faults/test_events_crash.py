"""``kill -9`` at random moments of a worker learning events through a feature spec with online
standardization: the run ends exactly like an uninterrupted one.

A worker process (``stream-perceptron run``, the spec in the TOML file ``SP_FEATURES__SPEC``
names, ``SP_MODEL__HASH_BITS`` set) reads nested JSON payment events from a 2-partition topic,
fed at a steady pace; it is killed with ``kill -9`` several times at random moments and started
again, then a last run with ``--until-caught-up`` ends the stream. What must hold:

* every input offset has a prediction, and every re-emitted prediction is byte-identical to the
  first one for its offset;
* the first prediction of each offset is the one of an uninterrupted run over its partition's
  events in offset order: the plain loop of :mod:`tests.integration.worker.events` (features by
  hand, river's ``StandardScaler``, ``Perceptron.learn_one``);
* each partition's stored state is that run's after all its events: the weights, intercept and
  updates bit for bit, ``seen`` and ``labeled``, the next offset, and the standardization's
  counts, means and variances (``stats["features"]``);
* the group's committed offsets never decreased and end at each partition's end.

Once on each backend and each store (the directory, and the Kafka topic with an empty directory
for each process), paired as ``test_partitions.py`` pairs them.
"""

from __future__ import annotations

import random
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_perceptron import Perceptron
from stream_perceptron.commands.read import read_topic
from stream_perceptron.features.spec import FeatureSpec
from stream_perceptron.settings import KafkaSettings
from tests.integration.helpers import topics_for
from tests.integration.worker.events import (
    SPEC,
    SPEC_TOML,
    PlainLoop,
    json_values,
    label_by_hand,
    payments,
    stored_as,
)

from .partitions_support import CommitWatch, Group, PacedProducer, final_state, read_raw, watching
from .support import committed, env_int, wait_until

pytestmark = pytest.mark.faults

PARTITIONS = 2
HASH_BITS = 12
KILLS = env_int("SP_FAULTS_EVENTS_KILLS", 4)
SEED = env_int("SP_FAULTS_EVENTS_SEED", 5151)
RATE = 400.0  # events/s while the kills happen
LEAST, MOST = 3_000, 12_000  # events sent: at least, and at most
PAIRS = [("kafka-python", "directory"), ("confluent-kafka", "kafka")]


def _kills(group: Group, rng: random.Random, n: int) -> list[str]:
    """``n`` times: once the worker has processed events since it started, at a random moment,
    ``kill -9``; then started again, before or after its session ends, and back in the group.
    If none of the kills left work to redo, one more that does."""
    done, redone = [], False
    for k in range(n):
        member, started = group.live["w1"], time.monotonic()
        wait_until(member.learned, 30, f"w1 to process events before kill {k}", alive=member.proc,
                   log=member.log)
        time.sleep(rng.uniform(0.0, 1.2))  # deliberate fault timing: a random moment
        redo = group.kill9_noting("w1")
        pause = rng.uniform(0.0, 0.8)
        time.sleep(pause)  # deliberate: restarted before or after its session ends
        group.start("w1")
        group.settle()  # the restarted worker holds the partitions
        done.append(f"kill {k} after {time.monotonic() - started:.1f} s, restart after {pause:.1f} s")
        redone = redone or redo()
    if not redone:
        assert group.kill9_leaving_work_to_redo("w1", rng), "no kill of w1 left work to redo"
        done.append("one more kill, which left work to redo")
    return done


@pytest.mark.timeout(150)
@pytest.mark.parametrize(("backend", "store"), PAIRS)
def test_kill_9_at_random_moments_with_a_spec_and_standardization_ends_like_an_uninterrupted_run(
        fast_kafka: Callable[..., KafkaSettings], new_topic: Callable[..., str], tmp_path: Path,
        backend: str, store: str):
    rng = random.Random(SEED)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC_TOML)
    assert FeatureSpec.parse(tomllib.loads(SPEC_TOML)["features"]) == FeatureSpec.parse(SPEC)  # one spec

    def kafka(**overrides: Any) -> KafkaSettings:
        return fast_kafka(backend=backend, max_poll_records=200, **overrides)

    topics = topics_for(new_topic, partitions=PARTITIONS)
    group = Group(kafka, topics, store, tmp_path, input={"format": "json"}, features={"spec": str(spec)},
                  model={"hash_bits": HASH_BITS}, stats={"every_examples": 200},
                  checkpoint={"every_examples": 700, "every_seconds": 2})
    watch = CommitWatch(kafka(), topics["input"])
    producer = PacedProducer(kafka(), topics["input"], json_values(payments(MOST, seed=SEED)), RATE, LEAST)
    started = time.monotonic()
    with watching(group, watch):
        group.start("w1")
        group.settle()
        producer.start()
        kills = _kills(group, rng, KILLS)
        sent = producer.finish()
        group.terminate("w1")
        final = group.run_until_caught_up("final")
        ends = committed(kafka(), topics["input"], PARTITIONS)
    assert not group.unexpected, group.unexpected

    written: dict[int, list[dict[str, Any]]] = {p: [] for p in range(PARTITIONS)}
    for partition, offset, _, event in read_topic(kafka(), topics["input"]):
        assert offset == len(written[partition]), (partition, offset)
        written[partition].append(event)
    assert sum(map(len, written.values())) == sent and all(written.values())
    copies: dict[tuple[int, int], list[bytes]] = {}
    for value in read_raw(kafka(), topics["predictions"]):
        rec = orjson.loads(value)
        copies.setdefault((rec["partition"], rec["offset"]), []).append(value)
    assert sorted(copies) == sorted((p, o) for p, events in written.items() for o in range(len(events)))
    differing = [where for where, c in copies.items() if any(again != c[0] for again in c[1:])]
    assert not differing, f"re-emitted predictions unlike the first at {differing[:5]}"
    reemitted = sum(len(c) - 1 for c in copies.values())
    assert reemitted > 0, "the kills never made the worker process an offset again"

    for partition, events in written.items():
        loop = PlainLoop(model=Perceptron(hash_bits=HASH_BITS))
        for offset, event in enumerate(events):
            loop.event(event, offset)
            first = orjson.loads(copies[(partition, offset)][0])
            y = label_by_hand(event)
            assert (first["score"], first["label"]) == (loop.scores[-1], y or None), (partition, offset)
        state = final_state(final.settings, topics["input"], partition)
        assert state is not None and state.offsets == {topics["input"]: {partition: len(events)}}
        assert stored_as(state) == loop.state(), partition  # weights, θ0, updates, standardization
        assert (state.stats["seen"], state.stats["labeled"]) == (
            len(events), sum(label_by_hand(e) != 0 for e in events))
        assert len(state.stats["features"]) == 2 and loop.model.mistakes > 50  # a stream that tests
    assert not watch.decreases(), watch.decreases()
    assert ends == {p: len(events) for p, events in written.items()}
    print(f"\n{backend}, {store} store: {sent} events {[len(e) for e in written.values()]}, "
          f"{reemitted} predictions re-emitted; {kills}; {time.monotonic() - started:.1f} s")
