"""The Kafka store on a real broker: a state larger than the topic's largest message round-trips,
a crash in the middle of a save falls back to the previous state, a zombie writer never wins,
``checkpoint show --topic`` prints the partitions, and a state sent in a transaction (as the
exactly-once mode sends it) is restored once committed and never when aborted."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

import pytest
from click.testing import CliRunner
from kafka import KafkaProducer

from stream_perceptron.cli import main
from stream_perceptron.errors import CheckpointError
from stream_perceptron.kafka.admin import client_config, ensure_topics
from stream_perceptron.kafka.state_log import KafkaStateLog
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.state.kafka_store import Manifest, StateRecord, parse_key
from stream_perceptron.state.stored import serialize
from stream_perceptron.worker.stores import open_kafka_store
from tests.apache_kafka import SCRAM_USER
from tests.integration.conftest import is_tansu, wait_for_leaders
from tests.integration.state.save_and_die import DIED
from tests.partition_states import partition_state

CHUNK = 32 * 1024
MAX_MESSAGE = 64 * 1024


@pytest.fixture
def state_topic(kafka_settings: Callable[..., KafkaSettings]) -> Callable[..., str]:
    """A new compacted state topic: ``state_topic(partitions) -> name``, its largest message
    (``max.message.bytes``) 64 KiB."""

    def make(partitions: int = 1) -> str:
        name = f"test-state-{uuid.uuid4().hex[:12]}"
        ensure_topics(kafka_settings(), {name: partitions},
                      configs={"cleanup.policy": "compact", "max.message.bytes": str(MAX_MESSAGE)})
        wait_for_leaders(kafka_settings(), name, partitions)
        return name

    return make


def _restored(kafka: KafkaSettings, topic: str, key: tuple[str, int]):
    """What a worker that is assigned ``key`` now restores, and the epoch it claims."""
    store = open_kafka_store(kafka, topic, chunk_bytes=CHUNK, partitions=None)
    try:
        epoch = store.claim(*key)
        return store.load(*key), epoch, store.loaded(*key)
    finally:
        store.close()


def _records(kafka: KafkaSettings, topic: str, partition: int) -> list:
    log = KafkaStateLog(kafka, topic, partitions=None)
    try:
        return list(log.scan(partition))
    finally:
        log.close()


def test_a_state_larger_than_the_largest_message_round_trips(kafka_settings, kafka_bootstrap, state_topic):
    kafka, topic = kafka_settings(), state_topic(2)
    state = partition_state("in", 5, 1234, names=40_000)
    blob = serialize(state)
    assert len(blob) > 1_000_000 > 15 * MAX_MESSAGE
    store = open_kafka_store(kafka, topic, chunk_bytes=CHUNK, partitions=2)
    try:
        epoch = store.claim("in", 5)
        assert store.load("in", 5) is None
        store.save(state, epoch)
    finally:
        store.close()
    loaded, _, manifest = _restored(kafka, topic, ("in", 5))
    assert serialize(loaded) == blob
    records = _records(kafka, topic, 1)  # 5 % 2
    assert len(records) == -(-len(blob) // CHUNK) + 1 and not _records(kafka, topic, 0)
    assert max(len(r.value) for r in records) == CHUNK
    assert records[-1].key == manifest.key and records[-1].offset == manifest.offset
    if not is_tansu(kafka_bootstrap):  # tansu keeps topic configs without enforcing them
        log = KafkaStateLog(kafka, topic, partitions=None, max_record_bytes=len(blob))
        try:
            with pytest.raises(CheckpointError, match="refused a record .* SP_CHECKPOINT__CHUNK_BYTES"):
                log.append([StateRecord(1, "in:5:whole", blob)])  # the state as one message
        finally:
            log.close()


def test_a_crash_in_the_middle_of_a_save_falls_back_to_the_previous_state(kafka_settings, state_topic):
    kafka, topic = kafka_settings(), state_topic(1)
    store = open_kafka_store(kafka, topic, chunk_bytes=CHUNK, partitions=1)
    try:
        epoch = store.claim("in", 0)
        store.load("in", 0)
        first = partition_state("in", 0, 100, names=20_000)
        store.save(first, epoch)
    finally:
        store.close()
    assert len(serialize(first)) > 10 * CHUNK
    child = subprocess.run(
        [sys.executable, "-m", "tests.integration.state.save_and_die", kafka.model_dump_json(), topic,
         str(CHUNK), "in", "0", "200", "20000", "1", "5"],
        capture_output=True, text=True, timeout=120,
    )
    assert child.returncode == DIED, child.stderr
    records = _records(kafka, topic, 0)
    crashed = records[-5:]  # five chunks of the next state, acknowledged, and no manifest
    assert [parse_key(r.key)[2] for r in crashed] == ["chunk"] * 5
    assert len({r.key.split(":")[3] for r in crashed}) == 1
    assert parse_key(records[-6].key)[2] == "manifest"

    loaded, epoch, _ = _restored(kafka, topic, ("in", 0))
    assert serialize(loaded) == serialize(first)

    # the next owner's first save tombstones what the crash left behind
    owner = open_kafka_store(kafka, topic, chunk_bytes=CHUNK, partitions=1)
    try:
        epoch = owner.claim("in", 0)
        owner.load("in", 0)
        second = partition_state("in", 0, 300, names=100, seed=2)
        owner.save(second, epoch)
    finally:
        owner.close()
    tombstoned = {r.key for r in _records(kafka, topic, 0)[len(records):] if r.value is None}
    assert {r.key for r in crashed} <= tombstoned
    assert serialize(_restored(kafka, topic, ("in", 0))[0]) == serialize(second)


def test_a_zombie_writer_never_wins_over_the_new_owner(kafka_settings, state_topic):
    kafka, topic = kafka_settings(), state_topic(2)
    zombie = open_kafka_store(kafka, topic, chunk_bytes=CHUNK, partitions=2)
    owner = open_kafka_store(kafka, topic, chunk_bytes=CHUNK, partitions=2)
    neighbour = partition_state("in", 2, 7, seed=9)  # shares state partition 0 with in[0]
    try:
        old_epoch = zombie.claim("in", 0)
        zombie.load("in", 0)
        zombie.save(partition_state("in", 0, 100, names=2_000), old_epoch)
        zombie.save(neighbour, zombie.claim("in", 2))

        epoch = owner.claim("in", 0)  # the partition moved: the zombie stalled past its session
        assert epoch == old_epoch + 1
        assert next(iter(owner.load("in", 0).offsets["in"].values())) == 100
        owned = partition_state("in", 0, 300, names=2_000, seed=1)
        owner.save(owned, epoch)
        zombie.save(partition_state("in", 0, 150, names=2_000, seed=2), old_epoch)  # resumed: later
    finally:
        zombie.close()
        owner.close()
    loaded, next_epoch, manifest = _restored(kafka, topic, ("in", 0))
    assert serialize(loaded) == serialize(owned)
    assert (manifest.epoch, manifest.writer, next_epoch) == (epoch, owner.writer(epoch), epoch + 1)
    assert serialize(_restored(kafka, topic, ("in", 2))[0]) == serialize(neighbour)
    manifests = [Manifest.read(r.key, r.offset, r.value) for r in _records(kafka, topic, 0)
                 if r.value is not None and parse_key(r.key) == ("in", 0, "manifest")]
    assert manifests[-1].next_offset == 150  # the zombie's is there, last in the log


def test_checkpoint_show_prints_the_partitions_of_a_state_topic(kafka_settings, kafka_bootstrap, state_topic):
    kafka, topic = kafka_settings(), state_topic(2)
    states = {(t, p): partition_state(t, p, 10 * (i + 1), seed=i)
              for i, (t, p) in enumerate([("in", 0), ("in", 1), ("other", 0)])}
    store = open_kafka_store(kafka, topic, chunk_bytes=CHUNK, partitions=2)
    try:
        for key, state in states.items():
            store.save(state, store.claim(*key))
    finally:
        store.close()
    res = CliRunner().invoke(main, ["checkpoint", "show", "--topic", topic,
                                    "--bootstrap-servers", kafka_bootstrap])
    assert res.exit_code == 0, res.output
    shown = json.loads(res.stdout)
    assert sorted(shown["partitions"]) == ["in:0", "in:1", "other:0"] and "weights" not in shown
    for (t, p), state in states.items():
        part = shown["partitions"][f"{t}:{p}"]
        assert (part["weights"], part["intercept"], part["mistakes"]) == (
            state.model["weights"], state.model["intercept"], state.model["mistakes"])
        assert (part["seen"], part["labeled"]) == (state.stats["seen"], state.stats["labeled"])
        assert part["next_offset"] == state.offsets[t][p] and part["path"] is None
        assert part["state_record"]["topic"] == topic and part["state_record"]["partition"] == p % 2
        assert part["state_record"]["epoch"] == 1


def test_checkpoint_show_of_a_one_partition_topic_keeps_the_top_level_keys(kafka_settings, kafka_bootstrap,
                                                                           state_topic):
    kafka, topic = kafka_settings(), state_topic(1)
    state = partition_state("in", 0, 55, names=3_000)
    store = open_kafka_store(kafka, topic, chunk_bytes=CHUNK, partitions=1)
    try:
        store.save(state, store.claim("in", 0))
    finally:
        store.close()
    env = {"SP_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap}
    shown = json.loads(CliRunner().invoke(main, ["checkpoint", "show", "--topic", topic], env=env).stdout)
    assert {k: v for k, v in shown.items() if k != "partitions"} == shown["partitions"]["in:0"]
    assert shown["features"] == state.model["features"] and shown["next_offset"] == 55
    assert shown["offsets"] == {"in": {"0": 55}} and shown["model_id"] == state.model_id


def test_checkpoint_show_of_a_missing_or_empty_topic_is_one_line(kafka_bootstrap, state_topic):
    env = {"SP_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap}
    missing = f"test-state-{uuid.uuid4().hex[:12]}"
    res = CliRunner().invoke(main, ["checkpoint", "show", "--topic", missing], env=env)
    assert res.exit_code == 1 and res.stderr == (
        f"stream-perceptron: the state topic {missing} does not exist (SP_CHECKPOINT__TOPIC)\n")
    empty = state_topic(1)
    res = CliRunner().invoke(main, ["checkpoint", "show", "--topic", empty], env=env)
    assert res.exit_code == 1 and res.stderr == f"stream-perceptron: no partition state in topic {empty}\n"


def _send_in_a_transaction(kafka: KafkaSettings, topic: str, records, *, commit: bool) -> None:
    """``records`` in one transaction of a producer of their own, committed or aborted."""
    producer = KafkaProducer(**client_config(kafka), transactional_id=f"test-{uuid.uuid4().hex[:12]}",
                             max_request_size=2 * CHUNK)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for r in records:
            producer.send(topic, key=r.key.encode(), value=r.value, partition=r.partition)
        producer.flush()
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    finally:
        producer.close()


def _a_state_then_the_next_encoded(kafka: KafkaSettings, topic: str):
    """A store holding a first state of in[0], and the records of the next state it encodes."""
    store = open_kafka_store(kafka, topic, chunk_bytes=CHUNK, partitions=1)
    epoch = store.claim("in", 0)
    store.load("in", 0)
    first = partition_state("in", 0, 100, names=3_000)
    store.save(first, epoch)
    nxt = partition_state("in", 0, 200, names=3_000, seed=1)
    return store, first, nxt, store.encode(nxt, epoch)


def test_a_state_sent_in_a_committed_transaction_is_restored(kafka_settings, state_topic):
    kafka, topic = kafka_settings(), state_topic(1)
    store, _, nxt, records = _a_state_then_the_next_encoded(kafka, topic)
    before = {r.key for r in _records(kafka, topic, 0)}
    try:
        assert len(records) > 3
        _send_in_a_transaction(kafka, topic, records, commit=True)
        store.durable(records)  # the transaction committed: the first state's chunks go
    finally:
        store.close()
    assert serialize(_restored(kafka, topic, ("in", 0))[0]) == serialize(nxt)
    tombstoned = {r.key for r in _records(kafka, topic, 0) if r.value is None}
    assert tombstoned == before - {records[-1].key}  # the manifest key is the writer's: reused


def test_a_state_sent_in_an_aborted_transaction_is_never_restored(kafka_settings, kafka_bootstrap,
                                                                  state_topic):
    if is_tansu(kafka_bootstrap):
        pytest.skip("tansu delivers an aborted transaction's records under read_committed")
    kafka, topic = kafka_settings(), state_topic(1)
    store, first, _, records = _a_state_then_the_next_encoded(kafka, topic)
    store.close()
    _send_in_a_transaction(kafka, topic, records, commit=False)
    started = time.monotonic()
    assert serialize(_restored(kafka, topic, ("in", 0))[0]) == serialize(first)
    assert time.monotonic() - started < 10  # the aborted records and the markers are read past


@pytest.mark.timeout(180)
def test_the_kafka_store_over_sasl_ssl_never_logs_the_password(apache_kafka, caplog):
    """The state log's clients get the security settings as every client does: SCRAM over TLS,
    the password in no line the package logs (at DEBUG) nor in checkpoint show's output.
    (kafka-python's own DEBUG lines print its configuration; the CLI keeps them out.)"""
    secret = apache_kafka.passwords[SCRAM_USER]
    kafka = KafkaSettings(bootstrap_servers=apache_kafka.sasl_bootstrap, security_protocol="SASL_SSL",
                          ssl_cafile=apache_kafka.ca_file, sasl_mechanism="SCRAM-SHA-512",
                          sasl_username=SCRAM_USER, sasl_password=secret)
    topic = f"test-state-{uuid.uuid4().hex[:12]}"
    state = partition_state("in", 0, 9, names=2_000)
    with caplog.at_level(logging.DEBUG):
        store = open_kafka_store(kafka, topic, chunk_bytes=CHUNK, partitions=1)
        try:
            store.save(state, store.claim("in", 0))
        finally:
            store.close()
        assert serialize(_restored(kafka, topic, ("in", 0))[0]) == serialize(state)
    env = {"SP_KAFKA__BOOTSTRAP_SERVERS": apache_kafka.sasl_bootstrap,
           "SP_KAFKA__SECURITY_PROTOCOL": "SASL_SSL", "SP_KAFKA__SSL_CAFILE": str(apache_kafka.ca_file),
           "SP_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512", "SP_KAFKA__SASL_USERNAME": SCRAM_USER,
           "SP_KAFKA__SASL_PASSWORD": secret}
    res = CliRunner().invoke(main, ["checkpoint", "show", "--topic", topic], env=env)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["next_offset"] == 9
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("stream_perceptron"))
    assert f"state topic {topic}: 1 partitions" in ours  # the store's own lines were seen
    assert secret not in ours and secret not in res.stdout and secret not in res.stderr
