"""The limit: a bare consume → produce pipe, one process, on any of the worker's client backends;
and the client helpers the other contenders share.

    .venv/bin/python -m bench.pipe --bootstrap 127.0.0.1:9092 --input IN --output OUT --records N

The pipes (``--client``, ``--decode``, ``--append``, ``--codec``): docs/performance.md, "Method",
items 1–3. Each reads partition 0 of ``IN`` from its beginning with ``assign()`` and tunes the
process as the worker's ``run`` does; the last line on stdout is ``BENCH_RESULT {json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stream_perceptron.settings import KafkaSettings

RESULT_PREFIX = "BENCH_RESULT "
CLIENTS = ("kafka-python", "kafka-python+process", "confluent-kafka")


def kafka_settings(bootstrap: str, **overrides: Any) -> KafkaSettings:
    """The worker's Kafka settings pointed at ``bootstrap``, with ``overrides`` (named as the
    settings are) in their place, so an override reaches a pipe as it would the worker's edge."""
    from stream_perceptron.settings import KafkaSettings

    return KafkaSettings(bootstrap_servers=bootstrap, **overrides)


def consumer_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """KafkaConsumer kwargs as the worker's edge passes them (no group: the caller assigns)."""
    from stream_perceptron.kafka.admin import consumer_config, consumer_fetch_config

    return {**consumer_config(kafka), "group_id": None, "enable_auto_commit": False,
            "auto_offset_reset": "earliest", **consumer_fetch_config(kafka)}


def producer_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """KafkaProducer kwargs as the worker's producer."""
    from stream_perceptron.kafka.admin import client_config
    from stream_perceptron.kafka.edge import PRODUCER_MAX_BLOCK_MS

    return {**client_config(kafka), "acks": "all", "linger_ms": kafka.linger_ms,
            "batch_size": kafka.batch_size, "max_block_ms": PRODUCER_MAX_BLOCK_MS}


def assigned_consumer(kafka: KafkaSettings, topic: str, *, decode: bool = False) -> Any:
    """A consumer assigned to partition 0 of ``topic`` at offset 0 (the benchmark's topics are
    fresh; a seek avoids ListOffsets, which tansu answers wrongly); with ``decode``, the worker's
    edge's consumer (batch decoding, a mid-poll response read at once)."""
    from kafka import KafkaConsumer, TopicPartition

    from stream_perceptron.kafka.fastpath import fetch, wake

    consumer = KafkaConsumer(**consumer_kwargs(kafka))
    if decode:
        fetch.install(consumer)
        wake.install(consumer)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    return consumer


def consume_produce(kafka: KafkaSettings, input_topic: str, records: int,
                    handle_batch: Callable[[list[Any]], None], *, flush: Callable[[], None],
                    decode: bool = False, tune: bool = True, timeout_s: float = 600.0) -> dict[str, Any]:
    """Poll ``input_topic`` until ``records`` records went through ``handle_batch``, then
    ``flush``; the process's own rate. ``tune``: the cycle collector set up as the worker sets
    it, once the clients exist. Shared by the kafka-python pipes and the river peer."""
    from stream_perceptron.kafka.fastpath import fetch, wake
    from stream_perceptron.runtime import tune_gc

    consumer = assigned_consumer(kafka, input_topic, decode=decode)
    if tune:
        tune_gc()
    consumed, t_first, deadline = 0, None, time.monotonic() + timeout_s
    try:
        while consumed < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {consumed} of {records} records in {timeout_s} s")
            batches = consumer.poll(timeout_ms=kafka.poll_timeout_ms, max_records=kafka.max_poll_records)
            for recs in batches.values():
                t_first = t_first or time.time()
                handle_batch(recs)
                consumed += len(recs)
        flush()
        rate = own_rate(consumed, t_first)
    finally:
        consumer.close()
    decoding, waking = fetch.installed(consumer), wake.installed(consumer)
    return {"records": consumed, "decoding": decoding, "waking": waking, **rate}


def pipe(kafka: KafkaSettings, input_topic: str, output_topic: str, records: int, *, append: bool = False,
         decode: bool = False) -> dict[str, Any]:
    """Forward ``records`` records (kafka-python): ``send`` per record, or with ``append`` a poll at
    once where ``append_many`` takes it (else ``send``, as the worker's edge falls back)."""
    from kafka import KafkaProducer

    from stream_perceptron.kafka.fastpath.append import append_many
    from stream_perceptron.kafka.python_edge import KafkaEdge

    producer = KafkaProducer(**producer_kwargs(kafka))
    send, appended = producer.send, 0

    def forward(recs: list[Any]) -> None:
        nonlocal appended
        partition = KafkaEdge._only_partition(producer, output_topic)  # as the worker's send_many
        if append and recs:
            keys, values = [r.key for r in recs], [r.value for r in recs]
            futures = append_many(producer, output_topic, partition, keys, values)
            if futures is not None:
                appended += len(futures) - futures.count(None)
                recs = [r for r, f in zip(recs, futures, strict=True) if f is None]
        for r in recs:
            send(output_topic, value=r.value, key=r.key, partition=partition)

    try:
        result = consume_produce(kafka, input_topic, records, forward, flush=producer.flush, decode=decode)
    finally:
        producer.close()
    return {**result, "appended": appended}


def split_pipe(kafka: KafkaSettings, input_topic: str, output_topic: str, records: int) -> dict[str, Any]:
    """Forward ``records`` records with the worker's consumer and, in a second process, its producer
    (``SplitKafkaEdge``: its child process, its pipe, its ``send_many`` and ``flush``)."""
    from stream_perceptron.kafka.producer_process import SplitKafkaEdge

    edge = SplitKafkaEdge(kafka.model_copy(update={"producer_process": True}), input_topic, _ignore, _ignore)
    edge._producer = edge._new_producer()  # the producer only: this pipe has its own consumer
    try:
        return consume_produce(kafka, input_topic, records,
                               lambda recs: edge.send_many(output_topic, [r.key for r in recs],
                                                           [r.value for r in recs]),
                               flush=edge.flush, decode=True)
    finally:
        producer, edge._producer = edge._producer, None
        edge._close_producer(producer)


def _ignore(*_args: Any) -> None:
    return None


def confluent_configs(kafka: KafkaSettings, group: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(consumer, producer) librdkafka properties as ``ConfluentEdge`` builds them from ``kafka``,
    minus its Python callbacks, which the caller sets; ``group`` is the consumer's ``group.id``
    (librdkafka wants one even with ``assign()``)."""
    from stream_perceptron.kafka.confluent_edge import ConfluentEdge

    named = kafka.model_copy(update={"group_id": group, "client_id": group})
    edge = ConfluentEdge(named, "(unused)", _ignore, _ignore)  # builds nothing until start()
    configs = edge._consumer_config(), edge._producer_config()
    for cfg in configs:
        for name in ("logger", "error_cb", "on_delivery"):
            cfg.pop(name, None)
    return configs


def confluent_pipe(kafka: KafkaSettings, input_topic: str, output_topic: str, records: int, *,
                   codec: bool = False, timeout_s: float = 600.0) -> dict[str, Any]:
    """Forward ``records`` records with confluent-kafka as ``ConfluentEdge`` consumes and produces:
    each value unchanged, or with ``codec`` a prediction record for each (:class:`CodecStage`)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from stream_perceptron.kafka.confluent_edge import batches_of, drop_and_close
    from stream_perceptron.runtime import tune_gc

    stage, errors, failed = CodecStage() if codec else None, [], []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    c_cfg, p_cfg = confluent_configs(kafka, f"bench-pipe-{os.getpid()}-{int(time.time())}")
    consumer = Consumer({**c_cfg, "error_cb": errors.append})
    consumer.assign([TopicPartition(input_topic, 0, 0)])  # a fresh topic: offset 0 is its beginning
    producer = Producer({**p_cfg, "error_cb": errors.append, "on_delivery": on_delivery})
    tune_gc()
    consume_first, consume_batch = consumer.poll, consumer.consume
    produce, serve = producer.produce, producer.poll
    consumed = skipped = 0
    t_first, deadline = None, time.monotonic() + timeout_s
    try:
        while consumed < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {consumed} of {records} records in {timeout_s} s")
            first = consume_first(kafka.poll_timeout_ms / 1000)
            if first is None:
                continue
            msgs = [first, *consume_batch(kafka.max_poll_records - 1, 0)]
            t_first = t_first or time.time()
            if stage is not None:
                batches, bad = batches_of(msgs)
                skipped += len(bad)
                for batch in batches:
                    for key, value in zip(*stage.encode(batch), strict=True):
                        while True:
                            try:
                                produce(output_topic, value, key)
                                break
                            except BufferError:
                                serve(0.05)
                    consumed += len(batch)
                serve(0)
                continue
            for m in msgs:  # the bare pipe: each value as it came, one call per record
                if m.error() is not None:
                    skipped += 1
                    continue
                while True:
                    try:
                        produce(output_topic, m.value(), m.key())  # positional, as the edge
                        break
                    except BufferError:
                        serve(0.05)
                consumed += 1
            serve(0)
        remaining = producer.flush(60)
        rate = own_rate(consumed, t_first)
    finally:
        consumer.close()
        drop_and_close(producer)
    if remaining or failed:
        raise RuntimeError(f"{remaining} records unacknowledged, {len(failed)} failed: {failed[:3]}")
    return {"records": consumed, "client": "confluent-kafka", "codec": codec,
            "rejected": 0 if stage is None else stage.rejected, "skipped_error_messages": skipped,
            "client_errors": [str(e) for e in errors[:10]],
            "fetch_wait_max_ms": c_cfg.get("fetch.wait.max.ms"),
            **rate}


class CodecStage:
    """The worker's codec around a fixed model: decode a batch, score it, encode its predictions.

    Decoding is the worker's ``BatchDecoder`` (default limits; dense records of the first accepted
    record's width, as the benchmark's are). θ is fixed at ``linspace(-1, 1, d)``, θ0 = 0. Every
    field of a prediction is filled as the worker fills it (``updates``: the fixed model's running
    mistake count). It skips what only learning needs, so it is close to the least such a worker
    does, not a strict floor. Rejected records get no prediction and are counted in ``rejected``."""

    def __init__(self) -> None:
        from stream_perceptron.codec.inputs import BatchDecoder
        from stream_perceptron.codec.limits import Limits

        self._decoder = BatchDecoder(Limits())
        self._theta: Any = None
        self._mistakes = self.rejected = 0

    def encode(self, batch: Any) -> tuple[list[bytes | None], list[bytes]]:
        """(keys, values) of the prediction records of ``batch`` (an ``edge.Batch``)."""
        import numpy as np

        from stream_perceptron.codec.outputs import encode_predictions

        decoded = self._decoder.decode_many(batch.values, batch.keys)
        self.rejected += len(decoded.rejected)
        if not decoded.rows:
            return [], []
        X = np.asarray(decoded.xs, dtype=np.float64)  # dense records of one width: one matrix
        if self._theta is None:
            self._theta = np.linspace(-1.0, 1.0, X.shape[1])
        scores, y = X @ self._theta, np.array(decoded.ys, dtype=np.int8)
        wrong = (y * scores <= 0) & (y != 0)
        updates = self._mistakes + np.cumsum(wrong)
        self._mistakes = int(updates[-1])
        keys = [batch.keys[r] for r in decoded.rows]
        values = encode_predictions(
            topic=batch.topic, partition=batch.partition, offsets=[batch.offsets[r] for r in decoded.rows],
            keys=keys, ids=decoded.ids, predictions=np.where(scores > 0, 1, -1).tolist(),
            scores=scores.tolist(),
            labels=decoded.ys, mistakes=wrong.tolist(), updates=updates.tolist(),
            margins=(y * scores / float(np.sqrt(self._theta @ self._theta))).tolist())
        return keys, values


def own_rate(consumed: int, t_first: float | None) -> dict[str, Any]:
    """The contender's rate by its own clock, from the first poll that returned records to now, the
    end of its final flush (the output's CreateTime window ends at the last send)."""
    now = time.time()
    return {"own_rate_first_poll_to_flush": consumed / (now - t_first) if t_first and now > t_first else None}


def emit_result(result: dict[str, Any]) -> None:
    """Print the machine-readable last line."""
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()


def parse_result(stdout: str) -> dict[str, Any] | None:
    """The ``BENCH_RESULT`` payload in a contender's stdout (the last one), or None."""
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(RESULT_PREFIX)), None)
    return None if line is None else dict(json.loads(line[len(RESULT_PREFIX) :]))


def contender_args(prog: str, description: str, argv: Sequence[str] | None, *, with_client: bool = False
                   ) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--bootstrap", required=True, help="host:port of the broker")
    p.add_argument("--input", required=True, help="input topic (partition 0 is read)")
    p.add_argument("--output", required=True, help="output topic")
    p.add_argument("--records", type=int, required=True, help="records to forward, then stop")
    if with_client:
        p.add_argument("--client", choices=CLIENTS, default=CLIENTS[0], help="the client library")
        p.add_argument("--append", action="store_true", help="kafka-python: append each poll in one call")
        p.add_argument("--decode", action="store_true", help="kafka-python: the worker's consumer")
        p.add_argument("--codec", action="store_true", help="confluent-kafka: the worker's codec")
    args = p.parse_args(argv)
    if args.records < 1:
        p.error("--records must be positive")
    for flag in ("append", "decode"):
        if getattr(args, flag, False) and args.client != "kafka-python":
            p.error(f"--{flag} is for --client kafka-python")
    if getattr(args, "codec", False) and args.client != "confluent-kafka":
        p.error("--codec is for --client confluent-kafka")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = contender_args("python -m bench.pipe", "A bare consume -> produce pipe (the limit).", argv,
                          with_client=True)
    from stream_perceptron.runtime import limit_malloc_arenas

    limit_malloc_arenas()  # as the worker's `run` command does, before any client thread
    kafka = kafka_settings(args.bootstrap)
    if args.client == "confluent-kafka":
        result = confluent_pipe(kafka, args.input, args.output, args.records, codec=args.codec)
    elif args.client == "kafka-python+process":
        result = split_pipe(kafka, args.input, args.output, args.records)
    else:
        result = pipe(kafka, args.input, args.output, args.records, append=args.append, decode=args.decode)
        result.update(append=args.append, decode=args.decode)
    emit_result({"client": args.client, **result, "contender": "pipe"})
    return result


if __name__ == "__main__":
    main()
