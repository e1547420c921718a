"""Talking to the broker: creating and deleting topics, producing the input once, reading an
output topic back, and the steady-rate producer and reader of the latency section."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.worker.contenders import CF, KP, confluent_available


def create_topics(bootstrap: str, names: Sequence[str]) -> None:
    """One-partition topics (idempotent)."""
    from stream_perceptron.kafka.admin import ensure_topics
    from stream_perceptron.settings import KafkaSettings

    ensure_topics(KafkaSettings(bootstrap_servers=bootstrap), dict.fromkeys(names, 1))


@contextlib.contextmanager
def _admin(bootstrap: str) -> Iterator[Any]:
    """A kafka-python admin client with the worker's client settings, closed afterwards."""
    from kafka import KafkaAdminClient

    from stream_perceptron.kafka.admin import client_config
    from stream_perceptron.settings import KafkaSettings

    admin = KafkaAdminClient(**client_config(KafkaSettings(bootstrap_servers=bootstrap)))
    try:
        yield admin
    finally:
        admin.close()


def delete_topics(bootstrap: str, names: Sequence[str]) -> None:
    """Best effort, after each run and each section (``Ctx.scope``), so that nothing is left behind."""
    if not names:
        return
    with contextlib.suppress(Exception), _admin(bootstrap) as admin:
        for i in range(0, len(names), 50):
            with contextlib.suppress(Exception):
                admin.delete_topics(list(names[i : i + 50]))


def topic_count(bootstrap: str) -> int | None:
    """How many topics the broker holds (None if it cannot be asked)."""
    try:
        with _admin(bootstrap) as admin:
            return len(admin.list_topics())
    except Exception:
        return None


def produce_all(bootstrap: str, topic: str, values: Sequence[bytes]) -> float:
    """Send ``values`` (keys = the index) with the worker's producer settings; returns seconds."""
    from kafka import KafkaProducer

    from bench.pipe import kafka_settings, producer_kwargs

    producer = KafkaProducer(**producer_kwargs(kafka_settings(bootstrap)))
    t0 = time.perf_counter()
    try:
        send = producer.send
        for i, v in enumerate(values):
            send(topic, value=v, key=str(i).encode())
        producer.flush()
    finally:
        producer.close()
    return time.perf_counter() - t0


@dataclass
class ReadBack:
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    values: list[bytes] = field(default_factory=list)
    timestamp_types: set[int] = field(default_factory=set)


def read_back(
    bootstrap: str,
    topic: str,
    *,
    expected: int | None = None,
    values: bool = False,
    timeout_s: float = 300.0,
    idle_s: float = 3.0,
) -> ReadBack:
    """Partition 0 of ``topic`` from offset 0: until ``expected`` records, else up to the high-water
    mark from fetch responses (``end_offsets`` is wrong on tansu), or ``idle_s`` idle. A read that
    comes back short (or not from offset 0) is tried once more."""
    if expected == 0:
        return ReadBack()
    out = _read_back_once(bootstrap, topic, expected, values, timeout_s, idle_s)
    if (expected is not None and len(out.offsets) < expected) or (out.offsets and out.offsets[0] != 0):
        again = _read_back_once(bootstrap, topic, expected, values, timeout_s, idle_s * 3)
        if len(again.offsets) > len(out.offsets):
            out = again
    return out


def _read_back_once(
    bootstrap: str, topic: str, expected: int | None, values: bool, timeout_s: float, idle_s: float
) -> ReadBack:
    from bench.pipe import assigned_consumer, kafka_settings

    out = ReadBack()
    consumer = assigned_consumer(kafka_settings(bootstrap), topic)
    from kafka import TopicPartition

    tp = TopicPartition(topic, 0)
    try:
        deadline = time.monotonic() + timeout_s
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=200, max_records=20_000)
            for recs in got.values():
                for r in recs:
                    out.offsets.append(r.offset)
                    out.timestamps.append(r.timestamp)
                    out.timestamp_types.add(r.timestamp_type)
                    if values:
                        out.values.append(r.value)
            if got:
                last_new = time.monotonic()
            if expected is not None:
                if len(out.offsets) >= expected:
                    break
            else:
                hw = consumer.highwater(tp)
                if hw is not None and consumer.position(tp) >= hw:
                    break
            if time.monotonic() - last_new > idle_s:
                break
    finally:
        consumer.close()
    return out


class LoadProducer:
    """The latency runs' load generator: the worker's producer settings (linger, batch size,
    acks=all) on confluent-kafka when it is installed (about 2 µs per record, so even a 40k rec/s
    load costs the 2-core machine little), else kafka-python."""

    def __init__(self, bootstrap: str) -> None:
        self.failed: list[str] = []
        self.client = CF if confluent_available() else KP
        if self.client == CF:
            from confluent_kafka import Producer

            from bench.pipe import confluent_configs, kafka_settings

            def on_delivery(err: Any, _msg: Any) -> None:
                if err is not None:
                    self.failed.append(str(err))

            _, cfg = confluent_configs(kafka_settings(bootstrap), "bench-load")
            self._p: Any = Producer({**cfg, "on_delivery": on_delivery})
        else:
            from kafka import KafkaProducer

            from bench.pipe import kafka_settings, producer_kwargs

            self._p = KafkaProducer(**producer_kwargs(kafka_settings(bootstrap)))

    def sender(self, topic: str) -> Callable[[bytes, bytes], None]:
        """``send(value, key)`` to ``topic``."""
        if self.client == CF:
            produce, serve = self._p.produce, self._p.poll

            def send_cf(value: bytes, key: bytes) -> None:
                while True:
                    try:
                        produce(topic, value=value, key=key)
                        return
                    except BufferError:
                        serve(0.01)

            return send_cf
        send = self._p.send
        return lambda value, key: send(topic, value=value, key=key)

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


class TopicReader:
    """Partition 0 of a fresh topic from offset 0: (offset, timestamp ms, value) per record; on
    confluent-kafka when installed (fast, ``fetch.wait.max.ms`` 10), else kafka-python."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from bench.pipe import kafka_settings

        kafka = kafka_settings(bootstrap, fetch_max_wait_ms=10)
        self.client = CF if confluent_available() else KP
        if self.client == CF:
            from confluent_kafka import Consumer, TopicPartition

            from bench.pipe import confluent_configs

            cfg, _ = confluent_configs(kafka, f"bench-reader-{os.getpid()}")
            self._c: Any = Consumer(cfg)
            self._c.assign([TopicPartition(topic, 0, 0)])
        else:
            from bench.pipe import assigned_consumer

            self._c = assigned_consumer(kafka, topic)

    def poll(self, timeout_s: float = 0.2) -> list[tuple[int, int, bytes]]:
        if self.client == CF:
            first = self._c.poll(timeout_s)
            if first is None:
                return []
            msgs = [first, *self._c.consume(50_000, 0)]
            return [(m.offset(), m.timestamp()[1], m.value()) for m in msgs if m.error() is None]
        out = []
        for recs in self._c.poll(timeout_ms=int(timeout_s * 1000), max_records=20_000).values():
            out += [(r.offset, r.timestamp, r.value) for r in recs]
        return out

    def read(self, expected: int, timeout_s: float) -> list[tuple[int, int, bytes]]:
        out: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            out += self.poll()
        return out

    def close(self) -> None:
        self._c.close()
