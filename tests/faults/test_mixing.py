"""Iterative parameter mixing under faults: a worker that lost its partitions while stalled and
mixes on (a zombie), and a wide hashed model killed with ``kill -9``.

What must hold (docs/mixing.md, "Exact on replay" and "Fenced by the claim"):

* every reader of the model topic takes, for each partition, the record of the highest claim
  epoch, the latest among those: checked by feeding a
  :class:`~stream_perceptron.state.model_topic.ModelTopicIndex` the whole topic, record by
  record, against that rule computed from the manifests' epochs; so a zombie's records, written
  under its older claim after the owner claimed, are never a reader's;
* each partition's final stored state is an offline replay of its input adopting, at each
  mixing point, the mix the winning records logged (bit for bit), and every mixing point of
  the input is logged once;
* every re-emitted prediction is byte-identical to the first, the zombie's excepted (see the
  zombie test's docstring), and the first is the offline replay's score and mistake.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from kafka import KafkaConsumer, TopicPartition

from stream_perceptron.kafka.admin import client_config
from stream_perceptron.kafka.reader import TopicReader
from stream_perceptron.model.mixing import Mix, adopt
from stream_perceptron.settings import KafkaSettings, Settings
from stream_perceptron.state.kafka_store import MANIFEST, Manifest, parse_key
from stream_perceptron.state.model_topic import ModelTopicIndex, written_under_claims
from stream_perceptron.worker.partition import new_learner
from tests.integration.conftest import BACKENDS
from tests.integration.helpers import encode_stream, noisy_stream, send_all, topics_for

from .partitions_support import (
    STORES,
    CommitWatch,
    Group,
    PacedProducer,
    final_state,
    read_input,
    read_raw,
    watching,
)
from .support import committed, env_int, fault_settings, kill9, reap, start_worker, stopped, wait_until

pytestmark = pytest.mark.faults

PARTITIONS = 4
SEED = env_int("SP_FAULTS_MIXING_SEED", 5151)
RATE = 500.0  # input records/s
LEAST, MOST = 3_000, 16_000  # records sent: at least, and at most
UNLABELED_EVERY = 97
EVERY = 40  # SP_MIX__EVERY_EXAMPLES: about three mixing points a second per partition
# the existing mixing rows' pairs (tests/integration/worker/test_mixing_worker.py); all four with
# SP_FAULTS_FULL_MATRIX=1
_PAIRS = [(b, s) for b in BACKENDS for s in STORES]
PAIRS = (_PAIRS if env_int("SP_FAULTS_FULL_MATRIX", 0)
         else [("kafka-python", "directory"), ("confluent-kafka", "kafka")])

Rows = list[tuple[Any, int]]  # (x, label) in offset order; label 0: unlabeled


# -- the model topic, read back ------------------------------------------------------------------

def model_topic_records(kafka: KafkaSettings, topic: str) -> list[tuple[str | None, bytes | None]]:
    """Every record of the model topic, (key, value) in order, tombstones included."""
    reader = TopicReader(kafka, topic)
    try:
        return [(r.key_text(), r.value) for r in reader.read_to_end(timeout_s=30, idle_s=2)]
    finally:
        reader.close()


def readers_view(raw: list[tuple[str | None, bytes | None]], topic: str
                 ) -> tuple[list[tuple[int, dict[str, Any], bool]], list[str]]:
    """Each mixing record written, in order, as ``(claim epoch, record, taken)``, where ``taken``
    says whether the rule (of a partition's records so far, the highest epoch, the latest among
    those) made it the partition's newest when it was written; and where a
    :class:`ModelTopicIndex` fed the topic record by record disagreed with the rule, after any
    manifest."""
    claims = written_under_claims(raw)
    index = ModelTopicIndex()
    newest: dict[int, int] = {}  # partition -> the rule's newest, an index into claims
    out: list[tuple[int, dict[str, Any], bool]] = []
    problems: list[str] = []
    for key, value in raw:
        index.add(key, value)
        parsed = parse_key(key)
        if parsed is None or value is None or parsed[2] != MANIFEST:
            continue
        k = len(out)
        epoch, record = claims[k]
        p = record["partition"]
        taken = p not in newest or epoch >= claims[newest[p]][0]
        if taken:
            newest[p] = k
        out.append((epoch, record, taken))
        if index.newest(topic).get(p) != claims[newest[p]][1]:
            problems.append(f"after record {k} (partition {p}, epoch {epoch}, offset {record['offset']}) a"
                            f" reader takes another than the epoch-{claims[newest[p]][0]} record at offset"
                            f" {claims[newest[p]][1]['offset']}")
    assert len(out) == len(claims), "a manifest whose record could not be read"
    return out, problems


def winners_log(view: list[tuple[int, dict[str, Any], bool]]) -> tuple[dict[tuple[int, int], Any], list[str]]:
    """Every adoption the records readers took logged, by (partition, offset), and each
    (partition, offset) they logged two different mixes for."""
    logged: dict[tuple[int, int], Any] = {}
    conflicts = []
    for _, record, taken in view:
        if taken:
            for entry in record["log"]:
                key = (record["partition"], int(entry["offset"]))
                if logged.setdefault(key, entry) != entry:
                    conflicts.append(f"partition {key[0]} offset {key[1]}: two mixes logged")
    return logged, conflicts


def mixing_points(rows: Rows, every: int) -> list[int]:
    """The input offsets of a partition's mixing points: right after every ``every``-th labeled
    row."""
    labeled = [i for i, (_, y) in enumerate(rows) if y != 0]
    return [labeled[k] + 1 for k in range(every - 1, len(labeled), every)]


def replay(settings: Settings, rows: Rows, mixes: dict[int, Any]) -> tuple[Any, list[float], list[bool]]:
    """A partition's learner after its ``rows`` in offset order, adopting each logged mix
    (``mixes``: offset -> log entry) at its offset; and each row's score before it was learned
    and whether it was a mistake."""
    learner = new_learner(settings)
    scores: list[float] = []
    mistakes: list[bool] = []
    bounds = sorted({0, *mixes, len(rows)})
    for a, b in zip(bounds, bounds[1:], strict=False):
        xs = [x for x, _ in rows[a:b]]
        y = np.array([label for _, label in rows[a:b]], dtype=np.int8)
        step = learner.step(np.array(xs) if not isinstance(xs[0], dict) else xs, y, labeled=y != 0)
        scores += step.result.served_scores.tolist()
        mistakes += step.result.mistakes.tolist()
        if b in mixes:
            adopt(learner.model, Mix.from_record(mixes[b]["mix"]))
    return learner, scores, mistakes


def state_difference(settings: Settings, topic: str, p: int, rows: Rows, learner: Any, points: int) -> str:
    """"exact" when partition ``p``'s stored state is ``learner``'s model after all ``rows``,
    bit for bit, having passed ``points`` mixing points; else what differs."""
    state = final_state(settings, topic, p)
    if state is None:
        return "no stored state"
    diffs = []
    if state.offsets != {topic: {p: len(rows)}}:
        diffs.append(f"offsets {state.offsets}")
    if state.model["weights"] != learner.model.weights.tolist():
        diffs.append("weights")
    if state.model["intercept"] != learner.model.intercept:
        diffs.append(f"intercept {state.model['intercept']} != {learner.model.intercept}")
    if state.model["mistakes"] != learner.model.mistakes:
        diffs.append(f"mistakes {state.model['mistakes']} != {learner.model.mistakes}")
    if state.stats["mix"]["epoch"] != points:
        diffs.append(f"mix version {state.stats['mix']['epoch']} != {points}")
    labeled = sum(y != 0 for _, y in rows)
    if (state.stats["seen"], state.stats["labeled"]) != (len(rows), labeled):
        diffs.append(f"seen/labeled {state.stats['seen']}/{state.stats['labeled']} != {len(rows)}/{labeled}")
    return "exact" if not diffs else "; ".join(diffs)


# -- the zombie ------------------------------------------------------------------------------------

def _input_ends(kafka: KafkaSettings, topic: str) -> dict[int, int]:
    """Each input partition's end offset (its high-water mark) now."""
    consumer = KafkaConsumer(**client_config(kafka))
    try:
        return {tp.partition: end for tp, end in consumer.end_offsets(
            [TopicPartition(topic, p) for p in range(PARTITIONS)]).items()}
    finally:
        consumer.close()


def _outcome(value: bytes) -> tuple[float, bool | None]:
    """A prediction's score and mistake flag."""
    rec = orjson.loads(value)
    return rec["score"], rec["mistake"]


def _claims_above(kafka: KafkaSettings, topic: str, input_topic: str, epochs: dict[int, int]) -> bool:
    """Every partition of ``epochs`` has a record on the model topic of a higher claim epoch."""
    highest: dict[int, int] = {}
    for epoch, record in written_under_claims(model_topic_records(kafka, topic)):
        if record["topic"] == input_topic:
            highest[record["partition"]] = max(epoch, highest.get(record["partition"], epoch))
    return all(highest.get(p, -1) > e for p, e in epochs.items())


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("backend", "store"), PAIRS)
def test_a_zombies_mixing_records_are_ignored_and_every_partition_replays_its_owners_mixes(
    fast_kafka: Callable[..., KafkaSettings], new_topic: Callable[..., str], tmp_path: Path,
    backend: str, store: str,
) -> None:
    """Worker ``a`` holds the 4 partitions and mixes every 40 labeled examples; once it has
    stored states, at a random moment, it stops itself (SIGSTOP) at a mixing point, inside a
    batch (``tests/faults/stall_worker.py``). ``b`` takes the partitions over once a's session has
    ended, claims them (its claim records land on the model topic) and processes on, storing
    every partition past each record a holds (past the input's end when a stopped); then a
    gets SIGCONT: at the mixing point its reader of the model topic shows b's later claim, so it
    stops there (no mix, no record, no stored state of that partition), processes what else it
    had polled, then learns it lost the partitions and joins again.

    Checked: (a) a reader fed the whole model topic never takes a record of a's written after
    b's claim (and takes, after every record, the rule's newest); (b) each partition's final
    state is an offline replay of its input with the mixes the taken records logged; (c) the
    predictions. The guarantee (docs/guarantees.md) is at least once: a partition's outputs are
    a function of its state and its records, so every re-emission by an owner, or by a worker
    replaying a stored state, is byte-identical to the first. A zombie is neither: after its
    partitions were taken it can mix anew (where its reader does not show the owner's claim yet),
    with another view of the model topic than the owner had at the same offset, and the
    predictions past that point are the outputs of a worker that no longer owns the partition.
    So the zombie's own outputs after SIGCONT (recorded by the stall hook) are set aside; every
    other copy of each offset is byte-identical and is the offline replay's score and mistake; an
    offset with no other copy (the next owner resumed from the zombie's stored state past it, which
    the Kafka store may do) has the zombie's, the replay's; and a zombie copy unlike the replay's
    comes only at or past a mixing point the zombie made after b's claim (before it, its model is
    the owner's)."""
    rng = random.Random(SEED)
    kafka = lambda **kw: fast_kafka(backend=backend, max_poll_records=200, **kw)  # noqa: E731
    topics = topics_for(new_topic, partitions=PARTITIONS)
    model_topic = new_topic()
    group = Group(kafka, topics, store, tmp_path,
                  checkpoint={"every_examples": 300, "every_seconds": 0.5},
                  mix={"every_examples": EVERY, "topic": model_topic})
    watch = CommitWatch(kafka(), topics["input"])
    values = encode_stream(noisy_stream(MOST, d=6, noise=0.1, seed=SEED), unlabeled_every=UNLABELED_EVERY)
    producer = PacedProducer(kafka(), topics["input"], values, RATE, LEAST)
    hook = tmp_path / "stall-hook"
    hook.mkdir()

    def progress() -> int:
        return sum(watch.latest().values())

    def stored_past(ends: dict[int, int]) -> bool:
        latest = watch.latest()
        return all(latest.get(p, 0) > end for p, end in ends.items())

    started = time.monotonic()
    with watching(group, watch):
        a = group.start("a", module="tests.faults.stall_worker", extra_env={"FAULT_STALL_DIR": str(hook)})
        group.settle()
        producer.start()
        wait_until(lambda: progress() >= 600, 30, "a's first checkpoints")
        time.sleep(rng.uniform(0.0, 0.5))  # deliberate fault timing: a random moment
        (hook / "stall").touch()
        wait_until(lambda: (hook / "stalled").exists() and stopped(a.proc.pid), 30,
                   "a to stop itself at a mixing point")
        stalled = orjson.loads((hook / "stalled").read_bytes())
        held = _input_ends(kafka(), topics["input"])  # a holds no record past these
        group.start("b")
        group.settle(expect=1)  # a's session ended: b holds every partition
        wait_until(lambda: _claims_above(kafka(), model_topic, topics["input"],
                                         {p: stalled["epoch"] for p in range(PARTITIONS)}),
                   60, "b's claim records on the model topic", every_s=0.5)
        # b's states stored (and committed) past every record a holds, so that a zombie's state
        # is never the furthest stored: the Kafka store would restore it (D79, its own test)
        wait_until(lambda: stored_past(held), 60, "b's states past every record a holds")
        group.resume("a")
        group.settle(expect=2)  # a found it had lost the partitions and joined again
        n = producer.finish()
        for name in sorted(group.live):
            group.terminate(name)
            group.settle()
        final = group.run_until_caught_up("final")
        ends = committed(kafka(), topics["input"], PARTITIONS)
    seconds = round(time.monotonic() - started, 1)
    assert not group.unexpected, group.unexpected

    rows = read_input(kafka(), topics["input"])
    view, disagreements = readers_view(model_topic_records(kafka(), model_topic), topics["input"])
    zombies = [(e, r) for e, r, taken in view if not taken]
    logged, conflicts = winners_log(view)

    # (c) the predictions: the zombie's own, after SIGCONT, set aside
    zombie_file = hook / "zombie"
    zombie_values = zombie_file.read_bytes().splitlines() if zombie_file.exists() else []
    copies: dict[tuple[int, int], list[bytes]] = {}
    for value in read_raw(kafka(), topics["predictions"]):
        rec = orjson.loads(value)
        copies.setdefault((rec["partition"], rec["offset"]), []).append(value)
    reemitted = sum(len(c) - 1 for c in copies.values())
    zombie_copies: dict[tuple[int, int], list[bytes]] = {}
    for value in zombie_values:
        rec = orjson.loads(value)
        key = (rec["partition"], rec["offset"])
        assert value in copies.get(key, []), f"a zombie prediction for {key} is not on the topic"
        copies[key].remove(value)
        zombie_copies.setdefault(key, []).append(value)
    first_zombie_mix: dict[int, int] = {}
    for _, r in zombies:
        first_zombie_mix[r["partition"]] = min(r["offset"], first_zombie_mix.get(r["partition"], r["offset"]))

    problems = [*disagreements, *conflicts]
    unlike_replay = zombie_only = 0
    models = {}
    for p, prows in sorted(rows.items()):
        points = mixing_points(prows, EVERY)
        mixes = {o: e for (q, o), e in logged.items() if q == p}
        if sorted(mixes) != points:
            problems.append(f"partition {p}: mixing points logged {sorted(mixes)[:5]}…,"
                            f" the input's {points[:5]}…")
        learner, scores, mistakes = replay(final.settings, prows, mixes)
        for o in range(len(prows)):
            expected = (scores[o], bool(mistakes[o]) if prows[o][1] else None)
            owners, theirs = copies.get((p, o), []), zombie_copies.get((p, o), [])
            if any(c != owners[0] for c in owners[1:]):
                problems.append(f"partition {p} offset {o}: re-emitted predictions differ")
            if owners and _outcome(owners[0]) != expected:
                problems.append(f"partition {p} offset {o}: {_outcome(owners[0])}, the replay's {expected}")
            if not owners:  # its stored state past it was the one restored (the Kafka store)
                zombie_only += 1
                if not theirs or _outcome(theirs[0]) != expected:
                    problems.append(f"partition {p} offset {o}: no prediction like the replay's {expected}")
            for z in theirs:
                if _outcome(z) != expected:
                    unlike_replay += 1
                    if o < first_zombie_mix.get(p, len(prows)):
                        problems.append(f"partition {p} offset {o}: the zombie's prediction differs before"
                                        " any mixing point it made as a zombie")
        models[p] = state_difference(final.settings, topics["input"], p, prows, learner, len(points))
    problems += [f"partition {p}: {why}" for p, why in models.items() if why != "exact"]
    if watch.decreases():
        problems.append(f"committed offsets decreased: {watch.decreases()}")
    if ends != {p: len(r) for p, r in rows.items()}:
        problems.append(f"final commits {ends}, partition ends {[len(r) for r in rows.values()]}")
    a_log = (tmp_path / "a.log").read_text(errors="replace")
    fenced = [ln for ln in a_log.splitlines() if " WARNING " in ln and "to its new owner" in ln]
    print(f"\nzombie, {backend}, {store} store: {n} records sent; a stopped at {stalled}; "
          f"{len(view)} mixing records, {len(zombies)} of them a zombie's "
          f"{[(e, r['partition'], r['offset']) for e, r in zombies]}; {len(logged)} adoptions logged; "
          f"{reemitted} predictions re-emitted, {len(zombie_values)} of them by the zombie after SIGCONT,"
          f" {unlike_replay} unlike the replay's, {zombie_only} offsets predicted by the zombie alone;"
          f" partitions {models}; a's fenced lines {len(fenced)}; "
          f"{seconds} s\n  exits: {group.exits}")
    # the zombie, its reader showing b's claim at its mixing point, stopped there: no mix, no record
    assert not any(r["partition"] == stalled["partition"] and r["offset"] == stalled["offset"]
                   and e == stalled["epoch"] for e, r in zombies), "the zombie mixed after b's claim"
    assert any(f"stops at its mixing point at offset {stalled['offset']}" in ln for ln in fenced), fenced
    assert not problems, problems[:20]


# -- a wide hashed model ---------------------------------------------------------------------------

WIDE_BITS = 20  # SP_MODEL__HASH_BITS: 2^20 weights
WIDE_NAMES, WIDE_ROW = 200_000, 300  # the vocabulary, and the names of each row
WIDE_N, WIDE_EVERY = 600, 150  # rows per partition (all labeled), SP_MIX__EVERY_EXAMPLES
WIDE_CHUNK = 128 * 1024  # SP_CHECKPOINT__CHUNK_BYTES


def _wide_stream(seed: int) -> dict[int, list[bytes]]:
    """Two partitions' records: WIDE_ROW names drawn from the vocabulary, values of 3 decimals,
    the label the sign of a hidden weight vector's score. Few names repeat, so about half the
    rows are mistakes and each one learns its names: some 60,000-90,000 weights by the end."""
    rng = np.random.default_rng(seed)
    hidden = rng.normal(size=WIDE_NAMES)
    out: dict[int, list[bytes]] = {}
    for p in (0, 1):
        stream = []
        for _ in range(WIDE_N):
            names = rng.choice(WIDE_NAMES, WIDE_ROW, replace=False)
            values = np.round(rng.normal(size=WIDE_ROW), 3)
            x = {f"n{j}": float(v) for j, v in zip(names, values, strict=True)}
            stream.append((x, 1 if hidden[names] @ values > 0 else -1))
        out[p] = encode_stream(stream)
    return out


@pytest.mark.timeout(180)
def test_a_wide_hashed_model_mixes_in_chunks_and_replays_exactly_after_kill_9(
    fast_kafka: Callable[..., KafkaSettings], new_topic: Callable[..., str], tmp_path: Path,
) -> None:
    """``SP_MODEL__HASH_BITS=20``: 2 partitions of rows of 300 names from a vocabulary of
    200,000, mixing every 150 examples, one worker (kafka-python, directory store) with no
    interval checkpoint, killed with ``kill -9`` at a random moment once it has predicted half
    of the first half, then restarted; the second half sent. Its restart restores no state and
    adopts again every mix the model topic logged, 2^20 weights each, at the same offsets.

    Checked: each mixing record is in chunks of at most ``SP_CHECKPOINT__CHUNK_BYTES`` (every
    record that logs a mix in more than one); every re-emitted prediction is byte-identical to
    the first and is the offline replay's score and mistake; each partition's final state is the
    offline replay with the logged mixes, bit for bit, with at least 50,000 weights learned."""
    rng = random.Random(SEED + 1)
    topics = topics_for(new_topic, partitions=2)
    model_topic = new_topic()
    kafka = fast_kafka(max_poll_records=100)
    settings = fault_settings(kafka, topics, tmp_path / "states", model={"hash_bits": WIDE_BITS},
                              mix={"every_examples": WIDE_EVERY, "topic": model_topic},
                              checkpoint={"every_examples": 10**9, "every_seconds": 3600,
                                          "chunk_bytes": WIDE_CHUNK})
    values = _wide_stream(SEED + 1)
    half = WIDE_N // 2
    started = time.monotonic()
    log = tmp_path / "worker.log"
    proc = start_worker(settings, log=log)
    try:
        wait_until(lambda: " assigned " in log.read_text(errors="replace"), 30, "the worker's partitions",
                   alive=proc, log=log)
        for p in (0, 1):
            send_all(kafka, topics["input"], values[p][:half], partition=p)
        wait_until(lambda: len(read_raw(kafka, topics["predictions"])) >= half, 60,
                   "half of the first half's predictions", every_s=0.3, alive=proc, log=log)
        time.sleep(rng.uniform(0.0, 0.3))  # deliberate fault timing: a random moment
        kill9(proc)
        proc = start_worker(settings, log=log)
        for p in (0, 1):
            send_all(kafka, topics["input"], values[p][half:], partition=p)
        every_offset = {(p, o) for p in (0, 1) for o in range(WIDE_N)}
        wait_until(lambda: {(r["partition"], r["offset"]) for r in map(orjson.loads, read_raw(
                       kafka, topics["predictions"]))} == every_offset, 90,
                   "a prediction for every offset", every_s=0.5, alive=proc, log=log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        reap(proc)
    seconds = round(time.monotonic() - started, 1)

    raw = model_topic_records(kafka, model_topic)
    view, disagreements = readers_view(raw, topics["input"])
    logged, conflicts = winners_log(view)
    manifests = [Manifest.read(str(k), -1, v) for k, v in raw
                 if v is not None and (parsed := parse_key(k)) is not None and parsed[2] == MANIFEST]
    sizes = [len(v) for k, v in raw if v is not None and ":chunk:" in str(k)]
    assert len(manifests) == len(view) and sizes and max(sizes) <= WIDE_CHUNK
    assert all(c.length <= WIDE_CHUNK for m in manifests for c in m.chunks)
    chunked = [(len(m.chunks), m.length) for m, (_, r, _) in zip(manifests, view, strict=True) if r["log"]]
    assert chunked and all(n > 1 for n, _ in chunked), chunked  # every record logging a mix
    assert all(taken for _, _, taken in view), "a record no reader takes, with one worker at a time"

    rows = read_input(kafka, topics["input"])
    copies: dict[tuple[int, int], list[bytes]] = {}
    for value in read_raw(kafka, topics["predictions"]):
        rec = orjson.loads(value)
        copies.setdefault((rec["partition"], rec["offset"]), []).append(value)
    problems = [*disagreements, *conflicts]
    models, learned = {}, {}
    for p, prows in sorted(rows.items()):
        points = mixing_points(prows, WIDE_EVERY)
        mixes = {o: e for (q, o), e in logged.items() if q == p}
        if sorted(mixes) != points:
            problems.append(f"partition {p}: mixing points logged {sorted(mixes)}, the input's {points}")
        learner, scores, mistakes = replay(settings, prows, mixes)
        for o in range(len(prows)):
            got = copies.get((p, o), [])
            if not got:
                problems.append(f"partition {p} offset {o}: no prediction")
                continue
            if any(c != got[0] for c in got[1:]):
                problems.append(f"partition {p} offset {o}: re-emitted predictions differ")
            first = orjson.loads(got[0])
            if first["score"] != scores[o] or first["mistake"] != bool(mistakes[o]):
                problems.append(f"partition {p} offset {o}: {first['score']} is not the replay's {scores[o]}")
        models[p] = state_difference(settings, topics["input"], p, prows, learner, len(points))
        learned[p] = int(np.count_nonzero(learner.model.weights))
    reemitted = sum(len(c) - 1 for c in copies.values())
    print(f"\nwide: {len(view)} mixing records in {sum(len(m.chunks) for m in manifests)} chunks "
          f"(records logging a mix: {min(n for n, _ in chunked)}-{max(n for n, _ in chunked)} chunks, "
          f"up to {max(length for _, length in chunked):,} bytes); {len(logged)} adoptions logged; "
          f"{reemitted} predictions re-emitted; weights learned {learned}; partitions {models}; {seconds} s")
    assert reemitted > 0, "the kill made the worker redo no prediction"
    problems += [f"partition {p}: {why}" for p, why in models.items() if why != "exact"]
    assert not problems, problems[:20]
    assert all(n >= 50_000 for n in learned.values()), learned
