"""The peer: the application a Python team would write instead, Quix Streams and river.

    .venv-peer/bin/python -m bench.peer_quix --bootstrap 127.0.0.1:9092 --input IN --output OUT --records N

(``make peer-venv`` makes ``.venv-peer``.) What it does: docs/performance.md, "Method", item 5; the
last line on stdout is ``BENCH_RESULT {json}``. river's ``predict_one`` breaks a tie at a score of 0
towards False, so its "mistakes" can differ from the worker's on boundary rows.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from bench.pipe import contender_args, emit_result, own_rate

# the worker's defaults (stream_perceptron.settings.KafkaSettings), for the clients to batch alike
LINGER_MS, BATCH_BYTES, FETCH_WAIT_MS = 20, 262_144, 50


def peer(bootstrap: str, input_topic: str, output_topic: str, records: int) -> dict[str, Any]:
    """Learn and predict ``records`` records of ``input_topic`` with Quix Streams and river."""
    from quixstreams import Application
    from river import linear_model

    model = linear_model.Perceptron()
    counts = {"mistakes": 0, "labeled": 0}
    first: list[float] = []

    def step(rec: dict[str, Any]) -> dict[str, Any]:
        if not first:
            first.append(time.time())
        x, label = rec["x"], rec.get("y")
        x = dict(enumerate(x)) if isinstance(x, list) else x
        pred = model.predict_one(x)
        out = {"id": rec.get("id"), "prediction": 1 if pred else -1, "label": label, "mistake": None}
        if label is not None:
            y = label == 1 or label is True
            model.learn_one(x, y)
            out["mistake"] = pred != y
            counts["mistakes"] += pred != y
            counts["labeled"] += 1
        return out

    group = f"peer-quix-{os.getpid()}-{time.time_ns()}"
    with tempfile.TemporaryDirectory(prefix="peer-quix-state-") as state_dir:  # Quix's, never read
        app = Application(broker_address=bootstrap, consumer_group=group,
                          auto_offset_reset="earliest", use_changelog_topics=False, auto_create_topics=False,
                          loglevel="WARNING", state_dir=state_dir,
                          producer_extra_config={"linger.ms": LINGER_MS, "batch.size": BATCH_BYTES},
                          consumer_extra_config={"fetch.wait.max.ms": FETCH_WAIT_MS})
        sdf = app.dataframe(app.topic(input_topic, value_deserializer="json"))
        # Quix stamps an output with its input's timestamp; the benchmark's rate is measured, as
        # for every contender, from the outputs' CreateTime at the moment they are sent
        sdf = sdf.apply(step).set_timestamp(lambda _value, _key, _ts, _headers: time.time_ns() // 1_000_000)
        sdf.to_topic(app.topic(output_topic, value_serializer="json"))
        app.run(count=records, collect=False, timeout=600)
    return {"records": records, **own_rate(records, first[0] if first else None), **counts}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = contender_args("python -m bench.peer_quix", "A Quix Streams + river application (the peer).", argv)
    result = peer(args.bootstrap, args.input, args.output, args.records)
    emit_result({**result, "contender": "peer"})
    return result


if __name__ == "__main__":
    main()
