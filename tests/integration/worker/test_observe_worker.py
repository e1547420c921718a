"""A running worker's /metrics, /healthz and /readyz, and the health command."""

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


def _lag_gauge(port: int) -> dict[tuple[str, str], float]:
    """``consumer_lag`` per (topic, partition), as scraped."""
    return {(sample.labels["topic"], sample.labels["partition"]): sample.value
            for sample in _samples(port) if sample.name == "stream_perceptron_consumer_lag"}


def _model_info(port: int) -> list[str]:
    """The ``model_id`` labels of ``model_info``, as scraped."""
    return [sample.labels["model_id"] for sample in _samples(port)
            if sample.name == "stream_perceptron_model_info"]


def _status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:  # noqa: S310
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_metrics_mistake_counter_equals_the_statistics_record(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topics = topics_for(new_topic)
    send_all(kafka, topics["input"], encode_stream(noisy_stream(3000), unlabeled_every=7))
    tw = ThreadedWorker(worker_settings(kafka, topics, tmp_path,
                                        stats={"every_examples": 1000, "every_seconds": 0.5})).start()
    try:
        wait_for(lambda: tw.worker.counters.records == 3000, 60, "the worker to process the stream")
        port = tw.worker.observer.port

        def agree() -> bool:
            stats = [v for _, _, _, v in read_topic(kafka, topics["stats"], idle_s=0.5)]
            last = max(stats, key=lambda r: r["ts"])
            metrics = _scrape(port)
            return (last["seen"] == 3000
                    and last["lag"] == {f"{topics['input']}:0": 0}
                    and _lag_gauge(port) == {(topics["input"], "0"): 0}
                    and metrics["stream_perceptron_mistakes_total"] == last["mistakes"]
                    and metrics["stream_perceptron_examples_total"] == last["seen"]
                    and metrics["stream_perceptron_labeled_examples_total"] == last["labeled"])

        wait_for(agree, 30, "metrics to equal the last statistics record", every_s=0.5)
        metrics = _scrape(port)
        assert metrics["stream_perceptron_mistakes_total"] == tw.worker.learner.model.mistakes > 0
        assert 0 < metrics["stream_perceptron_mistake_rate"] < 1
        assert metrics["stream_perceptron_assigned_partitions"] == 1
        assert _status(port, "/healthz") == 200
        assert _status(port, "/readyz") == 200
        stats = [v for _, _, _, v in read_topic(kafka, topics["stats"], idle_s=0.5)]
        assert {r["model_id"] for r in stats} == set(_model_info(port)) == {tw.worker.model_id}
    finally:
        assert tw.stop() == 0


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
