"""A process that saves a partition state to the Kafka store and dies (``os._exit``, as ``kill -9``
would leave it) once ``die_after`` of its chunks are acknowledged by the broker.

    python -m tests.integration.state.save_and_die KAFKA_SETTINGS_JSON STATE_TOPIC CHUNK_BYTES \\
        TOPIC PARTITION NEXT_OFFSET NAMES SEED DIE_AFTER

Exits 3 where it died; 0 would mean the save finished first (too few chunks to die in).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence

from stream_perceptron.kafka.state_log import KafkaStateLog, Logged
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.state.kafka_store import KafkaStore, StateRecord
from tests.partition_states import partition_state

DIED = 3


class DyingLog:
    """The real state log, each record appended (and acknowledged) alone, dying after ``chunks``
    acknowledged chunks."""

    def __init__(self, log: KafkaStateLog, chunks: int) -> None:
        self.log, self.name, self.left = log, log.name, chunks

    def partitions(self) -> int:
        return self.log.partitions()

    def append(self, records: Sequence[StateRecord]) -> None:
        for record in records:
            self.log.append([record])
            if ":chunk:" in record.key:
                self.left -= 1
                if self.left == 0:
                    os._exit(DIED)

    def scan(self, partition: int, start: int = 0, stop: int | None = None) -> Iterator[Logged]:
        return self.log.scan(partition, start, stop)

    def close(self) -> None:
        self.log.close()


def main(argv: list[str]) -> int:
    settings, state_topic, chunk_bytes, topic, partition, next_offset, names, seed, die_after = argv
    log = KafkaStateLog(KafkaSettings.model_validate_json(settings), state_topic, partitions=None,
                        max_record_bytes=int(chunk_bytes))
    store = KafkaStore(DyingLog(log, int(die_after)), chunk_bytes=int(chunk_bytes))
    epoch = store.claim(topic, int(partition))
    store.load(topic, int(partition))
    state = partition_state(topic, int(partition), int(next_offset), names=int(names), seed=int(seed))
    store.save(state, epoch)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
