"""``bench.bench_topics`` against the test broker: it adds the topics it is asked for, times
kafka-python's ``send`` with each count, and deletes what it made."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_topics import main  # noqa: E402
from bench.worker.topics import topic_count  # noqa: E402


def test_send_is_timed_at_each_topic_count_and_the_fillers_are_deleted(kafka_bootstrap: str) -> None:
    before = topic_count(kafka_bootstrap)
    assert before is not None
    first, second = before + 1, before + 6  # the benchmark's own topic, then five fillers
    report = main(["--bootstrap", kafka_bootstrap, "--topics", f"{second},{first}", "--records", "300",
                   "--repeats", "2"])
    results = report["results"]
    assert [r["broker_topics"] for r in results] == [first, second]
    for r in results:
        assert len(r["us_per_send"]) == 2 and all(u > 0 for u in r["us_per_send"])
        assert 1 <= r["producer_topics"] <= r["broker_topics"]
    deadline = time.monotonic() + 10  # Apache Kafka deletes topics asynchronously
    while topic_count(kafka_bootstrap) != before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert topic_count(kafka_bootstrap) == before
