"""The pure helpers of the end-to-end worker benchmark (the benchmark itself needs a broker and
minutes; it is run by hand, see docs/performance.md)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

import bench.bench_worker as bw  # noqa: E402
from bench.pipe import RESULT_PREFIX, parse_result  # noqa: E402
from bench.worker import (  # noqa: E402
    contenders,
    formatting,
    inputs,
    measures,
    processes,
    profile,
    report,
    sections,
    targets,
)


def test_the_module_doctests_pass() -> None:
    modules = [bw] + [
        importlib.import_module(f"bench.worker.{path.stem}")
        for path in sorted((ROOT / "bench" / "worker").glob("*.py"))
    ]
    failures = tried = 0
    for module in modules:
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        failures, tried = failures + result.failed, tried + result.attempted
    assert tried >= 3 and failures == 0


def test_rates_over_chunks_trends_and_samples_near_a_time() -> None:
    # the last, partial chunk is left out
    assert measures.chunk_rates([0, 10, 20, 100, 200, 300, 400], 3) == [100.0, 10.0]
    samples = [(1.0, 10), (2.0, 50), (2.1, 20), (2.2, 30), (9.0, 99)]
    assert measures.median_around(samples, 2.1, 0.5) == 30.0  # the median of the three within 0.5 s
    assert measures.median_around([(1.0, 10), (5.0, 50)], 4.0, 0.5) == 50.0  # else the nearest
    assert measures.median_around([], 1.0, 0.5) is None
    assert measures.linear_trend([(0, 1.0), (1, 3.0), (2, 5.0)]) == 2.0
    assert measures.linear_trend([(1, 2.0)]) is None


def test_cpu_from_proc_stat_and_its_share_in_a_window() -> None:
    assert measures.parse_stat_cpu_ticks("42 (py thon) S 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 3") == 200
    assert measures.cores_in_window([(0.0, 0.0), (1.0, 0.5), (2.0, 2.0)], 0.5, 1.5) == 1.0
    assert measures.cores_in_window([(0.0, 0.0), (1.0, 0.5)], 2.0, 3.0) is None  # not covered
    assert measures.steal_share([100, 0, 50, 800, 0, 0, 0, 50], [200, 0, 100, 1500, 0, 0, 0, 200]) == 0.15
    assert measures.steal_share(None, [1, 2, 3]) is None and measures.steal_share([1] * 8, [1] * 8) is None
    assert report.steal_text({"throughput": 0.031, "latency": 0.2}) == (
        " CPU steal (time the hypervisor gave to other guests): throughput 3.1%, latency 20.0%.")
    assert report.steal_text({}) == report.steal_text({"sizes": None}) == ""


def test_a_process_sample_sums_its_children_and_keeps_the_highest_peak() -> None:
    s = processes.RssSampler(0)
    s.samples = [(0.0, 2048, 2048, 0.1), (1.0, 3072, 4096, 0.2), (2.0, 1024, 2048, 0.3)]
    summary = s.summary()
    assert (summary["peak_rss_mb"], summary["last_rss_mb"], summary["vm_hwm_mb"]) == (3.0, 1.0, 4.0)


def test_the_worker_log_gives_its_group_join_and_assignments() -> None:
    lines = [json.dumps({"ts": 1.0, "msg": "kafka edge (confluent-kafka) started: group g"}), "not json",
             json.dumps({"ts": 4.0, "msg": "on_assigned: [('t', 0)]"})]
    assert processes.group_join(lines) == (3.0, 1)
    assert processes.group_join(lines[:2]) == (None, 0)


def test_the_latency_plan_and_its_medians_over_repeats() -> None:
    plan = sections.latency_plan({"kafka-python": 1.0}, extra_fetch_wait_ms=10)
    assert [(p["kind"], p["extra_env"]) for p in plan] == [
        ("worker", {}), ("pipe", {}), ("worker", {"SP_KAFKA__FETCH_MAX_WAIT_MS": "10"})]
    assert plan[2]["name"] == "worker (kafka-python), SP_KAFKA__FETCH_MAX_WAIT_MS=10"
    assert len(sections.latency_plan({"kafka-python+process": 1.0}, extra_fetch_wait_ms=10)) == 2
    runs = [{"plan_index": 0, "achieved_input_rate": 1.0, "latency": {"p50_ms": v, "p99_ms": 2 * v}}
            for v in (10.0, 30.0, 20.0)]
    (s,) = sections.latency_summaries(plan[:1], runs)
    assert (s["repeats"], s["latency"]["p50_ms"], s["latency"]["p99_ms"]) == (3, 20.0, 40.0)
    assert (s["p99_min_ms"], s["p99_max_ms"]) == (20.0, 60.0)


def test_the_size_runs_are_never_shorter_than_a_few_polls() -> None:
    assert [v["records"] for v in sections.size_variants(100_000, False)] == [100000, 100000, 25000, 50000]
    assert [v["records"] for v in sections.size_variants(10_000, True)] == [10000, 10000, 5000, 5000]


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([3, 1, 2], 50, 2.0),
        ([1, 2, 3, 4], 0, 1.0),
        ([1, 2, 3, 4], 100, 4.0),
        (list(range(101)), 99, 99.0),
        ([10, 20], 25, 12.5),
    ],
)
def test_percentile_interpolates_like_numpy(values: list[float], q: float, expected: float) -> None:
    assert measures.percentile(values, q) == pytest.approx(expected)


def test_percentile_agrees_with_numpy_on_random_data() -> None:
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(0)
    xs = rng.exponential(size=997).tolist()
    for q in (1, 50, 90, 99, 99.9):
        assert measures.percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))


def test_percentile_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        measures.percentile([], 50)
    with pytest.raises(ValueError):
        measures.percentile([1.0], 101)


def test_rate_from_timestamps_counts_intervals_not_records() -> None:
    # 11 records 1 ms apart: 10 intervals in 10 ms = 1000 records/s
    assert measures.rate_from_timestamps(list(range(1000, 1011))) == pytest.approx(1000.0)
    # order does not matter (first and last are min and max)
    assert measures.rate_from_timestamps([2000, 1000, 1500]) == pytest.approx(2.0)
    assert measures.rate_from_timestamps([]) is None
    assert measures.rate_from_timestamps([5, 5, 5]) is None


def test_rate_from_stats_uses_first_and_last_nonzero_records() -> None:
    stats = [
        {"seen": 100_000, "ts": 20.0},  # out of order on purpose
        {"seen": 0, "ts": 1.0},  # the statistics record before anything was seen
        {"seen": 6_000, "ts": 10.0},
        {"seen": 50_000, "ts": 15.0},
    ]
    got = measures.rate_from_stats(stats)
    assert got is not None
    assert got["rate"] == pytest.approx(94_000 / 10.0)
    assert (got["seen_first"], got["seen_last"], got["seconds"]) == (6_000, 100_000, 10.0)
    assert measures.rate_from_stats([{"seen": 10, "ts": 1.0}]) is None
    assert measures.rate_from_stats([]) is None


def test_median_spread() -> None:
    assert measures.median_spread([100.0]) == (100.0, 0.0)
    med, spread = measures.median_spread([80.0, 100.0, 120.0, 90.0])
    assert med == 95.0 and spread == pytest.approx(40 / 95)


def test_latency_summary_matches_by_offset_skips_warmup_and_counts_missing() -> None:
    sent = {o: 1000 + o for o in range(10)}  # offset o sent at 1000+o ms
    outputs = [(o, 1000 + o + 5) for o in range(10) if o != 7]  # 5 ms each, offset 7 never answered
    outputs.append((3, 9999))  # a re-emission: only the first copy counts
    s = measures.latency_summary(sent, outputs, from_offset=2)
    assert s["matched"] == 7 and s["missing"] == 1 and s["from_offset"] == 2
    assert s["p50_ms"] == s["p99_ms"] == s["max_ms"] == s["min_ms"] == 5.0


def test_latency_summary_without_matches_has_no_percentiles() -> None:
    s = measures.latency_summary({0: 1}, [], from_offset=0)
    assert s["matched"] == 0 and s["missing"] == 1 and "p50_ms" not in s


def test_sample_at_picks_the_nearest_sample() -> None:
    samples = [(10.0, 1), (11.0, 2), (12.0, 3)]
    assert measures.sample_at(samples, 0.0) == 1
    assert measures.sample_at(samples, 11.4) == 2
    assert measures.sample_at(samples, 99.0) == 3


def test_parse_status_reads_rss_and_high_water_mark() -> None:
    text = "Name:\tpython\nVmPeak:\t 999 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t3\n"
    assert measures.parse_status(text) == {"VmHWM": 204800, "VmRSS": 102400}
    assert measures.parse_status("State:\tZ (zombie)\n") == {}


def test_format_table_aligns_columns() -> None:
    text = formatting.format_table(["contender", "rec/s"], [["pipe", "40,000"], ["worker", "9"]])
    lines = text.splitlines()
    assert lines[0] == "contender   rec/s"
    assert set(lines[1]) == {"-", " "}
    assert lines[2] == "pipe       40,000"
    assert lines[3] == "worker          9"
    assert len({len(line) for line in lines}) == 1


def test_markdown_table_and_number_formats() -> None:
    md = formatting.format_table(["a", "b", "c"], [["x", 1, None]], align="lrl", markdown=True)
    assert md.splitlines() == ["| a | b | c |", "|---|---:|---|", "| x | 1 |  |"]
    assert formatting.fmt_rate(1234567.4) == "1,234,567"
    assert formatting.fmt_ratio(9.0, 10.0) == "0.90x"
    assert formatting.fmt_ratio(1.0, 0.0) == "n/a"


def test_timing_rows_give_median_spread_and_ratio_to_the_base() -> None:
    rows = formatting.timing_rows({"a": [2.0, 1.0, 1.5], 500: [3.0, 3.0, 3.0]}, 1_000_000, base="a")
    assert rows == [["a", "1.50", "67%", "1.000"], ["500", "3.00", "0%", "2.000"]]
    assert formatting.timing_rows({2_000: [4.0], 100: [1.0]}, 1_000_000, base=2_000)[0][0] == "2,000"


def test_rotated_gives_every_contender_every_position() -> None:
    items = ["a", "b", "c", "d"]
    orders = [contenders.rotated(items, k) for k in range(4)]
    for pos in range(4):
        assert sorted(o[pos] for o in orders) == items
    assert contenders.rotated([], 3) == []


def test_every_function_and_module_the_profile_names_resolves_to_what_py_spy_prints() -> None:
    stages, library, leaves = profile.rules()
    for category, where in [*stages, *library, *((None, w) for w in leaves)]:
        if where.qualname is None:  # a module prefix
            assert importlib.util.find_spec(where.module) is not None, (category, where)
            continue
        # the function named by the module and qualified name a frame prints is the one the rule was made of
        obj = importlib.import_module(where.module)
        for part in where.qualname.split("."):
            obj = getattr(obj, part)
        assert obj.__code__.co_qualname == where.qualname, (category, where)
        assert obj.__module__ == where.module


def test_a_function_the_profile_names_that_is_gone_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from stream_perceptron.worker.loop import Worker

    monkeypatch.delattr(Worker, "_start_edge")
    with pytest.raises(AttributeError, match="_start_edge"):
        profile.rules.__wrapped__()


def test_stack_categories() -> None:
    main = ["_run_module_as_main (<frozen runpy>:198)", "Worker.run (stream_perceptron/worker/loop.py:172)"]
    process = [*main, "Worker.process (stream_perceptron/worker/loop.py:294)"]
    send = [
        *process,
        "KafkaEdge.send_many (stream_perceptron/kafka/python_edge.py:364)",
        "KafkaProducer.send (kafka/producer/kafka.py:963)",
    ]
    assert profile.categorize_stack(send) == profile.SEND
    assert profile.library_category(send) == "kafka-python KafkaProducer.send"
    encode = [*process, "encode_predictions (stream_perceptron/codec/outputs.py:120)"]
    assert profile.categorize_stack(encode).startswith("encode predictions")
    stats = [*main, "Worker.publish_stats (stream_perceptron/worker/progress.py:101)",
             "encode (stream_perceptron/codec/outputs.py:325)"]
    assert profile.categorize_stack(stats) == "encode other records (statistics, dead letters)"
    learn = [
        *process,
        "Learner.step (stream_perceptron/model/learner.py:69)",
        "Perceptron.learn_many (stream_perceptron/model/perceptron.py:545)",
    ]
    assert profile.categorize_stack(learn) == "learn_many"
    update = [*learn[:-1], "RunningStats.update_many (stream_perceptron/model/stats.py:125)"]
    assert profile.categorize_stack(update).startswith("statistics update")
    assert profile.categorize_stack(process).startswith("the worker's own Python")
    assert profile.library_category(process) == profile.OWN
    store = [*main, "Worker.checkpoint (stream_perceptron/worker/checkpointing.py:55)",
             "DirectoryStore.save (stream_perceptron/state/directory.py:138)"]
    assert profile.categorize_stack(store) == "state store (checkpoints)"
    start_up = ["<module> (x.py:1)", "_find_and_load (<frozen importlib._bootstrap>:1176)"]
    assert profile.library_category(start_up) == profile.categorize_stack(start_up) == profile.START_UP
    connecting = [
        *main,
        "Worker._start_edge (stream_perceptron/worker/loop.py:288)",
        "Worker._check_topics (stream_perceptron/worker/loop.py:323)",
        "Condition.wait (threading.py:327)",
    ]
    assert profile.categorize_stack(connecting) == profile.START_UP  # not the run loop
    assert profile.library_category(connecting) == profile.START_UP


def test_summarize_pyspy_removes_the_join_and_scales_by_wall_time(tmp_path: Path) -> None:
    main = "_run_module_as_main (<frozen runpy>:198);Worker.run (stream_perceptron/worker/loop.py:172)"
    poll = ";".join(
        [
            main,
            "KafkaEdge.poll (stream_perceptron/kafka/python_edge.py:423)",
            "KafkaConsumer.poll (kafka/consumer/group.py:827)",
        ]
    )
    send = ";".join(
        [
            main,
            "Worker.process (stream_perceptron/worker/loop.py:294)",
            "EdgeBase.send (stream_perceptron/kafka/edge.py:353)",
            "KafkaProducer.send (kafka/producer/kafka.py:963)",
            "KafkaProducer._partition (kafka/producer/kafka.py:1)",
        ]
    )
    idle = ";".join(
        [
            "Thread._bootstrap (threading.py:1002)",
            "Thread.run (threading.py:982)",
            "EpollSelector.select (selectors.py:468)",
        ]
    )
    raw = tmp_path / "raw.txt"
    raw.write_text(f"{poll} 300\n{send} 100\n{idle} 400\n<module> (x.py:1) 0\n", encoding="utf-8")
    # 400 main-thread samples over 4 s: 100 Hz effective; a 2 s join = 200 poll samples removed
    s = profile.summarize_pyspy(raw, 250, 1000, wall_s=4.0, join_s=2.0)
    assert s["effective_hz_main_thread"] == pytest.approx(100.0)
    by = {r["category"]: r for r in s["categories"]}
    poll_row = by["edge poll (client poll + column copies), incl. waiting"]
    assert poll_row["samples"] == 100 and poll_row["share_of_processing"] == pytest.approx(0.5)
    send_row = by["edge send (client send + loop)"]
    assert send_row["seconds"] == pytest.approx(1.0) and send_row["us_per_record"] == pytest.approx(1000.0)
    assert by["background threads: idle (select, wait)"]["share_of_processing"] is None
    # the join comes out of the one poll category that waits, in each table
    lib = {r["category"]: r for r in s["library"]}
    assert lib["kafka-python KafkaConsumer.poll (incl. waiting)"]["samples"] == 100


def test_confluent_stacks_are_split_by_the_c_call_their_leaf_line_makes() -> None:
    pytest.importorskip("confluent_kafka")
    import inspect

    from bench.pipe import confluent_pipe
    from stream_perceptron.kafka.confluent_edge import ConfluentEdge

    def line_of(function, text: str) -> int:  # the first line of function's source holding text
        lines, start = inspect.getsourcelines(function)
        return start + next(i for i, line in enumerate(lines) if text in line)

    main = ["_run_module_as_main (<frozen runpy>:198)", "Worker.run (stream_perceptron/worker/loop.py:204)"]
    edge = "stream_perceptron/kafka/confluent_edge.py"
    consume = [*main, f"ConfluentEdge.poll ({edge}:1)", f"ConfluentEdge._consume ({edge}:2)"]
    around = [*main, f"ConfluentEdge.poll ({edge}:3)"]
    assert profile.library_category(consume) == profile.CF_CONSUME
    assert profile.categorize_stack(consume) == profile.POLL
    assert profile.library_category(around).startswith("ConfluentEdge.poll: Python around")
    # the pipe: one function, its leaf line names the call (read from bench/pipe.py)
    top = ["<module> (x.py:1)", "main (bench/pipe.py:1)"]
    cat = [profile.library_category([*top, f"confluent_pipe (bench/pipe.py:{line_of(confluent_pipe, text)})"])
           for text in ("consume_first(", "produce(", "serve(0)", "batches_of(")]
    assert cat == [profile.CF_CONSUME, profile.CF_PRODUCE, profile.CF_SERVE, profile.OWN]
    # the edge's send_many: produce, serving reports, or the loop around them
    send_many = ConfluentEdge.send_many
    sends = [profile.library_category([*main, f"ConfluentEdge.send_many ({edge}:{line_of(send_many, t)})"])
             for t in ("produce(topic", "poll(0)", "for key, value")]
    assert sends[:2] == [profile.CF_PRODUCE, profile.CF_SERVE]
    assert sends[2].startswith("ConfluentEdge.send_many: Python around produce")


def test_generated_dense_records_are_separable_with_the_stated_noise() -> None:
    np = pytest.importorskip("numpy")
    values, meta = inputs.dense_records(2000, 5, seed=3, noise=0.01)
    recs = [json.loads(v) for v in values]
    assert [r["id"] for r in recs] == list(range(2000))
    assert all(len(r["x"]) == 5 and r["y"] in (-1, 1) for r in recs)
    assert meta["labels_flipped"] == 20 and meta["n"] == 2000
    assert meta["mean_bytes"] == pytest.approx(sum(map(len, values)) / 2000)
    # same seed, same records
    again = inputs.dense_records(50, 5, seed=3, noise=0.01)[0]
    assert inputs.dense_records(50, 5, seed=3, noise=0.01)[0] == again
    # without noise, the labels are the sign of a fixed direction with a margin: a perceptron
    # through the origin converges to zero mistakes in a few passes
    clean, _ = inputs.dense_records(500, 5, seed=4, noise=0.0)
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
    values, meta = inputs.sparse_records(300, names=1000, nnz=7, seed=5, noise=0.0)
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


def test_contenders_cover_every_backend_and_the_peer_once() -> None:
    both = contenders.contenders_for(contenders.BACKENDS)
    assert both[-1] == contenders.PEER and len(both) == len(set(both)) == 12
    assert {contenders.SPECS[c].backend for c in both} == set(contenders.BACKENDS)
    kp_only = [
        contenders.PIPE_KP, contenders.PIPE_KP_APPEND, contenders.WORKER_KP,
        contenders.WORKER_KP_NONE, contenders.PEER,
    ]
    assert contenders.contenders_for(["kafka-python"]) == kp_only
    cf_only = [
        contenders.PIPE_CF, contenders.PIPE_CF_CODEC, contenders.WORKER_CF,
        contenders.WORKER_CF_NONE, contenders.PEER,
    ]
    assert contenders.contenders_for(["confluent-kafka"]) == cf_only
    kpp = {"SP_KAFKA__BACKEND": "kafka-python", "SP_KAFKA__PRODUCER_PROCESS": "true"}
    assert contenders.backend_env(contenders.KPP) == kpp


def test_the_kafka_python_worker_is_judged_against_the_bare_pipe_and_shown_against_the_appending_one(
) -> None:
    fake = _fake_report()
    fake["throughput"]["summary"][contenders.PIPE_KP_APPEND] = {"median_rate": 50_000.0}
    own = next(t for t in targets.evaluate_targets(fake) if t["backend"] == contenders.KP)
    assert own["value"] == pytest.approx(30 / 40)  # the verdict: the bare pipe, as the issue has it
    assert "appending a poll at once" in own["detail"]
    assert "50,000 rec/s (1.25 x the bare pipe; worker / it 0.60)" in own["detail"]
    assert contenders.SPECS[contenders.PIPE_KP_APPEND].pipe_args == ("--decode", "--append")


def test_the_confluent_worker_is_judged_against_the_bare_pipe_and_shown_against_the_codec_one() -> None:
    fake = _fake_report()
    fake["throughput"]["summary"][contenders.PIPE_CF_CODEC] = {"median_rate": 200_000.0}
    own = next(
        t for t in targets.evaluate_targets(fake)
        if t["backend"] == contenders.CF and "bare pipe" in t["target"]
    )
    assert own["value"] == pytest.approx(100 / 500)  # the verdict stays the bare pipe's
    assert "the worker's codec, fixed model: 200,000 rec/s (0.40 x the bare pipe; worker / it 0.50)" in (
        own["detail"]
    )
    assert contenders.SPECS[contenders.PIPE_CF_CODEC].pipe_args == ("--codec",)


def test_the_producer_process_worker_is_judged_against_both_kafka_python_pipes() -> None:
    fake = _fake_report()
    fake["throughput"]["summary"].update(
        {contenders.PIPE_KPP: {"median_rate": 60_000.0}, contenders.WORKER_KPP: {"median_rate": 45_000.0}}
    )
    kpp = [t for t in targets.evaluate_targets(fake) if t["backend"] == contenders.KPP]
    own, one_process, peer = kpp
    assert "own client's bare pipe" in own["target"] and own["value"] == pytest.approx(0.75)
    assert own["met"] is False
    assert "one-process" in one_process["target"] and one_process["value"] == pytest.approx(45 / 40)
    assert one_process["met"] is True and "two processes" in one_process["detail"]
    assert peer["value"] == pytest.approx(2.25) and peer["met"] is False


def _fake_report() -> dict:
    summary = {
        contenders.PIPE_KP: {"median_rate": 40_000.0},
        contenders.WORKER_KP: {"median_rate": 30_000.0},
        contenders.PIPE_CF: {"median_rate": 500_000.0},
        contenders.WORKER_CF: {"median_rate": 100_000.0},
        contenders.PEER: {"median_rate": 20_000.0},
    }
    milestones = [
        {"records": 100_000, "rss_mb": 100.0, "hwm_mb": 100.0},
        {"records": 1_000_000, "rss_mb": 105.0, "hwm_mb": 120.0},
    ]
    lat = {"p50_ms": 40.0, "p99_ms": 250.0}
    return {
        "throughput": {"summary": summary},
        "memory": {"runs": {"kafka-python": {"milestones": milestones}}},
        "latency": {
            "runs": [
                {
                    "kind": "worker",
                    "backend": "confluent-kafka",
                    "extra_env": {},
                    "latency": lat,
                    "achieved_input_rate": 50_000.0,
                },
                {
                    "kind": "worker",
                    "backend": "kafka-python",
                    "latency": lat,
                    "achieved_input_rate": 1.0,
                    "extra_env": {"SP_KAFKA__FETCH_MAX_WAIT_MS": "10"},
                },  # not the default: no target
                {
                    "kind": "pipe",
                    "backend": "kafka-python",
                    "extra_env": {},
                    "latency": lat,
                    "achieved_input_rate": 1.0,
                },
            ]
        },
    }


def test_targets_are_judged_per_backend_with_the_shortfall() -> None:
    got = {
        (t["backend"], t["target"].split()[2] if t["target"].startswith("worker") else t["target"][:3]): t
        for t in targets.evaluate_targets(_fake_report())
    }
    pipe_kp = got[("kafka-python", "0.9")]
    assert pipe_kp["value"] == pytest.approx(0.75) and pipe_kp["met"] is False
    assert pipe_kp["missed_by"] == pytest.approx(1 / 6) and pipe_kp["factor_needed"] == pytest.approx(1.2)
    assert got[("confluent-kafka", "0.9")]["value"] == pytest.approx(0.2)
    assert got[("kafka-python", "5")]["value"] == pytest.approx(1.5)
    assert got[("confluent-kafka", "5")]["met"] is True
    mem = got[("kafka-python", "VmR")]
    assert mem["met"] is True and mem["value"] == pytest.approx(0.05)
    hwm = got[("kafka-python", "VmH")]  # the peak so far is judged too
    assert hwm["met"] is False and hwm["value"] == pytest.approx(0.2) and "+20.0%" in hwm["detail"]
    p99 = [t for t in targets.evaluate_targets(_fake_report()) if "latency" in t["target"]]
    assert [t["backend"] for t in p99] == ["confluent-kafka"]  # only default-setting worker runs
    assert p99[0]["met"] is False and p99[0]["factor_needed"] == pytest.approx(2.5)
    assert "NOT MET" in targets.target_line(p99[0]) and "250 ms" in targets.target_line(p99[0])
    md = report.targets_text(targets.evaluate_targets(_fake_report()), markdown=True).splitlines()
    assert any(row.startswith("| **NOT MET** | kafka-python ") for row in md)
    assert any(row.startswith("| MET | confluent-kafka ") for row in md)


def test_the_worker_over_pipe_target_shows_the_ratio_of_each_repeat() -> None:
    fake = _fake_report()
    def runs(*rates: float) -> list[dict]:
        return [{"repeat": k, "rate": r} for k, r in enumerate(rates)]

    fake["throughput"]["runs"] = {
        contenders.WORKER_KP: runs(32_000.0, 38_000.0, 30_000.0),
        contenders.PIPE_KP: runs(40_000.0, 40_000.0, 50_000.0),
    }
    own = [t for t in targets.evaluate_targets(fake) if t["target"].endswith("own client's bare pipe")]
    kp = {t["backend"]: t for t in own}
    assert kp["kafka-python"]["value"] == pytest.approx(0.75)  # the verdict stays the medians'
    assert kp["kafka-python"]["detail"].endswith("; per repeat: 0.80, 0.95, 0.60")
    assert "per repeat" not in kp["confluent-kafka"]["detail"]  # no runs of its own in the report
    assert "per repeat: 0.80, 0.95, 0.60" in targets.target_line(kp["kafka-python"])


@pytest.mark.parametrize(("value", "shown"), [
    (0.8976, "0.898"), (0.89999, "0.89999"), (0.75, "0.75"), (0.9 * (1 - 1e-12), "<0.900000"),
])
def test_a_ratio_short_of_its_goal_never_prints_as_the_goal(value: float, shown: str) -> None:
    line = targets.target_line(targets.target_check("worker / pipe", "kafka-python", value, 0.9))
    assert line.startswith(f"NOT MET  kafka-python     worker / pipe: {shown} (goal >= 0.90): missed by ")
    assert "missed by 0% " not in line and "(needs 1.00x)" not in line


def test_memory_and_latency_just_past_their_goals_never_print_as_the_goal() -> None:
    memory = targets.target_line(targets.target_check(
        "VmRSS after 1M records within 10% of after 100k", "kafka-python", 0.10004, 0.10,
        higher_is_better=False))
    assert ": 10.004% (goal <= 10%): missed by 0.004 percentage points" in memory
    latency = targets.target_line(targets.target_check(
        "p99 latency <= 100 ms at half load", "kafka-python", 100.5, 100.0, higher_is_better=False))
    assert ": 100.5 ms (goal <= 100 ms): missed by 0.5% (needs 1.005x)" in latency
    nothing = targets.target_line(targets.target_check("worker / pipe", "kafka-python", 0.0, 0.9))
    assert nothing.endswith("missed by 100% (needs n/a)")


def test_the_confluent_pipe_uses_the_edges_librdkafka_settings() -> None:
    pytest.importorskip("confluent_kafka")
    from bench.pipe import confluent_configs, kafka_settings

    consumer, producer = confluent_configs(kafka_settings("127.0.0.1:9092"), "g")
    assert producer["acks"] == "all" and producer["linger.ms"] == 20 and producer["batch.size"] == 262_144
    assert consumer["enable.auto.commit"] is False and consumer["isolation.level"] == "read_uncommitted"
    assert not {"logger", "error_cb", "on_delivery"} & (set(consumer) | set(producer))
    waiting = kafka_settings("127.0.0.1:9092", fetch_max_wait_ms=7)
    assert confluent_configs(waiting, "g")[0]["fetch.wait.max.ms"] == 7
    # the edge's bounded prefetch, not librdkafka's 100,000 messages and one-second backoff
    assert consumer["queued.min.messages"] == 20_000 and consumer["fetch.queue.backoff.ms"] == 10
    assert consumer["queued.max.messages.kbytes"] == 32_768
    assert consumer["fetch.max.bytes"] == 1_048_576  # the worker's fetch_max_bytes, not 50 MB


def test_quick_arguments_are_small_and_the_profile_is_opt_in() -> None:
    quick = bw.parse_args(["--quick"])
    assert quick.records == contenders.QUICK_RECORDS and quick.repeats == 1 and quick.latency_seconds <= 5
    assert "profile" not in quick.sections and quick.session_timeout_ms <= 6000
    full = bw.parse_args([])
    assert full.records == contenders.DEFAULT_RECORDS and full.repeats >= 3
    assert full.sections == {"throughput", "memory", "latency", "sizes"}
    prof = bw.parse_args(["--only", "profile"])
    assert prof.sections == {"profile"} and prof.profile == "pyspy"
    with pytest.raises(SystemExit):
        bw.parse_args(["--only", "nonsense"])
    assert full.backends == ["kafka-python", "kafka-python+process", "confluent-kafka"]
    assert full.latency_repeats == 3 and quick.latency_repeats == 1
    rates = bw.parse_args(["--latency-rate", "kafka-python=100,confluent-kafka=200"]).latency_rates
    assert rates == {"kafka-python": 100.0, "confluent-kafka": 200.0}
    with pytest.raises(SystemExit):
        bw.parse_args(["--latency-rate", "nope=1"])
    both = bw.parse_args(["--backends", "confluent-kafka,kafka-python"]).backends
    assert both == [contenders.KP, contenders.CF]
    assert bw.parse_args(["--latency-extra-fetch-wait-ms", "-1"]).latency_extra_fetch_wait_ms is None
    with pytest.raises(SystemExit):
        bw.parse_args(["--backends", "librdkafka"])


def test_memory_and_long_run_tables_compare_the_backends() -> None:
    def run(rss100: float, rss1m: float, rate: float) -> dict:
        return {
            "rss_after_first_batches_mb": 90.0,
            "vm_hwm_mb": 130.0,
            "milestones": [
                {"records": 100_000, "rss_mb": rss100, "hwm_mb": rss100},
                {"records": 1_000_000, "rss_mb": rss1m, "hwm_mb": rss1m},
            ],
            "rss_from_100k": {
                "points": 2,
                "min_mb": rss100,
                "max_mb": rss1m,
                "slope_mb_per_100k_records": 1.0,
            },
            "run": {"rate": rate, "cpu_cores_in_window": 1.0, "rates_per_100k_records": [rate, rate]},
        }

    mem = {
        "runs": {"kafka-python": run(100.0, 113.0, 25_000.0), "confluent-kafka": run(120.0, 125.0, 90_000.0)},
        "pipes_long_run": {
            b: {
                "records": 1_050_000,
                "rate": r,
                "own_rate_first_poll_to_flush": r,
                "rates_per_100k_records": [r],
            }
            for b, r in (("kafka-python", 50_000.0), ("confluent-kafka", 150_000.0))
        },
    }
    headers, rows = report.memory_table(mem)
    assert headers == ["worker memory, predictions=all", "kafka-python MB", "confluent-kafka MB"]
    growth = [r for r in rows if r[0].startswith("VmRSS (median") and r[0].endswith("1M vs 100k")]
    assert growth == [["VmRSS (median of +-0.5 s): 1M vs 100k", "+13.0%", "+4.2%"]]
    table = report.long_run_table(mem)
    assert table is not None
    by = {r[0]: r for r in table[1]}
    assert by["kafka-python"][-1] == "0.50x" and by["confluent-kafka"][-1] == "0.60x"
    assert report.long_run_table({"runs": {}}) is None


def test_a_scope_deletes_the_topics_made_inside_it_and_only_those(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    deleted: list[list[str]] = []
    monkeypatch.setattr(processes, "delete_topics", lambda bootstrap, names: deleted.append(list(names)))
    ctx = processes.Ctx("127.0.0.1:1", "bw", tmp_path, 2000)
    ctx.topics.append("section-input")
    with ctx.scope():
        ctx.topics.append("run-input")
        with ctx.scope():
            ctx.topics += ["run-pred", "run-stats"]
        assert deleted == [["run-pred", "run-stats"]]
        with pytest.raises(RuntimeError), ctx.scope():
            ctx.topics.append("failed-run-out")
            raise RuntimeError("the run failed")
        with ctx.scope():
            pass  # nothing made: nothing to delete
    assert deleted == [["run-pred", "run-stats"], ["failed-run-out"], ["run-input"]]
    assert ctx.topics == ["section-input"]


def test_a_run_that_lost_or_doubled_outputs_is_left_out_of_the_medians() -> None:
    from bench.worker.processes import summarize

    s = summarize([{"rate": 100.0, "complete": True, "cpu_cores_in_window": 1.0},
                   {"rate": 300.0, "complete": False, "cpu_cores_in_window": 9.0},
                   {"rate": None, "complete": True},
                   {"rate": 120.0, "complete": True, "cpu_cores_in_window": 1.0}])
    assert (s["runs"], s["runs_left_out"], s["all_complete"]) == (2, 2, False)
    assert s["median_rate"] == 110.0 and s["max_rate"] == 120.0
    assert s["median_cpu_cores"] == 1.0
