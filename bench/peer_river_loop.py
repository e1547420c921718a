"""The peer: the loop a user would write by hand with kafka-python, ``json`` and river.

Run from the repository root::

    .venv/bin/python -m bench.peer_river_loop --bootstrap 127.0.0.1:9092 --input IN --output OUT --records N

Per record: ``json.loads``, the features as a dict (a dense list ``x`` becomes
``dict(enumerate(x))``), river's ``linear_model.Perceptron`` ``predict_one`` then ``learn_one``,
``json.dumps`` of a prediction dict (where the record came from, its key and id, the prediction,
the label, the mistake flag) and ``producer.send``. Nothing else: no validation, dead letters,
statistics or checkpoints. It reads partition 0 with ``assign()`` and the worker's client settings
(``bench.pipe``), stops after ``N`` records and a flush, and prints ``BENCH_RESULT {json}``.

river's ``Perceptron`` updates when ``y·score ≤ 0`` by ``y·x`` and ``y``, the rule of this
project's perceptron; its ``predict_one`` breaks the tie at a score of 0 towards False, so its
"mistakes" can differ from the worker's on boundary rows (``bench/README.md``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bench.pipe import consume_produce, contender_args, emit_result, kafka_settings, producer_kwargs


def peer(bootstrap: str, input_topic: str, output_topic: str, records: int) -> dict[str, Any]:
    """Learn and predict ``records`` records of ``input_topic`` the hand-written way."""
    from kafka import KafkaProducer
    from river import linear_model

    kafka = kafka_settings(bootstrap)
    model, producer = linear_model.Perceptron(), KafkaProducer(**producer_kwargs(kafka))
    counts = {"mistakes": 0, "labeled": 0}

    def handle(recs: list[Any]) -> None:
        send, predict, learn = producer.send, model.predict_one, model.learn_one
        for r in recs:
            rec = json.loads(r.value)
            x, label = rec["x"], rec.get("y")
            x = dict(enumerate(x)) if isinstance(x, list) else x
            pred = predict(x)
            out = {"topic": r.topic, "partition": r.partition, "offset": r.offset,
                   "key": r.key.decode() if r.key is not None else None, "id": rec.get("id"),
                   "prediction": 1 if pred else -1, "label": label, "mistake": None}
            if label is not None:
                y = label == 1 or label is True
                learn(x, y)
                out["mistake"] = pred != y
                counts["mistakes"] += pred != y
                counts["labeled"] += 1
            send(output_topic, value=json.dumps(out).encode(), key=r.key)

    try:
        result = consume_produce(kafka, input_topic, records, handle, flush=producer.flush, tune=False)
    finally:
        producer.close()
    return {**result, **counts}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = contender_args("python -m bench.peer_river_loop",
                          "The hand-written kafka-python + river Perceptron loop (the peer).", argv)
    result = peer(args.bootstrap, args.input, args.output, args.records)
    emit_result({**result, "contender": "peer"})
    return result


if __name__ == "__main__":
    main()
