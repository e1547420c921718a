"""Late labels across ``kill -9``: the events kept for late labels are part of the partition's
stored state, so a worker killed after its last checkpoint and restarted replays the records
since, keeps, joins and expires the same events, and ends exactly where an uninterrupted run
ends (the reference of :mod:`tests.integration.worker.late_labels`), with every re-emitted
outcome, prediction and dead letter identical to the first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_perceptron.commands.read import read_topic
from tests.integration.conftest import BACKENDS
from tests.integration.helpers import topics_for
from tests.integration.worker.late_labels import (
    check_outputs,
    check_state,
    expected,
    late_stream,
    send_stream,
)

from .support import (
    checkpoint_offset,
    committed,
    fault_settings,
    kill9,
    reap,
    run_until_caught_up,
    start_worker,
    stored,
    wait_until,
)

pytestmark = pytest.mark.faults

PENDING_MAX = 60
TTL_MS = 30_000


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", BACKENDS)
def test_kill_9_after_the_last_checkpoint_replays_late_labels_exactly(
    fast_kafka, new_topic, tmp_path: Path, backend: str
):
    """The first half of the stream is sent and processed; the worker is killed with records
    processed past its last checkpoint (every 300 records, polls of 50); the second half is sent
    and a new worker runs to the end."""
    if backend == "confluent-kafka":
        pytest.importorskip("confluent_kafka")
    kafka = fast_kafka(backend=backend, max_poll_records=50)
    topics = {**topics_for(new_topic), "outcomes": new_topic()}
    records = late_stream(150, 400, ttl_ms=TTL_MS, seed=5)
    want = expected(records, topics["input"], pending_max=PENDING_MAX, ttl_ms=TTL_MS)
    # an example (it gets a prediction), not at a poll's end: the last checkpoint falls before it
    half = max(o for o in want.predictions if o < len(records) // 2 and (o + 1) % 50)
    send_stream(kafka, topics["input"], records[: half + 1])
    settings = fault_settings(kafka, topics, tmp_path / "ckpt",
                              labels={"pending_max": PENDING_MAX, "pending_ttl_s": TTL_MS / 1000},
                              checkpoint={"every_examples": 300, "every_seconds": 60})
    log = tmp_path / "run-0.log"
    proc = start_worker(settings, log=log)
    try:
        def processed() -> bool:
            return any(rec["offset"] == half for *_, rec in read_topic(
                kafka, topics["predictions"], timeout_s=5, idle_s=0.3))
        wait_until(processed, 60, f"the prediction of offset {half}", every_s=0.2, alive=proc, log=log)
        kill9(proc)
    finally:
        reap(proc)
    at_kill = checkpoint_offset(tmp_path / "ckpt", topics["input"])
    assert 0 < at_kill <= half  # stored before the kill, with records processed since: replayed
    kept = stored(tmp_path / "ckpt", topics["input"])
    assert kept is not None and kept.stats["labels"]["entries"]  # events were waiting at the kill

    send_stream(kafka, topics["input"], records[half + 1:])
    run_until_caught_up(settings, tmp_path / "run-1.log")

    repeated = check_outputs(want, read_topic(kafka, topics["predictions"]),
                             read_topic(kafka, topics["outcomes"]), read_topic(kafka, topics["dead_letter"]))
    assert repeated > 0  # the records after the checkpoint went out again
    final = stored(tmp_path / "ckpt", topics["input"])
    assert final is not None and final.offsets == {topics["input"]: {0: len(records)}}
    check_state(want, final.stats, final.model, PENDING_MAX)
    assert committed(kafka, topics["input"]) == {0: len(records)}
