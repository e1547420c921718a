"""Mixing that pays off over a broker: one worker's partitions advance together, bounded staleness
across two workers, and a partition with no input stalls no one past SP_MIX__MAX_WAIT_S.

The stream: ``separable:d=10,gamma=0.01``, 32,000 examples written round-robin over 8 partitions,
E = 100, then 5,000 held out; one worker runs on the streams of generator seeds 1 to 5, two
workers with s = 1 on the same five and with s = 0 on seed 1, each run held to the bounds (within
2x one model's mistakes, the mix separating 99% of the held-out points), a two-worker run whose
mixes took a state one version old to s = 1's without the fresh wait (see the row).
Offline, synchronous IPM at E = 100 makes 1.42–1.75× the mistakes of one model on the whole
stream over those seeds, and its last mix separates 99.16–99.92% of the held-out points;
docs/mixing.md, "Bounded staleness", has the figures.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np
import pytest
from kafka import KafkaProducer

from stream_perceptron.kafka.admin import client_config
from stream_perceptron.model.mixing import Published, mix
from stream_perceptron.model.newest_mix import Adopted
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.sources import open_source
from stream_perceptron.worker.partition import PartitionState
from tests.integration.helpers import (
    ThreadedWorker,
    encode_stream,
    mixing_records,
    topics_for,
    wait_for,
    worker_settings,
)

PARTS, N, HELD_OUT, EVERY = 8, 32_000, 5_000, 100
SEEDS = (1, 2, 3, 4, 5)


@functools.cache
def seeded_stream(seed: int) -> tuple[list[bytes], int, int, int, np.ndarray, np.ndarray]:
    """The training records (encoded), one model's mistakes on them, synchronous IPM's and the 8
    unmixed partitions' together (offline), and the held-out rows, of the stream of generator
    seed ``seed``."""
    rows = list(open_source(f"separable:d=10,gamma=0.01,seed={seed},n={N + HELD_OUT}"))
    X = np.array([x for x, _ in rows], dtype=np.float64)
    y = np.array([v for _, v in rows], dtype=np.int8)
    single = int(Perceptron().learn_many(X[:N], y[:N]).mistakes.sum())
    unmixed = sum(int(Perceptron().learn_many(X[:N][p::PARTS], y[:N][p::PARTS]).mistakes.sum())
                  for p in range(PARTS))
    return encode_stream(rows[:N]), single, synchronous_ipm(X[:N], y[:N]), unmixed, X[N:], y[N:]


@pytest.fixture(params=SEEDS, ids=[f"seed{s}" for s in SEEDS])
def stream(request) -> tuple[list[bytes], int, int, int, np.ndarray, np.ndarray]:
    """:func:`seeded_stream` of each of the five seeds."""
    return seeded_stream(request.param)


def synchronous_ipm(X: np.ndarray, y: np.ndarray) -> int:
    """The mistakes of synchronous IPM over the round-robin shares, rounds of EVERY examples,
    uniform μ (McDonald, Hall and Mann 2010), each partition's rows learned as the worker does."""
    shares = [np.arange(p, len(X), PARTS) for p in range(PARTS)]
    w, b, total = np.zeros(X.shape[1]), 0.0, 0
    for a in range(0, len(shares[0]), EVERY):
        states = []
        for rows in shares:
            model = Perceptron()
            model.set_state({**model.get_state(), "weights": w.copy(), "intercept": b})
            total += int(model.learn_many(X[rows[a:a + EVERY]], y[rows[a:a + EVERY]]).mistakes.sum())
            states.append(Published(len(states), model.weights.copy(), model.intercept, 0, 1, 0))
        mixed = mix(states)
        w, b = mixed.weights, mixed.intercept
    return total


def write_round_robin(kafka: KafkaSettings, topic: str, values: list[bytes], parts: int = PARTS) -> None:
    """Record i to partition i mod ``parts``, in order, from one producer."""
    producer = KafkaProducer(**client_config(kafka), acks="all", linger_ms=5)
    try:
        for i, value in enumerate(values):
            producer.send(topic, value=value, key=str(i).encode(), partition=i % parts)
        producer.flush()
    finally:
        producer.close()


def run_workers(kafka_of, new_topic, tmp_path, values: list[bytes], count: int, *, first: bool = False,
                **mix: Any) -> tuple[dict[int, PartitionState], str, float]:
    """``count`` workers in this process mixing every EVERY labeled examples (``mix``: more
    SP_MIX__* settings) over a fresh 8-partition topic, the records written once every worker
    holds partitions (``first``: before the workers start); returns each partition's final state
    (the worker's that processed it last), the model topic, and the seconds from the first record
    written to the last mixing point."""
    topics = topics_for(new_topic, partitions=PARTS)
    model_topic = new_topic()
    started = time.monotonic()
    if first:
        write_round_robin(kafka_of("writer"), topics["input"], values)
    workers = [ThreadedWorker(worker_settings(
        kafka_of(f"worker-{k}"), topics, tmp_path / "states",
        checkpoint={"every_examples": 10**9, "every_seconds": 3600}, observe={"enabled": False},
        mix={"every_examples": EVERY, "topic": model_topic, **mix})).start() for k in range(count)]
    points = PARTS * (len(values) // PARTS // EVERY)
    try:
        wait_for(lambda: all(w.assignment() for w in workers)
                 and sum(len(w.assignment()) for w in workers) == PARTS, 30,
                 "every worker to hold partitions")
        if not first:
            started = time.monotonic()
            write_round_robin(kafka_of("writer"), topics["input"], values)

        def adoptions() -> int:
            return sum(st.mix.version for w in workers for st in w.worker.partitions.assigned.values()
                       if st.mix is not None)

        wait_for(lambda: adoptions() == points, 120, "every mixing point", every_s=0.2)
        seconds = time.monotonic() - started
    finally:
        codes = [w.stop() for w in workers]
    assert codes == [0] * count
    finals: dict[int, PartitionState] = {}
    for w in workers:
        for (_, p), st in w.worker.partitions.held.items():
            if p not in finals or st.learner.stats.seen > finals[p].learner.stats.seen:
                finals[p] = st
    return finals, model_topic, seconds


def accuracy(w: np.ndarray, b: float, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.where(X @ w + b > 0, 1, -1) == y))


def check_bound(finals: dict[int, PartitionState], single: int, kafka: KafkaSettings, model_topic: str,
                X: np.ndarray, y: np.ndarray, *, times: float = 2.0, separates: float = 0.99) -> float:
    """Mixed over single; the bounds asserted: mixed within ``times`` single, and the mixed model
    (the mix of every partition's newest state on the model topic: the one a next mixing point
    would adopt, as docs/mixing.md's evaluation serves) separating ``separates`` of the held-out
    points. Each partition's last adoption is reported beside it."""
    assert sorted(finals) == list(range(PARTS))
    assert all(st.learner.stats.seen == N // PARTS for st in finals.values())
    mixed = sum(st.learner.stats.mistakes for st in finals.values())
    records = mixing_records(kafka, model_topic)
    newest = {r["partition"]: r for r in records}  # each partition's last record: its final state
    served = mix([Published.from_record(r["state"]) for r in newest.values()])
    adopted = [a for r in newest.values() if (a := Adopted.from_record(r)) is not None]
    each = [accuracy(a.mix.weights, a.mix.intercept, X, y) for a in adopted]
    held_out = accuracy(served.weights, served.intercept, X, y)
    print(f"\n{mixed} mistakes against one model's {single}: {mixed / single:.2f}x; the mix of the newest"
          f" states separates {held_out:.2%} of the held-out points (each partition's last adoption:"
          f" {min(each):.2%} to {max(each):.2%})")
    assert mixed <= times * single
    assert held_out >= separates
    return mixed / single


@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
def test_one_workers_partitions_mix_synchronously_within_twice_one_models_mistakes(
    kafka_settings, new_topic, tmp_path, stream
):
    """The records are all there before the worker starts, so its polls bring long runs of one
    partition (the case where mixing once gained little): every adoption is synchronous IPM's,
    the same mix of the 8 partitions' states of its version, whatever the polls."""
    values, single, ipm, _, X, y = stream
    finals, model_topic, seconds = run_workers(lambda name: kafka_settings(client_id=name), new_topic,
                                               tmp_path, values, 1, first=True)
    check_bound(finals, single, kafka_settings(), model_topic, X, y)
    assert sum(st.learner.stats.mistakes for st in finals.values()) == ipm
    for record in mixing_records(kafka_settings(), model_topic):
        for entry in record["log"]:
            assert entry["mix"]["epochs"] == [entry["epoch"]] * PARTS
    print(f"one worker: {seconds:.1f} s from the first record written to the last mixing point")


@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
# s = 1 (the case) on the five seeds, s = 0 on one
@pytest.mark.parametrize(("seed", "bound"), [*((seed, 1) for seed in SEEDS), (1, 0)],
                         ids=[*(f"seed{seed}-s1" for seed in SEEDS), "seed1-s0"])
def test_two_workers_with_bounded_staleness_stay_within_twice_one_models_mistakes(
    kafka_settings, new_topic, tmp_path, seed, bound
):
    """Two workers share the 8 partitions, the records written as they run, each partition's
    adoptions waiting for every partition within s versions, and with s = 1 for those within s
    a fresh wait more (the partition's lap, plus SP_MIX__FRESH_WAIT_S of 1 s). A mix at
    point n takes each partition's state of version n or earlier: every adoption that took the
    n-th states of all 8 is synchronous IPM's, so with none older (s = 0 always) the mistakes are
    the offline synchronous IPM's."""
    values, single, ipm, unmixed, X, y = seeded_stream(seed)
    finals, model_topic, seconds = run_workers(lambda name: kafka_settings(client_id=name), new_topic,
                                               tmp_path, values, 2, max_staleness=bound)
    older = 0  # adoptions that took a state of an earlier version than their own
    for record in mixing_records(kafka_settings(), model_topic):
        for entry in record["log"]:
            epochs = entry["mix"]["epochs"]
            assert max(epochs) == entry["epoch"]  # no state of a later point
            if "stale" not in entry:  # none went on without a partition behind: all within s
                assert min(epochs) >= entry["epoch"] - bound
            older += epochs != [entry["epoch"]] * PARTS
    print(f"two workers, s = {bound}: {seconds:.1f} s; paused"
          f" {sum(st.mix.paused_s for st in finals.values()):.1f} s in all; {older} adoptions took an"
          f" older state")
    # Synchronous IPM, which every mix of states of one version makes, is within 2x and 99% on
    # these seeds, and the fresh wait keeps the mixes to states of one version while the workers
    # keep within a lap and 1 s of each other (docs/mixing.md). A worker held up longer (a row
    # beside a heavy test on two cores) mixes states one version old, which s = 1 allows: then
    # the bounds are those s = 1 meets without the fresh wait, fewer mistakes than the 8
    # unmixed partitions and 95% held out.
    times, separates = (2.0, 0.99) if older == 0 else ((unmixed - 1) / single, 0.95)
    ratio = check_bound(finals, single, kafka_settings(), model_topic, X, y, times=times, separates=separates)
    mixed = sum(st.learner.stats.mistakes for st in finals.values())
    print(f"unmixed: {unmixed / single:.2f}x; mixed {ratio:.2f}x; synchronous IPM {ipm / single:.2f}x")
    if older == 0:
        assert mixed == ipm


@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
def test_a_partition_without_input_stalls_the_others_no_longer_than_the_bounded_wait(
    kafka_settings, new_topic, tmp_path
):
    """Two workers over 4 partitions, s = 0, SP_MIX__MAX_WAIT_S = 2: partition 3 gets 30 records
    and nothing more, the others 400 each (10 mixing points at E = 40). Each of those waits for
    it once, the bounded wait, then goes on naming it stale; waiting at each of their mixing
    points would take 20 s."""
    parts, wait_s = 4, 2.0
    values = encode_stream(list(open_source("separable:d=5,gamma=0.05,n=1600,seed=2")))
    per = {p: values[p::parts][: 30 if p == 3 else 400] for p in range(parts)}
    topics = topics_for(new_topic, partitions=parts)
    model_topic = new_topic()
    workers = [ThreadedWorker(worker_settings(
        kafka_settings(client_id=f"worker-{k}"), topics, tmp_path / "states", observe={"enabled": False},
        mix={"every_examples": 40, "topic": model_topic, "max_staleness": 0, "max_wait_s": wait_s})).start()
        for k in range(2)]

    def states() -> dict[int, PartitionState]:
        return {p: st for w in workers for (_, p), st in w.worker.partitions.assigned.items()}

    try:
        wait_for(lambda: all(len(w.assignment()) == 2 for w in workers), 30, "two partitions each")
        started = time.monotonic()
        producer = KafkaProducer(**client_config(kafka_settings()), acks="all", linger_ms=5)
        for i in range(400):
            for p in range(parts):
                if i < len(per[p]):
                    producer.send(topics["input"], value=per[p][i], partition=p)
        producer.flush()
        producer.close()
        # all four held (none between owners in a rebalance), those with input through their points
        wait_for(lambda: len(states()) == parts and all(st.mix is not None and st.mix.version == 10
                                                        for p, st in states().items() if p != 3),
                 30, "the partitions with input through their 10 mixing points", every_s=0.1)
        seconds = time.monotonic() - started
        held = states()
    finally:
        codes = [w.stop() for w in workers]
    assert codes == [0, 0]
    print(f"\nthe partitions with input made their 10 mixing points in {seconds:.1f} s")
    assert seconds < 3 * wait_s + 6  # one bounded wait, not one per mixing point
    logged: dict[int, dict[int, dict[str, Any]]] = {}
    for record in mixing_records(kafka_settings(), model_topic):
        for entry in record["log"]:
            logged.setdefault(record["partition"], {})[entry["offset"]] = entry
    assert held[3].mix.version == 0 and held[3].learner.stats.seen == 30 and 3 not in logged
    for p in range(3):
        st = held[p]
        assert st.mix.overdue == 1 and wait_s <= st.mix.paused_s < wait_s + 3, (p, st.mix)
        # named stale in each adoption, by how far behind it is; the others never
        assert [e["stale"] for e in logged[p].values()] == [{"3": n} for n in range(1, 11)]
