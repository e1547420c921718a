"""The peer: the loop a user would write by hand with kafka-python and river.

Run from the repository root::

    .venv/bin/python -m bench.peer_river_loop --bootstrap 127.0.0.1:9092 --input IN --output OUT --records N

Per record: ``json.loads`` (the standard library), the features as a dict (a dense list ``x``
becomes ``dict(enumerate(x))``; an object is used as it is), river's
``linear_model.Perceptron`` ``predict_one`` then ``learn_one``, ``json.dumps`` of a prediction
dict (where the record came from, its key and id, the prediction, the label, the mistake flag) and
``producer.send``. Nothing else: no validation, no dead letters, no statistics, no checkpoints,
no score or margin in the output. It reads partition 0 with ``assign()`` (no group join) and uses
the worker's client settings (see ``bench.pipe``), stops after ``N`` records and a flush, and
prints ``BENCH_RESULT {json}`` (its own timings and the number of mistakes) as its last line.

river's ``Perceptron`` is a logistic regression with ``Hinge(threshold=0)`` loss and learning
rate 1: it updates when ``y·score ≤ 0`` by ``y·x`` and ``y`` (the rule of this project's
perceptron; see ``bench/README.md``). ``predict_one`` breaks the tie at a score of 0 towards
False, so its "mistakes" can differ from the worker's on boundary rows (the first row, from zero
weights, is one).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bench.pipe import consume_produce, contender_args, emit_result, kafka_settings


def peer(bootstrap: str, input_topic: str, output_topic: str, records: int) -> dict[str, Any]:
    """Learn and predict ``records`` records of ``input_topic`` the hand-written way."""
    from river import linear_model

    model = linear_model.Perceptron()
    counts = {"mistakes": 0, "labeled": 0}

    def handle(recs: list[Any], producer: Any) -> None:
        send = producer.send
        predict, learn = model.predict_one, model.learn_one
        mistakes = labeled = 0
        for r in recs:
            rec = json.loads(r.value)
            x = rec["x"]
            if isinstance(x, list):
                x = dict(enumerate(x))
            label = rec.get("y")
            pred = predict(x)
            out = {
                "topic": r.topic,
                "partition": r.partition,
                "offset": r.offset,
                "key": r.key.decode() if r.key is not None else None,
                "id": rec.get("id"),
                "prediction": 1 if pred else -1,
                "label": label,
                "mistake": None,
            }
            if label is not None:
                y = label == 1 or label is True
                learn(x, y)
                wrong = pred != y
                out["mistake"] = wrong
                mistakes += wrong
                labeled += 1
            send(output_topic, value=json.dumps(out).encode(), key=r.key)
        counts["mistakes"] += mistakes
        counts["labeled"] += labeled

    result = consume_produce(kafka_settings(bootstrap), input_topic, records, handle)
    result.update(counts)
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = contender_args(
        "python -m bench.peer_river_loop",
        "The hand-written kafka-python + river Perceptron loop (the peer).",
        argv,
    )
    result = peer(args.bootstrap, args.input, args.output, args.records)
    result["contender"] = "peer"
    emit_result(result)
    return result


if __name__ == "__main__":
    main()
