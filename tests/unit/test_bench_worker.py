"""The pure helpers of the end-to-end worker benchmark (the benchmark itself needs a broker and
minutes; it is run by hand, see docs/performance.md)."""

from __future__ import annotations

import doctest
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

import bench.bench_worker as bw  # noqa: E402
from bench.pipe import RESULT_PREFIX, parse_result  # noqa: E402


def test_the_module_doctests_pass() -> None:
    failures, tried = doctest.testmod(bw, optionflags=doctest.ELLIPSIS)
    assert tried >= 15 and failures == 0


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([3, 1, 2], 50, 2.0), ([1, 2, 3, 4], 0, 1.0), ([1, 2, 3, 4], 100, 4.0), (list(range(101)), 99, 99.0),
     ([10, 20], 25, 12.5)],
)
def test_percentile_interpolates_like_numpy(values: list[float], q: float, expected: float) -> None:
    assert bw.percentile(values, q) == pytest.approx(expected)


def test_percentile_agrees_with_numpy_on_random_data() -> None:
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(0)
    xs = rng.exponential(size=997).tolist()
    for q in (1, 50, 90, 99, 99.9):
        assert bw.percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))


def test_percentile_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        bw.percentile([], 50)
    with pytest.raises(ValueError):
        bw.percentile([1.0], 101)


def test_rate_from_timestamps_counts_intervals_not_records() -> None:
    # 11 records 1 ms apart: 10 intervals in 10 ms = 1000 records/s
    assert bw.rate_from_timestamps(list(range(1000, 1011))) == pytest.approx(1000.0)
    # order does not matter (first and last are min and max)
    assert bw.rate_from_timestamps([2000, 1000, 1500]) == pytest.approx(2.0)
    assert bw.rate_from_timestamps([]) is None
    assert bw.rate_from_timestamps([5, 5, 5]) is None


def test_rate_from_stats_uses_first_and_last_nonzero_records() -> None:
    stats = [
        {"seen": 100_000, "ts": 20.0},  # out of order on purpose
        {"seen": 0, "ts": 1.0},  # the statistics record before anything was seen
        {"seen": 6_000, "ts": 10.0},
        {"seen": 50_000, "ts": 15.0},
    ]
    got = bw.rate_from_stats(stats)
    assert got is not None
    assert got["rate"] == pytest.approx(94_000 / 10.0)
    assert (got["seen_first"], got["seen_last"], got["seconds"]) == (6_000, 100_000, 10.0)
    assert bw.rate_from_stats([{"seen": 10, "ts": 1.0}]) is None
    assert bw.rate_from_stats([]) is None


def test_median_spread() -> None:
    assert bw.median_spread([100.0]) == (100.0, 0.0)
    med, spread = bw.median_spread([80.0, 100.0, 120.0, 90.0])
    assert med == 95.0 and spread == pytest.approx(40 / 95)


def test_latency_summary_matches_by_offset_skips_warmup_and_counts_missing() -> None:
    inputs = {o: 1000 + o for o in range(10)}  # offset o sent at 1000+o ms
    outputs = [(o, 1000 + o + 5) for o in range(10) if o != 7]  # 5 ms each, offset 7 never answered
    outputs.append((3, 9999))  # a re-emission: only the first copy counts
    s = bw.latency_summary(inputs, outputs, from_offset=2)
    assert s["matched"] == 7 and s["missing"] == 1 and s["from_offset"] == 2
    assert s["p50_ms"] == s["p99_ms"] == s["max_ms"] == s["min_ms"] == 5.0


def test_latency_summary_without_matches_has_no_percentiles() -> None:
    s = bw.latency_summary({0: 1}, [], from_offset=0)
    assert s["matched"] == 0 and s["missing"] == 1 and "p50_ms" not in s


def test_sample_at_picks_the_nearest_sample() -> None:
    samples = [(10.0, 1), (11.0, 2), (12.0, 3)]
    assert bw.sample_at(samples, 0.0) == 1
    assert bw.sample_at(samples, 11.4) == 2
    assert bw.sample_at(samples, 99.0) == 3


def test_parse_status_reads_rss_and_high_water_mark() -> None:
    text = "Name:\tpython\nVmPeak:\t 999 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t3\n"
    assert bw.parse_status(text) == {"VmHWM": 204800, "VmRSS": 102400}
    assert bw.parse_status("State:\tZ (zombie)\n") == {}


def test_format_table_aligns_columns() -> None:
    text = bw.format_table(["contender", "rec/s"], [["pipe", "40,000"], ["worker", "9"]])
    lines = text.splitlines()
    assert lines[0] == "contender   rec/s"
    assert set(lines[1]) == {"-", " "}
    assert lines[2] == "pipe       40,000"
    assert lines[3] == "worker          9"
    assert len({len(line) for line in lines}) == 1


def test_markdown_table_and_number_formats() -> None:
    md = bw.markdown_table(["a", "b", "c"], [["x", 1, None]], align="lrl")
    assert md.splitlines() == ["| a | b | c |", "|---|---:|---|", "| x | 1 |  |"]
    assert bw.fmt_rate(1234567.4) == "1,234,567"
    assert bw.fmt_ratio(9.0, 10.0) == "0.90x"
    assert bw.fmt_ratio(1.0, 0.0) == "n/a"


def test_rotated_gives_every_contender_every_position() -> None:
    items = ["a", "b", "c", "d"]
    orders = [bw.rotated(items, k) for k in range(4)]
    for pos in range(4):
        assert sorted(o[pos] for o in orders) == items
    assert bw.rotated([], 3) == []


def test_stack_categories() -> None:
    main = ["_run_module_as_main (<frozen runpy>:198)", "Worker.run (stream_perceptron/worker.py:172)"]
    process = [*main, "Worker.process (stream_perceptron/worker.py:294)"]
    publish = [*process, "Worker._learn_and_publish (stream_perceptron/worker.py:328)"]
    send = [*publish, "KafkaEdge.send (stream_perceptron/kafka_io.py:536)",
            "KafkaEdge._retrying (stream_perceptron/kafka_io.py:593)",
            "KafkaProducer.send (kafka/producer/kafka.py:963)"]
    stats = [*main, "Worker.publish_stats (stream_perceptron/worker.py:360)",
             "encode (stream_perceptron/records.py:210)"]
    assert bw.categorize_stack(send).startswith("KafkaEdge.send")
    assert bw.library_category(send) == "kafka-python KafkaProducer.send"
    assert bw.categorize_stack([*publish, "encode (stream_perceptron/records.py:210)"]).startswith("encode")
    assert bw.categorize_stack(stats) == "statistics records"  # not prediction encoding
    learn = [*process, "Learner.step (stream_perceptron/learner.py:40)",
             "Perceptron.learn_many (stream_perceptron/perceptron.py:300)"]
    assert bw.categorize_stack(learn) == "learn_many"
    assert bw.library_category(publish) == "own code (everything else)"
    assert bw.library_category(["<module> (x.py:1)", "import_module (y.py:2)"]) == "start-up, imports, other"


def test_summarize_pyspy_removes_the_join_and_scales_by_wall_time(tmp_path: Path) -> None:
    main = "_run_module_as_main (<frozen runpy>:198);Worker.run (stream_perceptron/worker.py:172)"
    poll = ";".join([main, "KafkaEdge.poll (stream_perceptron/kafka_io.py:423)",
                     "KafkaConsumer.poll (kafka/consumer/group.py:827)"])
    send = ";".join([main, "Worker.process (stream_perceptron/worker.py:294)",
                     "KafkaEdge.send (stream_perceptron/kafka_io.py:536)",
                     "KafkaProducer.send (kafka/producer/kafka.py:963)",
                     "KafkaProducer._partition (kafka/producer/kafka.py:1)"])
    idle = ";".join(["Thread._bootstrap (threading.py:1002)", "Thread.run (threading.py:982)",
                     "EpollSelector.select (selectors.py:468)"])
    raw = tmp_path / "raw.txt"
    raw.write_text(f"{poll} 300\n{send} 100\n{idle} 400\n<module> (x.py:1) 0\n", encoding="utf-8")
    # 400 main-thread samples over 4 s: 100 Hz effective; a 2 s join = 200 poll samples removed
    s = bw.summarize_pyspy(raw, 250, 1000, wall_s=4.0, join_s=2.0)
    assert s["effective_hz_main_thread"] == pytest.approx(100.0)
    by = {r["category"]: r for r in s["categories"]}
    assert by["poll (consumer.poll + InRecord), incl. waiting"]["samples"] == 100
    assert by["poll (consumer.poll + InRecord), incl. waiting"]["share_of_processing"] == pytest.approx(0.5)
    send_row = by["KafkaEdge.send (producer.send + errback + retry wrapper)"]
    assert send_row["seconds"] == pytest.approx(1.0) and send_row["us_per_record"] == pytest.approx(1000.0)
    assert by["background threads: idle (select, wait)"]["share_of_processing"] is None
    assert s["inside_producer_send"][0]["callee"] == "KafkaProducer._partition"


def test_generated_dense_records_are_separable_with_the_stated_noise() -> None:
    np = pytest.importorskip("numpy")
    values, meta = bw.dense_records(2000, 5, seed=3, noise=0.01)
    recs = [json.loads(v) for v in values]
    assert [r["id"] for r in recs] == list(range(2000))
    assert all(len(r["x"]) == 5 and r["y"] in (-1, 1) for r in recs)
    assert meta["labels_flipped"] == 20 and meta["n"] == 2000
    assert meta["mean_bytes"] == pytest.approx(sum(map(len, values)) / 2000)
    # same seed, same records
    assert bw.dense_records(50, 5, seed=3, noise=0.01)[0] == bw.dense_records(50, 5, seed=3, noise=0.01)[0]
    # without noise, the labels are the sign of a fixed direction with a margin: a perceptron
    # through the origin converges to zero mistakes in a few passes
    clean, _ = bw.dense_records(500, 5, seed=4, noise=0.0)
    X = np.array([json.loads(v)["x"] for v in clean])
    y = np.array([json.loads(v)["y"] for v in clean])
    w = np.zeros(5)
    for _ in range(200):
        wrong = 0
        for xi, yi in zip(X, y, strict=True):
            if yi * (xi @ w) <= 0:
                w += yi * xi
                wrong += 1
        if not wrong:
            break
    assert wrong == 0


def test_generated_sparse_records_have_nnz_distinct_names() -> None:
    values, meta = bw.sparse_records(300, names=1000, nnz=7, seed=5, noise=0.0)
    recs = [json.loads(v) for v in values]
    assert [r["id"] for r in recs] == list(range(300))
    for r in recs:
        assert len(r["x"]) == 7 and all(k.startswith("f") and 0 <= int(k[1:]) < 1000 for k in r["x"])
        assert r["y"] in (-1, 1)
    assert meta["kind"] == "sparse" and meta["labels_flipped"] == 0


def test_contender_result_line_round_trips() -> None:
    out = "noise\n" + RESULT_PREFIX + json.dumps({"records": 3, "rate": 1.5}) + "\nmore noise\n"
    assert parse_result(out) == {"records": 3, "rate": 1.5}
    assert parse_result("nothing here") is None


def test_quick_arguments_are_small_and_the_profile_is_opt_in() -> None:
    quick = bw.parse_args(["--quick"])
    assert quick.records == bw.QUICK_RECORDS and quick.repeats == 1 and quick.latency_seconds <= 5
    assert "profile" not in quick.sections and quick.session_timeout_ms <= 6000
    full = bw.parse_args([])
    assert full.records == bw.DEFAULT_RECORDS and full.repeats >= 3
    assert full.sections == {"throughput", "memory", "latency", "sizes"}
    prof = bw.parse_args(["--only", "profile"])
    assert prof.sections == {"profile"} and prof.profile == "pyspy"
    with pytest.raises(SystemExit):
        bw.parse_args(["--only", "nonsense"])
