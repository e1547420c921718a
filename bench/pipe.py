"""The limit: a bare consume → produce pipe, one process, values forwarded unchanged, on either
of the worker's two client libraries.

Run from the repository root::

    .venv/bin/python -m bench.pipe --bootstrap 127.0.0.1:9092 --input IN --output OUT --records N
    .venv/bin/python -m bench.pipe --client confluent-kafka --bootstrap HOST:PORT --input IN ...

It reads partition 0 of ``IN`` from its beginning with ``assign()`` (no group, so no group join),
sends every record's key and value unchanged to ``OUT``, and stops after ``N`` records and a
flush. The clients use the worker's settings, so the only difference from the worker is
everything the worker does per record:

* ``--client kafka-python`` (default): ``stream_perceptron.settings.KafkaSettings`` defaults
  (``max_poll_records``, ``poll_timeout_ms``, ``fetch_max_wait_ms``, ``fetch_max_bytes``, ``linger_ms``,
  ``batch_size``), ``acks="all"`` and ``max_block_ms`` as ``stream_perceptron.kafka.python_edge`` builds
  its producer. One ``KafkaConsumer.poll(timeout_ms, max_records)`` per batch; like the worker's
  ``send_many``, it names partition 0 of a one-partition output topic (no key hashing). It sends
  with ``KafkaProducer.send``, one call per record: the bare pipe, the limit the targets name.
* ``--client kafka-python --append``: the same, but each poll's records are appended to the
  producer's batches in one call, ``stream_perceptron.kafka.fastpath.append.append_many``, as the worker's
  ``send_many`` does.
* ``--client kafka-python --decode``: the same, but the consumer is the worker's: it decodes each
  fetched batch in one loop (``stream_perceptron.kafka.fastpath.fetch``) and reads a fetch response that
  lands mid-poll at once (``stream_perceptron.kafka.fastpath.wake``). With ``--append`` too,
  the fastest this client goes with the worker's two client paths, against which the worker's own
  work shows alone.
* ``--client kafka-python+process``: the consumer as the worker's (``--decode``), and the producer
  in a second process exactly as the worker runs it with ``SP_KAFKA__PRODUCER_PROCESS=true``: the
  process and pipe of ``stream_perceptron.kafka.producer_process.SplitKafkaEdge`` (``send_many``
  per batch, one ``flush`` at the end). The limit of that layout; the targets' limit stays the
  one-process bare pipe.
* ``--client confluent-kafka``: the librdkafka properties that
  ``stream_perceptron.kafka.confluent_edge.ConfluentEdge`` builds for its consumer and producer (taken
  from the edge itself, callbacks replaced by counters), and its way of consuming: per batch,
  ``Consumer.poll(poll_timeout)`` for a first message, then ``Consumer.consume(max_poll_records −
  1, timeout=0)`` for whatever is already fetched; ``Producer.produce`` per record (a full local
  queue is waited out with ``poll(0.05)``) and ``Producer.poll(0)`` once per batch to serve
  delivery reports.
* ``--client confluent-kafka --codec``: the same client calls, with the worker's codec in
  between: each poll read into columns as the worker's edge reads it
  (``stream_perceptron.kafka.confluent_edge.batches_of``), decoded by the worker's
  ``stream_perceptron.codec.inputs.BatchDecoder``, scored by a fixed θ (one matrix product per
  poll, never updated), and a prediction record per input encoded by the worker's
  ``stream_perceptron.codec.outputs.encode_predictions``, sent with
  positional ``produce`` as its ``send_many`` does. What any worker that reads and writes these
  record formats with this codec costs at least, so the worker's learning, statistics,
  checkpoints and bookkeeping show against it alone.

Both pipes tune the process as the worker does (``stream_perceptron.runtime``: two malloc arenas
before any client starts, the cycle collector once they have): the limit is not held back by a
default the worker changes.

The last line on stdout is ``BENCH_RESULT {json}`` with the process's own timings (wall clock,
``time.time()``): ``t_first_polled`` (first poll that returned records), ``t_last_sent``,
``t_flushed``. ``bench.bench_worker`` runs this as a subprocess and measures its rate from the
output topic's record timestamps, like every other contender.

This module also holds the small helpers the other contenders share (client keyword arguments,
the result line).
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
PRODUCER_ACKS = "all"  # stream_perceptron.kafka.python_edge.KafkaEdge._new_producer hard-codes acks="all"
CLIENTS = ("kafka-python", "kafka-python+process", "confluent-kafka")


def kafka_settings(bootstrap: str, **overrides: Any) -> KafkaSettings:
    """The worker's Kafka settings pointed at ``bootstrap``: its defaults, and ``overrides`` (an
    experiment's, named as the settings are) in their place. Every client helper below takes
    these, so an override reaches a pipe exactly as it would reach the worker's edge.

    >>> kafka_settings("h:1", fetch_max_wait_ms=10).fetch_max_wait_ms
    10
    """
    from stream_perceptron.settings import KafkaSettings

    return KafkaSettings(bootstrap_servers=bootstrap, **overrides)


def consumer_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """KafkaConsumer kwargs as the worker's (no group: the caller uses ``assign()``)."""
    from stream_perceptron.kafka.admin import consumer_config, consumer_fetch_config

    return {
        **consumer_config(kafka),
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        **consumer_fetch_config(kafka),  # as python_edge.KafkaEdge passes them
    }


def producer_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """KafkaProducer kwargs as the worker's producer."""
    from stream_perceptron.kafka.admin import client_config
    from stream_perceptron.kafka.edge import PRODUCER_MAX_BLOCK_MS

    return {
        **client_config(kafka),
        "acks": PRODUCER_ACKS,
        "linger_ms": kafka.linger_ms,
        "batch_size": kafka.batch_size,
        "max_block_ms": PRODUCER_MAX_BLOCK_MS,
    }


def poll_params(kafka: KafkaSettings) -> tuple[int, int]:
    """(poll timeout ms, max records per poll), as the worker's edge polls."""
    return kafka.poll_timeout_ms, kafka.max_poll_records


def assigned_consumer(
    kafka: KafkaSettings, topic: str, partition: int = 0, *, decode: bool = False
) -> Any:
    """A consumer assigned to ``topic``/``partition``, positioned at offset 0; with ``decode``, the
    worker's edge's consumer: one that decodes each fetched batch in one loop where it can, and
    reads a fetch response that lands mid-poll at once.

    The benchmark's topics are fresh, so offset 0 is their beginning; an explicit seek avoids a
    ListOffsets(earliest) request (tansu gets ListOffsets(latest) wrong; see the team notes).
    """
    from kafka import KafkaConsumer, TopicPartition

    from stream_perceptron.kafka.fastpath import fetch as kafka_fetch
    from stream_perceptron.kafka.fastpath import wake as kafka_wake

    consumer = KafkaConsumer(**consumer_kwargs(kafka))
    if decode:
        kafka_fetch.install(consumer)
        kafka_wake.install(consumer)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    return consumer


def consume_produce(
    kafka: KafkaSettings,
    input_topic: str,
    records: int,
    handle_batch: Callable[[list[Any], Any], None],
    *,
    timeout_s: float = 600.0,
    tune_gc: bool = False,
    decode: bool = False,
) -> dict[str, Any]:
    """Poll ``input_topic`` until ``records`` records went through ``handle_batch(recs, producer)``,
    then flush. Returns the process's own timings; shared by the kafka-python pipe and the river
    peer. ``tune_gc``: set the cycle collector up as the worker does, once the clients exist;
    ``decode``: the worker's consumer (:func:`assigned_consumer`)."""
    from kafka import KafkaProducer

    from stream_perceptron.kafka.fastpath import fetch as kafka_fetch
    from stream_perceptron.kafka.fastpath import wake as kafka_wake
    from stream_perceptron.runtime import tune_gc as worker_gc

    t_start = time.time()
    consumer = assigned_consumer(kafka, input_topic, decode=decode)
    decoding, waking = kafka_fetch.installed(consumer), kafka_wake.installed(consumer)
    producer = KafkaProducer(**producer_kwargs(kafka))
    if tune_gc:
        worker_gc()
    poll_ms, max_records = poll_params(kafka)
    t_ready = time.time()
    consumed = 0
    t_first: float | None = None
    deadline = time.monotonic() + timeout_s
    try:
        while consumed < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {consumed} of {records} records in {timeout_s} s")
            batches = consumer.poll(timeout_ms=poll_ms, max_records=max_records)
            for recs in batches.values():
                if t_first is None and recs:
                    t_first = time.time()
                handle_batch(recs, producer)
                consumed += len(recs)
        t_last_sent = time.time()
        producer.flush()
        t_flushed = time.time()
    finally:
        producer.close()
        consumer.close()
    return {
        "records": consumed,
        "decoding": decoding,
        "waking": waking,
        **timings(consumed, t_start, t_ready, t_first, t_last_sent, t_flushed),
    }


def pipe(
    kafka: KafkaSettings,
    input_topic: str,
    output_topic: str,
    records: int,
    *,
    append: bool = False,
    decode: bool = False,
) -> dict[str, Any]:
    """Forward ``records`` records of ``input_topic`` to ``output_topic``, key and value unchanged
    (kafka-python): ``send`` per record, or with ``append`` a poll at once where ``append_many``
    takes it (else ``send`` per record, as the worker's edge falls back); with ``decode``, the
    consumer decodes each fetched batch in one loop."""

    from stream_perceptron.kafka.fastpath.append import append_many
    from stream_perceptron.kafka.python_edge import KafkaEdge

    appended = 0  # records appended by append_many

    def forward(recs: list[Any], producer: Any) -> None:
        nonlocal appended
        send = producer.send
        partition = KafkaEdge._only_partition(producer, output_topic)  # as the worker's send_many
        if append and recs:
            keys, values = [r.key for r in recs], [r.value for r in recs]
            futures = append_many(producer, output_topic, partition, keys, values)
            if futures is not None:
                appended += len(futures) - futures.count(None)
                recs = [r for r, f in zip(recs, futures, strict=True) if f is None]
        for r in recs:
            send(output_topic, value=r.value, key=r.key, partition=partition)

    result = consume_produce(kafka, input_topic, records, forward, tune_gc=True, decode=decode)
    return {**result, "appended": appended}


def split_pipe(kafka: KafkaSettings, input_topic: str, output_topic: str, records: int) -> dict[str, Any]:
    """Forward ``records`` records with the producer in a second process (the worker's
    ``SplitKafkaEdge`` producer: its child process, its pipe, its ``send_many`` and ``flush``), and
    the worker's consumer (:func:`assigned_consumer`)."""
    from stream_perceptron.kafka.fastpath import fetch as kafka_fetch
    from stream_perceptron.kafka.fastpath import wake as kafka_wake
    from stream_perceptron.kafka.producer_process import SplitKafkaEdge
    from stream_perceptron.runtime import tune_gc

    t_start = time.time()
    edge = SplitKafkaEdge(kafka.model_copy(update={"producer_process": True}), input_topic, _ignore, _ignore)
    edge._producer = edge._new_producer()  # the producer only: this pipe has its own consumer
    consumer = assigned_consumer(kafka, input_topic, decode=True)
    tune_gc()
    poll_ms, max_records = poll_params(kafka)
    t_ready = time.time()
    consumed, t_first = 0, None
    deadline = time.monotonic() + 600.0
    try:
        while consumed < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {consumed} of {records} records in 600 s")
            for recs in consumer.poll(timeout_ms=poll_ms, max_records=max_records).values():
                if t_first is None and recs:
                    t_first = time.time()
                edge.send_many(output_topic, [r.key for r in recs], [r.value for r in recs])
                consumed += len(recs)
        t_last_sent = time.time()
        edge.flush()
        t_flushed = time.time()
    finally:
        producer, edge._producer = edge._producer, None
        edge._close_producer(producer)
        consumer.close()
    return {
        "records": consumed,
        "decoding": kafka_fetch.installed(consumer),
        "waking": kafka_wake.installed(consumer),
        **timings(consumed, t_start, t_ready, t_first, t_last_sent, t_flushed),
    }


def _ignore(*_args: Any) -> None:
    return None


def confluent_configs(kafka: KafkaSettings, group: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(consumer, producer) librdkafka properties exactly as ``ConfluentEdge`` builds them from
    ``kafka``, minus its Python callbacks (logger, error and delivery callbacks, which the caller
    sets). ``group`` is only the consumer's ``group.id`` (librdkafka wants one even with
    ``assign()``; no group is joined).
    """
    from stream_perceptron.kafka.confluent_edge import ConfluentEdge

    named = kafka.model_copy(update={"group_id": group, "client_id": group})
    edge = ConfluentEdge(named, "(unused)", _ignore, _ignore)  # builds nothing until start()
    consumer = edge._consumer_config()
    producer = edge._producer_config()
    for cfg in (consumer, producer):
        for name in ("logger", "error_cb", "on_delivery"):
            cfg.pop(name, None)
    return consumer, producer


def confluent_pipe(
    kafka: KafkaSettings,
    input_topic: str,
    output_topic: str,
    records: int,
    *,
    codec: bool = False,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Forward ``records`` records of ``input_topic`` to ``output_topic`` with confluent-kafka,
    consuming and producing the way ``ConfluentEdge`` does (see the module docstring): each value
    unchanged, or with ``codec`` a prediction record for each (:class:`CodecStage`)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from stream_perceptron.kafka.confluent_edge import batches_of, drop_and_close
    from stream_perceptron.runtime import tune_gc

    stage = CodecStage() if codec else None
    errors: list[str] = []
    failed: list[str] = []

    def on_error(err: Any) -> None:
        errors.append(str(err))

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    t_start = time.time()
    c_cfg, p_cfg = confluent_configs(kafka, f"bench-pipe-{os.getpid()}-{int(t_start)}")
    consumer = Consumer({**c_cfg, "error_cb": on_error})
    consumer.assign([TopicPartition(input_topic, 0, 0)])  # fresh topic: offset 0 is its beginning
    producer = Producer({**p_cfg, "error_cb": on_error, "on_delivery": on_delivery})
    tune_gc()
    poll_ms, max_records = poll_params(kafka)
    poll_s = poll_ms / 1000
    t_ready = time.time()
    consumed = skipped = 0
    t_first: float | None = None
    deadline = time.monotonic() + timeout_s
    consume_first, consume_batch = consumer.poll, consumer.consume
    produce, serve = producer.produce, producer.poll
    try:
        while consumed < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {consumed} of {records} records in {timeout_s} s")
            first = consume_first(poll_s)
            if first is None:
                continue
            msgs = [first, *consume_batch(max_records - 1, 0)]
            if t_first is None:
                t_first = time.time()
            if stage is not None:
                batches, bad = batches_of(msgs)
                skipped += len(bad)
                for batch in batches:
                    keys, values = stage.encode(batch)
                    for key, value in zip(keys, values, strict=True):
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
        t_last_sent = time.time()
        remaining = producer.flush(60)
        t_flushed = time.time()
    finally:
        consumer.close()
        drop_and_close(producer)
    if remaining or failed:
        raise RuntimeError(f"{remaining} records unacknowledged, {len(failed)} failed: {failed[:3]}")
    return {
        "records": consumed,
        "client": "confluent-kafka",
        "codec": codec,
        "rejected": 0 if stage is None else stage.rejected,
        "skipped_error_messages": skipped,
        "client_errors": errors[:10],
        "fetch_wait_max_ms": c_cfg.get("fetch.wait.max.ms"),
        **timings(consumed, t_start, t_ready, t_first, t_last_sent, t_flushed),
    }


class CodecStage:
    """The worker's codec around a fixed model: decode a batch, score it, encode its predictions.

    Decoding is the worker's (``BatchDecoder`` with the default limits; the records must be dense,
    all of the first accepted record's width, as the benchmark's are). θ is fixed at
    ``linspace(-1, 1, d)``, θ0 = 0, and never updated. Every field of a prediction record is
    filled as the worker fills it: a score, the label, the mistake flag, the margin
    ``y·score/‖θ‖``, and ``updates``, here the running count of the fixed model's mistakes (the
    worker counts its updates). It skips what only learning needs (``vectorize_many``, the
    update, the statistics), so it is close to the least such a worker does, not a strict floor.
    Rejected records get no prediction; they are counted in ``rejected`` (the benchmark's records
    are all valid, and the benchmark finds a run with fewer outputs than inputs incomplete).

    >>> from stream_perceptron.kafka.edge import Batch
    >>> stage = CodecStage()
    >>> keys, values = stage.encode(Batch("in", 0, [5, 6], [b"a", None],
    ...     [b'{"x":[1,3],"y":1}', b'{"x":[2,0]}'], [0, 0]))
    >>> keys, values[0]
    ([b'a', None], b'{"topic":"in","partition":0,"offset":5,"key":"a","id":null,"prediction":1,\
"score":2.0,"label":1,"mistake":false,"margin":1.414213562373095,"updates":0}')
    >>> [json.loads(values[1])[k] for k in ("prediction", "score", "label", "mistake", "margin")]
    [-1, -2.0, None, None, None]
    >>> stage.encode(Batch("in", 0, [7, 8], [None, None], [b'{"x":[]}', b'{"x":[1,-1],"y":1}'],
    ...     [0, 0]))[1][0][-55:], stage.rejected
    (b'"mistake":true,"margin":-1.414213562373095,"updates":1}', 1)
    >>> stage.encode(Batch("in", 0, [9], [None], [b"not json"], [0])), stage.rejected
    (([], []), 2)
    """

    def __init__(self) -> None:
        from stream_perceptron.codec.inputs import BatchDecoder
        from stream_perceptron.codec.limits import Limits

        self._decoder = BatchDecoder(Limits())
        self._theta: Any = None
        self._mistakes = 0
        self.rejected = 0

    def encode(self, batch: Any) -> tuple[list[bytes | None], list[bytes]]:
        """(keys, values) of the prediction records of ``batch`` (an ``edge.Batch``)."""
        import numpy as np

        from stream_perceptron.codec.outputs import encode_predictions

        decoded = self._decoder.decode_many(batch.values, batch.keys)
        self.rejected += len(decoded.rejected)
        rows = decoded.rows
        if not rows:
            return [], []
        X = np.asarray(decoded.xs, dtype=np.float64)  # dense records of one width: one matrix
        if self._theta is None:
            self._theta = np.linspace(-1.0, 1.0, X.shape[1])
        theta = self._theta
        scores = X @ theta
        y = np.array(decoded.ys, dtype=np.int8)
        signed = y * scores
        wrong = (signed <= 0) & (y != 0)
        updates = self._mistakes + np.cumsum(wrong)
        self._mistakes = int(updates[-1])
        keys = [batch.keys[r] for r in rows]
        values = encode_predictions(
            topic=batch.topic,
            partition=batch.partition,
            offsets=[batch.offsets[r] for r in rows],
            keys=keys,
            ids=decoded.ids,
            predictions=np.where(scores > 0, 1, -1).tolist(),
            scores=scores.tolist(),
            labels=decoded.ys,
            mistakes=wrong.tolist(),
            margins=(signed / float(np.sqrt(theta @ theta))).tolist(),
            updates=updates.tolist(),
        )
        return keys, values


def timings(
    consumed: int, t_start: float, t_ready: float, t_first: float | None, t_last_sent: float, t_flushed: float
) -> dict[str, Any]:
    """A contender's own clock readings (``time.time()``) and its rate from the first poll that
    returned records to the end of the final flush."""
    return {
        "t_start": t_start,
        "t_ready": t_ready,
        "t_first_polled": t_first,
        "t_last_sent": t_last_sent,
        "t_flushed": t_flushed,
        "own_rate_first_poll_to_flush": (
            (consumed / (t_flushed - t_first)) if t_first is not None and t_flushed > t_first else None
        ),
    }


def emit_result(result: dict[str, Any]) -> None:
    """Print the machine-readable last line."""
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()


def parse_result(stdout: str) -> dict[str, Any] | None:
    """The ``BENCH_RESULT`` payload in a contender's stdout (the last one), or None."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            parsed: dict[str, Any] = json.loads(line[len(RESULT_PREFIX) :])
            return parsed
    return None


def contender_args(
    prog: str, description: str, argv: Sequence[str] | None, *, with_client: bool = False
) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--bootstrap", required=True, help="host:port of the broker")
    p.add_argument("--input", required=True, help="input topic (partition 0 is read)")
    p.add_argument("--output", required=True, help="output topic")
    p.add_argument("--records", type=int, required=True, help="records to forward, then stop")
    if with_client:
        p.add_argument("--client", choices=CLIENTS, default=CLIENTS[0], help="the client library")
        p.add_argument(
            "--append",
            action="store_true",
            help="kafka-python: append each poll's records in one call, as the worker does",
        )
        p.add_argument(
            "--decode",
            action="store_true",
            help="kafka-python: the worker's consumer (batch decoding, a mid-poll response read at once)",
        )
        p.add_argument(
            "--codec",
            action="store_true",
            help="confluent-kafka: decode each poll and encode a prediction per record with the "
            "worker's codec (a fixed model)",
        )
        p.add_argument(
            "--fetch-wait-ms",
            type=int,
            default=None,
            help="override the consumer's fetch wait (SP_KAFKA__FETCH_MAX_WAIT_MS, for every client); "
            "default: the worker's",
        )
        p.add_argument(
            "--fetch-max-bytes",
            type=int,
            default=None,
            help="override the consumer's fetch bound (SP_KAFKA__FETCH_MAX_BYTES, for every client); "
            "default: the worker's",
        )
    args = p.parse_args(argv)
    if args.records < 1:
        p.error("--records must be positive")
    for flag in ("append", "decode"):
        if getattr(args, flag, False) and args.client != "kafka-python":
            p.error(f"--{flag} is for --client kafka-python")
    if getattr(args, "codec", False) and args.client != "confluent-kafka":
        p.error("--codec is for --client confluent-kafka")
    return args


def settings_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The Kafka settings a pipe's options override, named as the settings are.

    >>> settings_overrides(argparse.Namespace(fetch_wait_ms=10, fetch_max_bytes=None))
    {'fetch_max_wait_ms': 10}
    """
    given = {"fetch_max_wait_ms": args.fetch_wait_ms, "fetch_max_bytes": args.fetch_max_bytes}
    return {name: value for name, value in given.items() if value is not None}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = contender_args(
        "python -m bench.pipe", "A bare consume -> produce pipe (the limit).", argv, with_client=True
    )
    from stream_perceptron.runtime import limit_malloc_arenas

    limit_malloc_arenas()  # as the worker's `run` command does, before any client thread
    kafka = kafka_settings(args.bootstrap, **settings_overrides(args))
    if args.client == "confluent-kafka":
        result = confluent_pipe(kafka, args.input, args.output, args.records, codec=args.codec)
    elif args.client == "kafka-python+process":
        result = split_pipe(kafka, args.input, args.output, args.records)
        result["client"] = args.client
    else:
        result = pipe(
            kafka, args.input, args.output, args.records, append=args.append, decode=args.decode
        )
        result["client"] = "kafka-python"
        result["append"] = args.append
        result["decode"] = args.decode
    result["contender"] = "pipe"
    emit_result(result)
    return result


if __name__ == "__main__":
    main()
