"""Labels that arrive late, end to end on a real broker, on both backends.

Events (``id`` and ``x``, no ``y``) are predicted and kept; label records (``id`` and ``y``, no
``x``) come later in shuffled order, among ordinary records, and are joined. The final model must
equal the seeds' perceptron applied in stream order to the ordinary labeled records and, at each
label record, to the features kept for its event (:mod:`.late_labels` computes it without the
worker); every prediction, outcome record and dead letter must be the expected one; and a flood
of ids never labeled keeps the pending store, the statistics and the stored state bounded.
"""

from __future__ import annotations

import pytest

from stream_perceptron.commands.read import read_topic
from tests.integration.helpers import run_until_caught_up, topics_for, worker_settings

from .late_labels import check_outputs, check_state, expected, late_stream, send_stream

PENDING_MAX = 100
TTL_MS = 60_000
FLOOD = 1_500


@pytest.mark.timeout(120)
def test_late_labels_join_learn_and_stay_bounded(fast_kafka, new_topic, tmp_path, backend):
    kafka = fast_kafka(backend=backend, max_poll_records=300)
    topics = {**topics_for(new_topic), "outcomes": new_topic()}
    records = late_stream(120, FLOOD, ttl_ms=TTL_MS, seed=3)
    send_stream(kafka, topics["input"], records)
    settings = worker_settings(kafka, topics, tmp_path / "ckpt",
                               labels={"pending_max": PENDING_MAX, "pending_ttl_s": TTL_MS / 1000},
                               stats={"every_examples": 100})
    worker = run_until_caught_up(settings, len(records))

    want = expected(records, topics["input"], pending_max=PENDING_MAX, ttl_ms=TTL_MS)
    assert want.joins > 50 and want.mistakes > 0 and want.max_pending == PENDING_MAX  # the stream is a test
    assert {"unknown id", "expired id"} <= set(want.dead.values())
    assert any(r.startswith("id ") for r in want.dead.values())  # a second label for one id
    check_outputs(want, read_topic(kafka, topics["predictions"]), read_topic(kafka, topics["outcomes"]),
                  read_topic(kafka, topics["dead_letter"]))
    outcomes = read_topic(kafka, topics["outcomes"])
    assert all(key == str(rec["id"]).encode() for _, _, key, rec in outcomes)  # the label record's key
    assert {rec["correct"] for *_, rec in outcomes} == {True, False}

    st = next(iter(worker.held.values()))
    ckpt = st.state()
    check_state(want, ckpt.stats, ckpt.model, PENDING_MAX)
    stored = worker.store.load(topics["input"], 0)
    assert stored is not None and stored.offsets == {topics["input"]: {0: len(records)}}
    check_state(want, stored.stats, stored.model, PENDING_MAX)

    stats = [rec for *_, rec in read_topic(kafka, topics["stats"]) if "event" not in rec]  # no drift events
    assert max(s["pending_labels"] for s in stats) <= PENDING_MAX
    last = stats[-1]
    assert (last["pending_labels"], last["label_joins"], last["label_expiries"]) == (
        len(want.pending), want.joins, want.expiries)
    assert last["label_delay_s"] == sum(want.delays) / len(want.delays)
    # the flood's 1,500 events cost the stored state no more than the 100 it keeps
    body = stored.body()
    entry_bytes = max(len(str(row)) for row in body["stats"]["labels"]["entries"])
    assert len(str(body["stats"]["labels"])) < 2 * PENDING_MAX * (entry_bytes + 40)
