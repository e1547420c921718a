"""``python -m tests.integration.kafka.transactional_member SETTINGS INPUT OUTPUT``: one member of a
group, in a process of its own so that a test can freeze it whole (SIGSTOP: its client's
heartbeat threads stop too, as in a stalled worker) while another member takes its partitions.

``SETTINGS`` is :class:`~stream_perceptron.settings.KafkaSettings` as JSON. The member starts a
transactional edge of ``settings.backend`` on ``INPUT``, polls until it holds partition 0 and has
read every record there up to the high-water mark, opens a transaction, sends ``A-<value>`` to
``OUTPUT`` for each record read, flushes (the records are in the log), and prints
``ready <next offset>``. On a line ``commit`` from its standard input it commits the transaction
with that offset and prints ``committed``, ``fenced <message>``, ``aborted <message>`` or
``failed <message>``; then closes the edge and exits.
"""

from __future__ import annotations

import sys
import time

from stream_perceptron.errors import KafkaEdgeError, TransactionAbortedError, TransactionFencedError
from stream_perceptron.kafka.factory import open_edge
from stream_perceptron.settings import KafkaSettings

DEADLINE_S = 60.0


def _ignore(_partitions: list[tuple[str, int]]) -> None:
    return None


def main(settings_json: str, input_topic: str, output_topic: str) -> None:
    kafka = KafkaSettings.model_validate_json(settings_json)
    edge = open_edge(kafka, input_topic, _ignore, _ignore, transactional=True)
    edge.start()
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while True:
            for batch in edge.poll(timeout_ms=200, max_records=500):
                values += batch.values
            end = edge.highwater(input_topic, 0)
            if end is not None and len(values) >= end > 0:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(values)} records of {input_topic}/0 in {DEADLINE_S} s")
        edge.begin_transaction()
        for value in values:
            edge.send(output_topic, None, b"A-" + value)
        edge.flush()
        print(f"ready {len(values)}", flush=True)
        if sys.stdin.readline().strip() != "commit":
            return
        try:
            edge.commit_transaction({(input_topic, 0): len(values)})
            outcome = "committed"
        except TransactionFencedError as exc:
            outcome = f"fenced {exc}"
        except TransactionAbortedError as exc:
            outcome = f"aborted {exc}"
        except KafkaEdgeError as exc:
            outcome = f"failed {exc}"
        print(outcome, flush=True)
    finally:
        edge.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
