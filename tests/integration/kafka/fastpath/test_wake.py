"""``kafka_wake`` on the test broker: a fetch response that lands between the fetcher's read of
its buffer and its next fetches is taken by the same poll, where kafka-python's own consumer
sleeps ``retry_backoff_ms`` on it. That the worker's kafka-python edges install it is checked
beside ``kafka_fetch``, in ``test_kafka_fetch.py``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from stream_perceptron.kafka.admin import client_config, consumer_config
from stream_perceptron.kafka.fastpath import wake as kafka_wake
from stream_perceptron.settings import KafkaSettings

Settings = Callable[..., KafkaSettings]
BACKOFF_MS = 4_000  # kafka-python's sleep when its fetcher says idle: long, to tell it apart


def _send(producer: KafkaProducer, topic: str, value: bytes) -> None:
    producer.send(topic, value=value).get(timeout=30)


def _in_flight(fetcher: Any) -> bool:
    return any(not f.is_done for f in list(fetcher._fetch_futures))


def _race_once(consumer: KafkaConsumer, land: Callable[[], None]) -> dict[str, Any]:
    """Make the consumer's next ``send_fetches`` with a fetch in flight wait until that fetch's
    response is buffered (``land()`` first gives it a record): the race of the module doc,
    every time instead of now and then. Fills in whether it happened, with a response buffered,
    and when (``at``, monotonic).

    The stock ``send_fetches`` runs on the client's I/O thread, queued behind the callbacks of
    the response that just came in, so it finds that response buffered (``buffered`` checks)."""
    fetcher = consumer._fetcher
    stock = fetcher.send_fetches
    seen: dict[str, Any] = {"raced": False, "buffered": False, "at": None}

    def send_fetches() -> Any:
        if not seen["raced"] and _in_flight(fetcher):
            seen["raced"] = True
            land()
            deadline = time.monotonic() + 30
            while _in_flight(fetcher):
                assert time.monotonic() < deadline, "the fetch in flight never came back"
                time.sleep(0.001)
            result = stock()
            seen["buffered"], seen["at"] = bool(fetcher._completed_fetches), time.monotonic()
            return result
        return stock()

    fetcher.send_fetches = send_fetches
    return seen


def _poll_after_race(
    kafka: KafkaSettings, topic: str, *, wake: bool
) -> tuple[float, list[bytes], dict[str, Any]]:
    """One record polled, the next fetch in flight, then the race: how long the next poll took
    to return the record sent meanwhile once its response was buffered, what it returned, and
    what :func:`_race_once` saw."""
    producer = KafkaProducer(**client_config(kafka), acks="all")
    # the broker holds an empty fetch up to 2 s: the one sent below stays in flight however
    # slowly this host runs the few steps before the race
    consumer = KafkaConsumer(**consumer_config(kafka), fetch_max_wait_ms=2_000, retry_backoff_ms=BACKOFF_MS)
    try:
        if wake:
            assert kafka_wake.install(consumer)
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        _send(producer, topic, b"first")
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got:
            assert time.monotonic() < deadline
            got = [r.value for rs in consumer.poll(timeout_ms=1_000).values() for r in rs]
        assert got == [b"first"]
        assert consumer.poll(timeout_ms=0) == {}  # sends the next fetch, which the broker holds
        assert _in_flight(consumer._fetcher)
        seen = _race_once(consumer, lambda: _send(producer, topic, b"second"))
        started_at = time.monotonic()
        got = []
        while not got and time.monotonic() - started_at < 30:
            got = [r.value for rs in consumer.poll(timeout_ms=20_000).values() for r in rs]
        return time.monotonic() - (seen["at"] or started_at), got, seen
    finally:
        consumer.close()
        producer.close()


def test_a_response_landing_mid_poll_is_taken_at_once_not_after_the_backoff(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    kafka = kafka_settings()
    stock_s, stock_got, stock_seen = _poll_after_race(kafka, new_topic(), wake=False)
    woken_s, woken_got, woken_seen = _poll_after_race(kafka, new_topic(), wake=True)
    # the race was made both times, with a response in the buffer when the fetcher said idle
    assert (stock_seen["raced"], stock_seen["buffered"]) == (woken_seen["raced"], woken_seen["buffered"]) == (
        True, True
    )
    assert stock_got == woken_got == [b"second"]
    # kafka-python's own consumer slept on it; this one did not
    assert stock_s >= BACKOFF_MS / 1000 * 0.95, f"kafka-python no longer sleeps here ({stock_s:.2f} s)"
    assert woken_s < BACKOFF_MS / 1000 / 2, f"took {woken_s:.2f} s"


def test_supports_the_installed_kafka_python_consumer(kafka_settings: Settings) -> None:
    consumer = KafkaConsumer(**consumer_config(kafka_settings()))
    try:
        assert kafka_wake.supports(consumer)
        assert not kafka_wake.installed(consumer)
        assert kafka_wake.install(consumer) and kafka_wake.installed(consumer)
    finally:
        consumer.close()
