"""kafka-python's consumer reads a fetch response that lands mid-poll, instead of sleeping on it.

In kafka-python 3.0, ``KafkaConsumer.poll`` asks its fetcher for records, and sleeps
``retry_backoff_ms`` (100 ms by default) whenever the fetcher answers *idle*: no records, and
nothing it could wait for. The fetcher decides that in three steps, while the client's I/O
thread receives responses beside it:

1. it takes what its buffer of fetch responses holds;
2. if that emptied the buffer, it sends a fetch to each broker with none in flight, for the
   partitions that have no buffered response, and forgets the fetches that are done;
3. with no records, it waits for the fetches still in flight; if there are none, it is idle.

A response that arrives between steps 1 and 2 is buffered, so step 2 sends no fetch for its
partition and forgets its request: step 3 finds nothing in flight and says idle, while records
wait in the buffer. The consumer then sleeps 100 ms on them, holding thousands of records back
under a steady input; such stalls set the p99 latency (``docs/performance.md``, "Decisions").
With partitions on several brokers, a fetch still in flight to another broker makes step 3
wait for it (up to ``fetch_max_wait_ms``) instead of sleeping: that case is not changed here.

:func:`install` corrects the answer on one consumer's fetcher: *idle* with a response in its
buffer becomes *not idle*, so ``poll`` asks again at once and takes it. Nothing else changes:
the next ask drains the buffer (records, or a paused partition's response set aside), so the
correction cannot repeat without a new response. :func:`refusal` checks the two internals this
reads. Where they differ, the consumer keeps kafka-python's sleep. ``README.md`` beside this
file says which kafka-python versions were checked and what to re-run on an upgrade.
"""

from __future__ import annotations

import collections
from typing import Any

from stream_perceptron.kafka.fastpath.fetch import parameter_names

_STOCK_PARAMETERS = ["self", "max_records", "update_offsets", "timeout_ms"]


def supports(consumer: Any) -> bool:
    """True if ``consumer``'s fetcher has the two internals this module uses, as in
    kafka-python 3.0: ``fetch_records(max_records, update_offsets, timeout_ms)`` answering
    ``(records, idle)``, and its buffer of responses ``_completed_fetches``."""
    return refusal(consumer) is None


def refusal(consumer: Any) -> str | None:
    """Why :func:`install` leaves ``consumer``'s polls as kafka-python has them (a shape check
    that failed), or None where it installs."""
    fetcher = getattr(consumer, "_fetcher", None)
    stock = getattr(type(fetcher), "fetch_records", None)
    if not callable(stock):
        return "shape: the consumer's fetcher has no fetch_records"
    if not isinstance(getattr(fetcher, "_completed_fetches", None), collections.deque):
        return "shape: the consumer's fetcher has no _completed_fetches deque"
    if parameter_names(stock) != _STOCK_PARAMETERS:
        return "shape: Fetcher.fetch_records takes other arguments"
    return None


def install(consumer: Any) -> bool:
    """Make ``consumer``'s polls take a response that landed mid-poll at once (see the module
    doc) where :func:`supports` holds; returns whether it does."""
    if installed(consumer):
        return True
    if not supports(consumer):
        return False
    fetcher = consumer._fetcher
    stock = fetcher.fetch_records

    def fetch_records(
        max_records: int | None = None, update_offsets: bool = True, timeout_ms: float | None = None
    ) -> Any:  # kafka-python's (records, idle), or whatever another version answers, unchanged
        answer = stock(max_records, update_offsets=update_offsets, timeout_ms=timeout_ms)
        if type(answer) is tuple and answer == ({}, True) and fetcher._completed_fetches:
            return {}, False  # a response came in after the buffer was read: read it now
        return answer

    fetch_records.wakes = True  # type: ignore[attr-defined]
    fetcher.fetch_records = fetch_records
    return True


def installed(consumer: Any) -> bool:
    """True if :func:`install` took ``consumer``."""
    fetcher = getattr(consumer, "_fetcher", None)
    return getattr(getattr(fetcher, "fetch_records", None), "wakes", False) is True
