"""``kafka_wake``: the fetcher's *idle* answer is corrected only while a response waits in its
buffer; everything else passes through; a fetcher of another shape is declined.

The race itself, on a real consumer and broker, is in ``tests/integration/kafka/fastpath/test_wake.py``.
"""

from __future__ import annotations

import collections
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.consumer.fetcher import Fetcher

from stream_perceptron.kafka.fastpath import wake as kafka_wake


class ScriptedFetcher(Fetcher):  # type: ignore[misc]
    """kafka-python's fetcher class, answering ``fetch_records`` from a script (no client)."""

    def __init__(self, answer: tuple[dict[Any, list[Any]], bool], buffered: int) -> None:
        self._completed_fetches = collections.deque(range(buffered))
        self.answer = answer
        self.calls: list[tuple[Any, ...]] = []

    def fetch_records(
        self, max_records: Any = None, update_offsets: bool = True, timeout_ms: Any = None
    ) -> tuple[dict[Any, list[Any]], bool]:
        self.calls.append((max_records, update_offsets, timeout_ms))
        return self.answer


def _installed(answer: tuple[dict[Any, list[Any]], bool], buffered: int) -> tuple[Any, ScriptedFetcher]:
    fetcher = ScriptedFetcher(answer, buffered)
    consumer = SimpleNamespace(_fetcher=fetcher)
    assert kafka_wake.install(consumer)
    return consumer, fetcher


def test_idle_with_a_response_in_the_buffer_is_not_idle() -> None:
    consumer, _ = _installed(({}, True), buffered=1)
    assert consumer._fetcher.fetch_records(500, update_offsets=True, timeout_ms=100) == ({}, False)


@pytest.mark.parametrize(
    ("answer", "buffered"),
    [
        (({}, True), 0),  # idle, and nothing buffered: idle it is (kafka-python sleeps)
        (({}, False), 0),  # waited on a fetch in flight
        (({}, False), 2),
        (({"tp": [1]}, False), 1),  # records: returned as they are
    ],
)
def test_every_other_answer_passes_through(answer: tuple[dict[Any, list[Any]], bool], buffered: int) -> None:
    consumer, _ = _installed(answer, buffered)
    assert consumer._fetcher.fetch_records(7, update_offsets=False, timeout_ms=0) == answer


def test_the_arguments_reach_kafka_pythons_fetch_records() -> None:
    consumer, fetcher = _installed(({}, True), buffered=0)
    consumer._fetcher.fetch_records(7, update_offsets=False, timeout_ms=12.5)
    consumer._fetcher.fetch_records()
    assert fetcher.calls == [(7, False, 12.5), (None, True, None)]


class LandingFetcher(ScriptedFetcher):
    """Its buffer changes while ``fetch_records`` runs: ``land`` responses come in, or
    ``drain`` empties it, as the I/O thread and kafka-python's own read do."""

    def __init__(self, *, buffered: int, land: int = 0, drain: bool = False) -> None:
        super().__init__(({}, True), buffered)
        self.land, self.drain = land, drain

    def fetch_records(
        self, max_records: Any = None, update_offsets: bool = True, timeout_ms: Any = None
    ) -> tuple[dict[Any, list[Any]], bool]:
        if self.drain:
            self._completed_fetches.clear()
        self._completed_fetches.extend(range(self.land))
        return self.answer


def test_the_buffer_is_looked_at_after_kafka_pythons_answer_not_before() -> None:
    # a response landing during the call counts; one that the call itself read does not
    for fetcher, expected in (
        (LandingFetcher(buffered=0, land=1), ({}, False)),
        (LandingFetcher(buffered=2, drain=True), ({}, True)),
    ):
        consumer = SimpleNamespace(_fetcher=fetcher)
        assert kafka_wake.install(consumer)
        assert consumer._fetcher.fetch_records() == expected


@pytest.mark.parametrize("answer", [None, ({}, True, "more"), [{}, True]])
def test_an_answer_of_another_shape_passes_through(answer: Any) -> None:
    consumer, _ = _installed(answer, buffered=1)
    assert consumer._fetcher.fetch_records() is answer


def test_installing_twice_wraps_once() -> None:
    consumer, fetcher = _installed(({}, True), buffered=1)
    first = consumer._fetcher.fetch_records
    assert kafka_wake.install(consumer) and consumer._fetcher.fetch_records is first
    consumer._fetcher.fetch_records()
    assert len(fetcher.calls) == 1


def test_supports_kafka_pythons_fetcher() -> None:
    fetcher = object.__new__(Fetcher)
    fetcher._completed_fetches = collections.deque()
    assert kafka_wake.supports(SimpleNamespace(_fetcher=fetcher))


class BuiltinFetchRecords:
    fetch_records = max  # a builtin with no signature to read
    _completed_fetches = collections.deque[Any]()


class OtherSignature(ScriptedFetcher):
    def fetch_records(self, max_records: Any = None) -> tuple[dict[Any, list[Any]], bool]:  # type: ignore[override]
        return self.answer


EMPTY = collections.deque[Any]


@pytest.mark.parametrize(
    "consumer",
    [
        SimpleNamespace(),  # no fetcher
        SimpleNamespace(_fetcher=SimpleNamespace(_completed_fetches=EMPTY())),  # no fetch_records
        SimpleNamespace(_fetcher=OtherSignature(({}, True), 0)),
        SimpleNamespace(_fetcher=BuiltinFetchRecords()),
    ],
    ids=["no-fetcher", "no-fetch-records", "other-signature", "builtin"],
)
def test_declines_a_fetcher_of_another_shape(consumer: Any) -> None:
    before = getattr(getattr(consumer, "_fetcher", None), "fetch_records", None)
    assert not kafka_wake.supports(consumer)
    assert not kafka_wake.install(consumer) and not kafka_wake.installed(consumer)
    assert getattr(getattr(consumer, "_fetcher", None), "fetch_records", None) == before


def test_declines_a_buffer_that_is_not_a_deque() -> None:
    fetcher = ScriptedFetcher(({}, True), 0)
    fetcher._completed_fetches = []
    assert not kafka_wake.supports(SimpleNamespace(_fetcher=fetcher))


def test_refusal_names_the_check_that_failed() -> None:
    # what the edge's start line says when kafka-python's sleep is kept
    fetcher = ScriptedFetcher(({}, True), 0)
    fetcher._completed_fetches = EMPTY()
    assert kafka_wake.refusal(SimpleNamespace(_fetcher=fetcher)) is None
    assert kafka_wake.refusal(SimpleNamespace()) == "shape: the consumer's fetcher has no fetch_records"
    other = SimpleNamespace(_fetcher=OtherSignature(({}, True), 0))
    assert kafka_wake.refusal(other) == "shape: Fetcher.fetch_records takes other arguments"
    fetcher._completed_fetches = []
    assert kafka_wake.refusal(SimpleNamespace(_fetcher=fetcher)) == (
        "shape: the consumer's fetcher has no _completed_fetches deque")
