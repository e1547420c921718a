"""Checkpoint storage failing while the worker runs, and coming back.

How the storage is broken: the tests run as root, where ``chmod 0o555`` does not stop writes,
so ``checkpoint.dir`` is a *symlink* to the real directory, and the fault atomically repoints it
at a regular file (``os.replace`` of a new symlink over the old one). Every write then fails
with ENOTDIR/EEXIST exactly as an unwritable or vanished volume would, for root or not, without
privileges or mounts, and the real directory (the durable checkpoints) stays untouched so the
test can read it. Repointing the symlink back is the storage returning.
"""

from __future__ import annotations

import http.client
import json
import logging

import pytest

from tests.integration.conftest import BACKENDS
from tests.integration.helpers import (
    ThreadedWorker,
    core_reference,
    encode_stream,
    noisy_stream,
    predictions_by_offset,
    send_all,
    topics_for,
)
from tests.symlinks import point

from .support import committed, fault_settings, stored, wait_until

pytestmark = pytest.mark.faults


def _readyz(port: int) -> tuple[int, dict[str, object]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/readyz")
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_storage_failing_then_returning(fast_kafka, new_topic, tmp_path, caplog, backend):
    caplog.set_level(logging.INFO, logger="stream_perceptron")
    kafka = fast_kafka(max_poll_records=500, backend=backend)
    topics = topics_for(new_topic)
    n1, n2 = 3000, 3000
    stream = noisy_stream(n1 + n2, d=6, noise=0.1, seed=31)
    values = encode_stream(stream)
    real, blocker, link = tmp_path / "real", tmp_path / "blocker", tmp_path / "store"
    real.mkdir()
    blocker.write_text("not a directory\n")
    point(link, real)
    settings = fault_settings(
        kafka, topics, link,
        checkpoint={"every_examples": 500, "every_seconds": 0.5},
        observe={"enabled": True, "host": "127.0.0.1", "port": 0},
    )
    send_all(kafka, topics["input"], values[:n1])
    tw = ThreadedWorker(settings).start()
    worker = tw.worker
    try:
        wait_until(lambda: stored(real, topics["input"]) is not None
                   and stored(real, topics["input"]).offsets.get(topics["input"]) == {0: n1},
                   60, "a checkpoint of the first part")
        wait_until(lambda: committed(kafka, topics["input"]) == {0: n1}, 20, "the commit")
        port = worker.observer.port
        wait_until(lambda: _readyz(port)[0] == 200, 20, "/readyz 200 while healthy")

        # the fault: checkpoint.dir now resolves to a regular file
        point(link, blocker)
        failures_before = worker.counters.checkpoint_failures
        send_all(kafka, topics["input"], values[n1:])
        # it keeps serving: a prediction for every new offset, while checkpoints fail
        wait_until(lambda: len(predictions_by_offset(kafka, topics["predictions"])) == n1 + n2,
                   60, "predictions for the records sent while storage is down", every_s=0.5)
        wait_until(lambda: not worker.checkpoint_ok, 20, "checkpoint_ok to turn False")
        wait_until(lambda: worker.counters.checkpoint_failures >= failures_before + 2, 20,
                   "repeated checkpoint attempts")
        assert tw.thread.is_alive()
        # nothing committed past the last durable checkpoint
        durable = stored(real, topics["input"])
        assert durable.offsets[topics["input"]] == {0: n1}
        assert committed(kafka, topics["input"]) == {0: n1}
        assert worker.offsets[topics["input"]][0] == n1 + n2  # processed further than durable
        status, body = _readyz(port)
        assert status == 503 and "checkpoint failed" in str(body["reason"]), (status, body)
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR
                  and "offsets not committed" in r.getMessage()]
        assert errors, "no error logged for the failing checkpoint storage"
        assert str(link) in errors[0].getMessage()

        # the storage returns
        point(link, real)
        wait_until(lambda: worker.checkpoint_ok, 20, "checkpoint_ok to turn True again")
        wait_until(lambda: committed(kafka, topics["input"]) == {0: n1 + n2}, 20,
                   "the commit of everything")
        assert stored(real, topics["input"]).offsets[topics["input"]] == {0: n1 + n2}
        assert any("checkpoint storage works again" in r.getMessage() for r in caplog.records)
        wait_until(lambda: _readyz(port)[0] == 200, 20, "/readyz 200 again")
    finally:
        code = tw.stop()
    assert code == 0
    model, _ = core_reference(stream, [y for _, y in stream])
    final = stored(real, topics["input"])
    assert final.model["weights"] == model.weights.tolist()
    assert final.model["mistakes"] == model.mistakes
    assert final.stats["seen"] == n1 + n2
    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(0, o) for o in range(n1 + n2)]
    assert all(len(c) == 1 for c in preds.values())
    print(f"\n{worker.counters.checkpoint_failures} failed checkpoint attempts while storage was "
          f"down; {len(errors)} error line(s): {errors[0].getMessage()!r}")
