"""kafka-python's ``KafkaProducer.send`` cost against the number of topics the broker holds.

Run from the repository root::

    .venv/bin/python -m bench.bench_topics                        # embedded broker: 1, 100, 300 topics
    .venv/bin/python -m bench.bench_topics --topics 1,50,300 --repeats 5 --json bench/results/topics.json
    .venv/bin/python -m bench.bench_topics --bootstrap HOST:PORT  # an existing broker; its topics count

Every call of ``send`` checks the named partition against sets that kafka-python builds afresh
from the topics its metadata holds (``ClusterMetadata.topics()`` and ``partitions_for_topic``). A
producer's metadata holds the topics it writes to on Apache Kafka; on the embedded broker (tansu)
it holds every topic of the broker, because tansu answers kafka-python's metadata request for no
topics (``topics=[]``) with all of them. So on tansu the cost of ``send`` grows with the number of
topics on the broker, and the worker benchmark deletes each run's topics
(``bench.worker.processes.Ctx.scope``).

This measures it: for each topic count (ascending; filler topics are created to reach it), a
fresh producer with the worker's settings sends ``--records`` records of ~110 bytes to partition 0
of one topic, named as the worker's edge names it; the time of the ``send`` calls (not the final
flush) per record, median of ``--repeats`` fresh producers. The filler topics are deleted at the
end.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.pipe import kafka_settings, producer_kwargs
from bench.worker.formatting import format_table, write_json
from bench.worker.processes import broker_at
from bench.worker.topics import create_topics, delete_topics, topic_count


def time_sends(bootstrap: str, topic: str, records: int) -> tuple[float, int]:
    """(µs per ``send`` call, topics in the producer's metadata) for a fresh producer."""
    from kafka import KafkaProducer

    producer = KafkaProducer(**producer_kwargs(kafka_settings(bootstrap)))
    try:
        producer.send(topic, b"warm-up", partition=0).get(timeout=30)
        known = len(producer._metadata.topics())  # private, read once: what send() iterates
        value = b"x" * 110
        keys = [str(i).encode() for i in range(records)]
        started = time.perf_counter()
        for key in keys:
            producer.send(topic, value, key=key, partition=0)
        elapsed = time.perf_counter() - started
        producer.flush()
    finally:
        producer.close()
    return 1e6 * elapsed / records, known


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", default="1,100,300", help="topic counts on the broker, comma-separated")
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bootstrap", help="an existing broker (default: start the embedded one)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    counts = sorted(int(c) for c in args.topics.split(","))
    with broker_at(args.bootstrap) as (bootstrap, _):
        prefix = f"bt{int(time.time())}"
        target, fillers = f"{prefix}-send", []
        results: list[dict[str, Any]] = []
        try:
            create_topics(bootstrap, [target])
            for count in counts:
                have = topic_count(bootstrap) or 1
                more = [f"{prefix}-filler-{len(fillers) + i}" for i in range(max(0, count - have))]
                if more:
                    create_topics(bootstrap, more)
                    fillers += more
                runs = [time_sends(bootstrap, target, args.records) for _ in range(args.repeats)]
                us = [u for u, _ in runs]
                results.append({"broker_topics": topic_count(bootstrap), "producer_topics": runs[-1][1],
                                "us_per_send": us, "median_us": statistics.median(us)})
        finally:
            if args.bootstrap is not None:
                delete_topics(bootstrap, [target, *fillers])
    base = results[0]["median_us"]
    rows = [
        [f"{r['broker_topics']:,}", f"{r['producer_topics']:,}", f"{r['median_us']:.1f}",
         f"{(max(r['us_per_send']) - min(r['us_per_send'])) / r['median_us']:.0%}",
         f"{r['median_us'] / base:.2f}"]
        for r in results
    ]
    print(f"KafkaProducer.send, {args.records:,} records to a named partition, the worker's producer "
          f"settings; median of {args.repeats} fresh producers")
    print(format_table(["broker topics", "producer knows", "us/send", "spread", "x fewest"], rows))
    report = {"records": args.records, "repeats": args.repeats, "bootstrap": args.bootstrap or "embedded",
              "results": results}
    if args.json is not None:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
