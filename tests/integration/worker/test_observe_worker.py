"""A running worker's /metrics (a series per input partition, dropped on revocation), /healthz and
/readyz, and the health command."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from stream_perceptron.commands.read import read_topic
from tests.integration.helpers import (
    ThreadedWorker,
    encode_stream,
    noisy_stream,
    send_all,
    topics_for,
    wait_for,
    worker_settings,
)


def _samples(port: int) -> list[Any]:
    """Every sample of the worker's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:  # noqa: S310
        text = resp.read().decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def _scrape(port: int) -> dict[str, float]:
    """The samples without labels, by name."""
    return {sample.name: sample.value for sample in _samples(port) if not sample.labels}


def _by_partition(port: int, name: str) -> dict[tuple[str, str], float]:
    """``stream_perceptron_<name>`` per (topic, partition), as scraped."""
    return {(sample.labels["topic"], sample.labels["partition"]): sample.value
            for sample in _samples(port) if sample.name == "stream_perceptron_" + name}


def _lag_gauge(port: int) -> dict[tuple[str, str], float]:
    """``consumer_lag`` per (topic, partition), as scraped."""
    return _by_partition(port, "consumer_lag")


def _model_info(port: int) -> dict[tuple[str, str], str]:
    """The ``model_id`` label of ``model_info`` per (topic, partition), as scraped."""
    return {(sample.labels["topic"], sample.labels["partition"]): sample.labels["model_id"]
            for sample in _samples(port) if sample.name == "stream_perceptron_model_info"}


def _partitions_labelled(port: int) -> set[tuple[str, str]]:
    """Every (topic, partition) that labels a series of the worker's partitions."""
    return {(sample.labels["topic"], sample.labels["partition"]) for sample in _samples(port)
            if "partition" in sample.labels}


def _newest_stats(kafka: Any, topic: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The newest statistics record of each input partition in ``topic``, by (topic, partition)."""
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for _, _, _, rec in read_topic(kafka, topic, idle_s=0.5):
        if "event" in rec:  # a drift event, not a statistics record
            continue
        where = (rec["topic"], str(rec["partition"]))
        if where not in newest or rec["ts"] >= newest[where]["ts"]:
            newest[where] = rec
    return newest


def _status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:  # noqa: S310
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_each_partitions_metrics_equal_its_statistics_record(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topics = topics_for(new_topic, partitions=2)
    stream = encode_stream(noisy_stream(3000), unlabeled_every=7)
    send_all(kafka, topics["input"], stream[::2], partition=0)
    send_all(kafka, topics["input"], stream[1::2], partition=1)
    tw = ThreadedWorker(worker_settings(kafka, topics, tmp_path,
                                        stats={"every_examples": 1000, "every_seconds": 0.5})).start()
    parts = {(topics["input"], "0"), (topics["input"], "1")}
    try:
        wait_for(lambda: tw.worker.counters.records == 3000, 60, "the worker to process the stream")
        port = tw.worker.observer.port

        def agree() -> bool:
            newest = _newest_stats(kafka, topics["stats"])
            if set(newest) != parts or any(rec["seen"] != 1500 for rec in newest.values()):
                return False
            return all(
                _by_partition(port, name) == {where: rec[key] for where, rec in newest.items()}
                for name, key in [("mistakes_total", "mistakes"), ("examples_total", "seen"),
                                  ("labeled_examples_total", "labeled"), ("mistake_rate", "mistake_rate")]
            ) and _lag_gauge(port) == dict.fromkeys(parts, 0)

        wait_for(agree, 30, "each partition's metrics to equal its newest statistics record", every_s=0.5)
        newest = _newest_stats(kafka, topics["stats"])
        for (topic, part), rec in newest.items():  # one partition's offsets and lag only
            assert rec["offsets"] == {topic: {part: 1500}} and rec["lag"] == {f"{topic}:{part}": 0}
        assert _model_info(port) == {where: rec["model_id"] for where, rec in newest.items()}
        # the group's E_n from the series: sum(mistakes_total) / sum(labeled_examples_total)
        mistakes = _by_partition(port, "mistakes_total")
        labeled = _by_partition(port, "labeled_examples_total")
        assert sum(mistakes.values()) == sum(rec["mistakes"] for rec in newest.values()) > 0
        assert sum(labeled.values()) == sum(rec["labeled"] for rec in newest.values())
        assert set(_by_partition(port, "feature_names")) == parts  # dense input: 0 names
        assert _partitions_labelled(port) == parts
        metrics = _scrape(port)  # the worker's own series stay unlabelled
        assert metrics["stream_perceptron_assigned_partitions"] == 2
        assert metrics["stream_perceptron_ready"] == 1
        assert metrics["stream_perceptron_rebalances_total"] >= 1
        assert _status(port, "/healthz") == 200
        assert _status(port, "/readyz") == 200
    finally:
        assert tw.stop() == 0


def test_a_revoked_partitions_series_leave_the_workers_metrics(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topics = topics_for(new_topic, partitions=2)
    stream = encode_stream(noisy_stream(2000))
    send_all(kafka, topics["input"], stream[:500:2], partition=0)
    send_all(kafka, topics["input"], stream[1:500:2], partition=1)
    stats = {"every_examples": 100, "every_seconds": 0.3}
    first = ThreadedWorker(worker_settings(kafka, topics, tmp_path / "a", stats=stats)).start()
    second: ThreadedWorker | None = None
    both = {(topics["input"], "0"), (topics["input"], "1")}
    try:
        wait_for(lambda: first.worker.counters.records == 500, 60, "the first worker to take both")
        port_a = first.worker.observer.port
        wait_for(lambda: _partitions_labelled(port_a) == both, 30, "series of both partitions")
        second = ThreadedWorker(worker_settings(kafka, topics, tmp_path / "b", stats=stats)).start()
        wait_for(lambda: len(first.assignment()) == 1 and len(second.assignment()) == 1, 60,
                 "the group to split the partitions")
        send_all(kafka, topics["input"], stream[500::2], partition=0)
        send_all(kafka, topics["input"], stream[501::2], partition=1)
        wait_for(lambda: first.worker.counters.records + second.worker.counters.records >= 2000, 60,
                 "the rest of the stream")
        kept = {(t, str(p)) for t, p in first.assignment()}
        taken = {(t, str(p)) for t, p in second.assignment()}
        port_b = second.worker.observer.port
        wait_for(lambda: _partitions_labelled(port_a) == kept and _partitions_labelled(port_b) == taken,
                 30, "each worker to export only the partition it holds")
        (where,) = kept
        wait_for(lambda: _by_partition(port_a, "mistakes_total").get(where)
                 == _newest_stats(kafka, topics["stats"])[where]["mistakes"], 30,
                 "the kept partition's counter to follow its records")
        assert set(_model_info(port_a)) == kept and set(_model_info(port_b)) == taken
        assert set(_newest_stats(kafka, topics["stats"])) == both
    finally:
        if second is not None:
            assert second.stop() == 0
        assert first.stop() == 0


def test_readyz_follows_checkpoint_storage(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topics = topics_for(new_topic)
    stream = encode_stream(noisy_stream(600))
    send_all(kafka, topics["input"], stream[:200])
    ckpt_dir = tmp_path / "ckpt"
    tw = ThreadedWorker(worker_settings(kafka, topics, ckpt_dir,
                                        checkpoint={"every_examples": 50, "every_seconds": 0.3})).start()
    try:
        wait_for(lambda: tw.worker.counters.records == 200, 60, "the first records")
        port = tw.worker.observer.port
        wait_for(lambda: _status(port, "/readyz") == 200, 30, "ready")
        # storage fails: the checkpoint directory becomes a file (chmod does not stop root)
        ckpt_dir.rename(tmp_path / "away")
        ckpt_dir.write_text("not a directory")
        send_all(kafka, topics["input"], stream[200:400])
        wait_for(lambda: _status(port, "/readyz") == 503, 30, "unready while checkpoints fail")
        assert _status(port, "/healthz") == 200  # alive: still predicting
        wait_for(lambda: tw.worker.counters.records == 400, 30, "predictions go on")
        assert not tw.worker.checkpoint_ok
        # storage returns
        ckpt_dir.unlink()
        (tmp_path / "away").rename(ckpt_dir)
        wait_for(lambda: _status(port, "/readyz") == 200, 30, "ready again")
        assert tw.worker.checkpoint_ok
        proc = subprocess.run([sys.executable, "-m", "stream_perceptron.cli", "health", "--url",
                               f"http://127.0.0.1:{port}/readyz"], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0 and proc.stdout.startswith("ok")
    finally:
        assert tw.stop() == 0
    proc = subprocess.run([sys.executable, "-m", "stream_perceptron.cli", "health", "--url",
                           f"http://127.0.0.1:{port}/readyz"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and proc.stdout.startswith("not ok")


def test_the_lag_gauge_follows_a_burst_before_the_next_statistics_record(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topics = topics_for(new_topic)
    send_all(kafka, topics["input"], encode_stream(noisy_stream(3000)))  # the burst, waiting
    small_polls = kafka.model_copy(update={"max_poll_records": 10})  # hundreds of polls to go through it
    tw = ThreadedWorker(worker_settings(small_polls, topics, tmp_path,
                                        stats={"every_examples": 10**9, "every_seconds": 3600})).start()
    try:
        wait_for(lambda: tw.assignment() == [(topics["input"], 0)], 60, "the assignment")
        port = tw.worker.observer.port
        gauge = tw.worker.observer.registry.get_sample_value
        seen: list[float] = []  # the gauge while the burst goes through (read in-process)

        def done() -> bool:
            lag = gauge("stream_perceptron_consumer_lag", {"topic": topics["input"], "partition": "0"})
            if lag is not None:
                seen.append(lag)
            return tw.worker.counters.records == 3000

        wait_for(done, 60, "the burst to be processed", every_s=0.005)
        wait_for(lambda: _lag_gauge(port) == {(topics["input"], "0"): 0}, 10,
                 "the lag gauge to show the burst processed")
        assert [v for _, _, _, v in read_topic(kafka, topics["stats"], idle_s=0.5)] == [], (
            "a statistics record was published: the gauge may come from it")
        assert any(0 < lag < 3000 for lag in seen), seen  # it showed the burst going down
        print(f"\nthe lag gauge during the burst: {len(seen)} readings,"
              f" from {max(seen):.0f} to {min(seen):.0f}")
    finally:
        assert tw.stop() == 0
