"""Broker work: creating and deleting topics, producing input, reading a topic back, and the
latency section's steady producer and reader."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.worker.contenders import CF, KP, confluent_available


def create_topics(bootstrap: str, names: Sequence[str], partitions: int = 1) -> None:
    """Topics of ``partitions`` partitions (idempotent)."""
    from stream_perceptron.kafka.admin import ensure_topics
    from stream_perceptron.settings import KafkaSettings

    ensure_topics(KafkaSettings(bootstrap_servers=bootstrap), dict.fromkeys(names, partitions))


@contextlib.contextmanager
def admin_client(bootstrap: str, cls: Any = None) -> Iterator[Any]:
    """A kafka-python admin client (``cls``, by default ``KafkaAdminClient``) with the worker's
    client settings, closed afterwards."""
    from kafka import KafkaAdminClient

    from stream_perceptron.kafka.admin import client_config
    from stream_perceptron.settings import KafkaSettings

    admin = (cls or KafkaAdminClient)(**client_config(KafkaSettings(bootstrap_servers=bootstrap)))
    try:
        yield admin
    finally:
        admin.close()


def delete_topics(bootstrap: str, names: Sequence[str]) -> None:
    """Best effort, after each run and each section (``Ctx.scope``), so that nothing is left behind."""
    with contextlib.suppress(Exception), admin_client(bootstrap) as admin:
        for i in range(0, len(names), 50):
            with contextlib.suppress(Exception):
                admin.delete_topics(list(names[i : i + 50]))


def topic_count(bootstrap: str) -> int | None:
    """How many topics the broker holds (None if it cannot be asked)."""
    try:
        with admin_client(bootstrap) as admin:
            return len(admin.list_topics())
    except Exception:
        return None


class LoadProducer:
    """The worker's producer settings (linger, batch size, acks=all) on confluent-kafka when it is
    installed (about 2 µs per record, so even a 40k rec/s load costs the machine little), else
    kafka-python."""

    def __init__(self, bootstrap: str) -> None:
        from bench.pipe import confluent_configs, kafka_settings, producer_kwargs

        self.failed: list[str] = []
        self.client = CF if confluent_available() else KP
        if self.client == CF:
            from confluent_kafka import Producer

            def on_delivery(err: Any, _msg: Any) -> None:
                if err is not None:
                    self.failed.append(str(err))

            self._p: Any = Producer({**confluent_configs(kafka_settings(bootstrap), "bench-load")[1],
                                     "on_delivery": on_delivery})
        else:
            from kafka import KafkaProducer

            self._p = KafkaProducer(**producer_kwargs(kafka_settings(bootstrap)))

    def sender(self, topic: str) -> Callable[[bytes, bytes], None]:
        """``send(value, key)`` to ``topic`` (the client's partitioner choosing by the key)."""
        if self.client == KP:
            send = self._p.send
            return lambda value, key: send(topic, value=value, key=key)
        produce, serve = self._p.produce, self._p.poll

        def send_cf(value: bytes, key: bytes) -> None:
            while True:
                try:
                    return produce(topic, value=value, key=key)  # type: ignore[no-any-return]
                except BufferError:
                    serve(0.01)

        return send_cf

    def flush(self) -> None:
        self._p.flush(60) if self.client == CF else self._p.flush()
        if self.failed:
            raise RuntimeError(f"load generator: {len(self.failed)} records failed: {self.failed[:3]}")

    def close(self) -> None:
        """Close the producer now, before the benchmark stops the broker."""
        if self.client == CF:
            from stream_perceptron.kafka.confluent_edge import drop_and_close

            drop_and_close(self._p)
        else:
            self._p.close()


def produce_all(bootstrap: str, topic: str, values: Sequence[bytes]) -> float:
    """``values[i]`` with key ``str(i)`` to ``topic`` (:class:`LoadProducer`); the seconds it took."""
    producer, t0 = LoadProducer(bootstrap), time.perf_counter()
    try:
        send = producer.sender(topic)
        for i, value in enumerate(values):
            send(value, str(i).encode())
        producer.flush()
    finally:
        producer.close()
    return time.perf_counter() - t0


@dataclass
class ReadBack:
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    values: list[bytes] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)


def read_back(bootstrap: str, topic: str, *, expected: int | None = None, values: bool = False,
              timeout_s: float = 300.0, idle_s: float = 3.0) -> ReadBack:
    """Partition 0 of ``topic`` from offset 0: until ``expected`` records, else up to the high-water
    mark from fetch responses (``end_offsets`` is wrong on tansu), or ``idle_s`` idle. A read that
    comes back short (or not from offset 0) is tried once more."""
    if expected == 0:
        return ReadBack()
    out = _read_back_once(bootstrap, topic, expected, values, timeout_s, idle_s)
    if (expected is not None and len(out.offsets) < expected) or (out.offsets and out.offsets[0] != 0):
        again = _read_back_once(bootstrap, topic, expected, values, timeout_s, idle_s * 3)
        out = again if len(again.offsets) > len(out.offsets) else out
    return out


def _read_back_once(bootstrap: str, topic: str, expected: int | None, values: bool, timeout_s: float,
                    idle_s: float) -> ReadBack:
    from kafka import TopicPartition

    from bench.pipe import assigned_consumer, kafka_settings

    out, tp = ReadBack(), TopicPartition(topic, 0)
    consumer = assigned_consumer(kafka_settings(bootstrap), topic)
    try:
        deadline = time.monotonic() + timeout_s
        last_new = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last_new <= idle_s:
            for recs in consumer.poll(timeout_ms=200, max_records=20_000).values():
                last_new = time.monotonic()
                out.offsets += [r.offset for r in recs]
                out.timestamps += [r.timestamp for r in recs]
                out.values += [r.value for r in recs] if values else []
                out.keys += [r.key for r in recs] if values else []
            if expected is not None and len(out.offsets) >= expected:
                break
            hw = consumer.highwater(tp) if expected is None else None
            if hw is not None and consumer.position(tp) >= hw:
                break
    finally:
        consumer.close()
    return out


class TopicReader:
    """Partition 0 of a fresh topic from offset 0: (offset, timestamp ms, value) per record; on
    confluent-kafka when installed (``fetch.wait.max.ms`` 10), else kafka-python."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from bench.pipe import assigned_consumer, confluent_configs, kafka_settings

        kafka = kafka_settings(bootstrap, fetch_max_wait_ms=10)
        self.client = CF if confluent_available() else KP
        if self.client == CF:
            from confluent_kafka import Consumer, TopicPartition

            self._c: Any = Consumer(confluent_configs(kafka, f"bench-reader-{os.getpid()}")[0])
            self._c.assign([TopicPartition(topic, 0, 0)])
        else:
            self._c = assigned_consumer(kafka, topic)

    def poll(self, timeout_s: float = 0.2) -> list[tuple[int, int, bytes]]:
        if self.client == KP:
            got = self._c.poll(timeout_ms=int(timeout_s * 1000), max_records=20_000).values()
            return [(r.offset, r.timestamp, r.value) for recs in got for r in recs]
        first = self._c.poll(timeout_s)
        msgs = [] if first is None else [first, *self._c.consume(50_000, 0)]
        return [(m.offset(), m.timestamp()[1], m.value()) for m in msgs if m.error() is None]

    def read(self, expected: int, timeout_s: float) -> list[tuple[int, int, bytes]]:
        out: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            out += self.poll()
        return out

    def close(self) -> None:
        self._c.close()
