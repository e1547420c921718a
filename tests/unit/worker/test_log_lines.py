"""The worker's routine lines: progress and interval checkpoints at INFO at most once per
``SP_LOG_EVERY_SECONDS`` each, the rest at DEBUG; the shutdown's and a revocation's always."""

from __future__ import annotations

import logging
import time

from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from tests.unit.worker.test_durability import FailingEdge, _batch


def _worker(tmp_path, log_every_seconds: float) -> Worker:
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                        log_every_seconds=log_every_seconds)
    return Worker(settings, edge=FailingEdge())  # type: ignore[arg-type]  # one that never fails


def _learn(w: Worker, start: int, n: int = 10) -> None:
    w.process(_batch(start, n))


def _lines(caplog, text: str) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if text in r.getMessage()]


def test_progress_and_interval_checkpoint_lines_are_at_info_once_per_interval(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="stream_perceptron")
    w = _worker(tmp_path, log_every_seconds=1.0)
    started = time.monotonic()
    for k in range(3):
        _learn(w, 10 * k)
        w.publish_stats()
        assert w.checkpoint("interval")
    assert time.monotonic() - started < 1.0  # all three within one interval
    progress, ckpts = _lines(caplog, "seen "), _lines(caplog, "(interval) in ")
    assert [level for level, _ in progress] == ["INFO", "DEBUG", "DEBUG"]
    assert [level for level, _ in ckpts] == ["INFO", "DEBUG", "DEBUG"]
    assert progress[2][1].startswith("1 partitions: seen 30, labeled 30,")  # the DEBUG ones are whole lines
    assert "more at DEBUG" not in ckpts[0][1]

    time.sleep(1.0)
    _learn(w, 30)
    w.publish_stats()
    assert w.checkpoint("interval")
    _learn(w, 40)  # a checkpoint with nothing new is not written
    assert w.checkpoint("revocation")  # never held back
    assert [level for level, _ in _lines(caplog, "seen 40,")] == ["INFO"]
    (ckpt,) = [line for line in _lines(caplog, "(interval) in ") if "ckpt-000000000004.json" in line[1]]
    assert ckpt[0] == "INFO" and ckpt[1].endswith(" (2 more at DEBUG since the last)"), ckpt
    assert [level for level, _ in _lines(caplog, "(revocation) in ")] == ["INFO"]


class OnePollEdge(FailingEdge):
    """Started, polled once (nothing new) and closed by the worker's run."""

    def start(self):
        pass

    def poll(self, timeout_ms, max_records):
        return []

    def close(self):
        pass


def test_the_shutdown_progress_line_is_always_at_info(tmp_path, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG, logger="stream_perceptron")
    w = _worker(tmp_path, log_every_seconds=3600)
    w.edge = OnePollEdge()  # type: ignore[assignment]
    monkeypatch.setattr(w, "_check_topics", lambda: None)
    _learn(w, 0)
    w.publish_stats()
    _learn(w, 10)
    w.publish_stats()  # within the hour: DEBUG
    assert w.run(until=lambda _: True) == 0  # one poll, then the shutdown's statistics and checkpoint
    assert [level for level, _ in _lines(caplog, "seen ")] == ["INFO", "DEBUG", "INFO"]
    assert [level for level, _ in _lines(caplog, "(shutdown) in ")] == ["INFO"]


def test_zero_writes_every_line_at_info(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="stream_perceptron")
    w = _worker(tmp_path, log_every_seconds=0)
    for k in range(3):
        _learn(w, 10 * k)
        w.publish_stats()
        assert w.checkpoint("interval")
    assert [level for level, _ in _lines(caplog, "seen ")] == ["INFO"] * 3
    assert [level for level, _ in _lines(caplog, "(interval) in ")] == ["INFO"] * 3
