"""The observer: metrics over real HTTP, a series per input partition, counters that follow restored
statistics, forgetting revoked partitions, health and readiness."""

from __future__ import annotations

import json
import math
import socket
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stream_perceptron.http_server import Limits
from stream_perceptron.settings import ObserveSettings
from stream_perceptron.worker.observe import NullObserver, Observer, observer_for, probe

P = "stream_perceptron_"

MODEL = "3f2a9c1d" + "0" * 24
STATS = {
    "seen": 1000, "labeled": 900, "mistakes": 40, "updates": 40, "dead_letters": 3,
    "mistake_rate": 40 / 900, "window_mistake_rate": 0.02, "ewma_mistake_rate": 0.03,
    "margin_min": -0.5, "margin_mean": 0.25, "R": 2.0, "theta_norm": 7.5, "gamma": 0.1,
    "bound": 400.0, "examples_per_s": 1234.5, "window": 1000, "client_id": "w1",
    "topic": "examples", "partition": 0, "model_id": MODEL,
}
P0 = {"topic": "examples", "partition": "0"}  # the labels of partition 0's series
P1 = {"topic": "examples", "partition": "1"}


class Clock:
    """A settable monotonic clock."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def make():
    """Start observers on 127.0.0.1, port 0; stop them all afterwards."""
    started: list[Observer] = []

    def make(**kw) -> Observer:
        obs = Observer(host="127.0.0.1", port=kw.pop("port", 0), **kw)
        obs.start()
        started.append(obs)
        return obs

    yield make
    for obs in started:
        obs.stop()


def url(obs: Observer, path: str) -> str:
    return f"http://127.0.0.1:{obs.port}{path}"


def scrape(obs: Observer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    ok, text = probe(url(obs, "/metrics"))
    assert ok, text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text + "\n")
        for s in family.samples
    }


def value(samples, name: str, **labels: str) -> float:
    return samples[(P + name, tuple(sorted(labels.items())))]


def labelled(samples, name: str) -> set[tuple[tuple[str, str], ...]]:
    """The label sets of ``name``'s samples."""
    return {labels for sample, labels in samples if sample == P + name}


def counts(topic: str = "examples", partition: int = 0, **kw: int) -> dict:
    return {"topic": topic, "partition": partition, **kw}


def answer(obs: Observer, path: str) -> tuple[bool, dict]:
    ok, body = probe(url(obs, path))
    return ok, json.loads(body)


def ready_worker(obs: Observer) -> None:
    obs.polled()
    obs.rebalance()
    obs.assigned([("examples", 0)])


# ---------------------------------------------------------------------- metrics
def test_counters_and_gauges_after_a_sequence_of_calls(make):
    clock = Clock()
    obs = make(clock=clock)
    ready_worker(obs)
    obs.batch(**counts(records=10, labeled=8, mistakes=2, dead_letters=1))
    obs.batch(**counts(records=5, labeled=5, mistakes=1, dead_letters=0))
    obs.batch(**counts(partition=1, records=7, labeled=6, mistakes=4, dead_letters=2))
    obs.checkpoint(ok=True, duration_s=0.25)
    obs.checkpoint(ok=False, duration_s=0.5)
    obs.lag({("examples", 0): 7, ("examples", 1): 0})
    clock.t += 4.0
    s = scrape(obs)
    assert value(s, "examples_total", **P0) == 14  # records minus dead letters
    assert value(s, "labeled_examples_total", **P0) == 13
    assert value(s, "mistakes_total", **P0) == 3
    assert value(s, "updates_total", **P0) == 3
    assert value(s, "dead_letters_total", **P0) == 1
    assert [value(s, n, **P1) for n in ["examples_total", "labeled_examples_total", "mistakes_total",
                                        "updates_total", "dead_letters_total"]] == [5, 6, 4, 4, 2]
    assert value(s, "rebalances_total") == 1
    assert value(s, "checkpoints_total", result="ok") == 1
    assert value(s, "checkpoints_total", result="error") == 1
    assert value(s, "checkpoint_duration_seconds") == 0.5
    assert value(s, "checkpoint_age_seconds") == 4.0  # since the last *successful* one
    assert value(s, "consumer_lag", topic="examples", partition="0") == 7
    assert value(s, "consumer_lag", topic="examples", partition="1") == 0
    assert value(s, "assigned_partitions") == 1
    assert value(s, "ready") == 0  # the last checkpoint failed
    assert labelled(s, "mistake_rate") == set()  # no statistics record yet

    obs.stats(STATS)
    obs.stats({**STATS, "partition": 1, "mistake_rate": 0.5, "gamma": None})
    s = scrape(obs)
    assert value(s, "mistake_rate", **P1) == 0.5 and math.isnan(value(s, "gamma", **P1))
    for name, key in [
        ("mistake_rate", "mistake_rate"), ("window_mistake_rate", "window_mistake_rate"),
        ("ewma_mistake_rate", "ewma_mistake_rate"), ("margin_min", "margin_min"),
        ("margin_mean", "margin_mean"), ("radius", "R"), ("theta_norm", "theta_norm"),
        ("gamma", "gamma"), ("mistake_bound", "bound"), ("examples_per_second", "examples_per_s"),
    ]:
        assert value(s, name, **P0) == pytest.approx(STATS[key]), name


def test_each_partition_names_its_model_and_a_new_model_replaces_the_old(make):
    obs = make()
    assert labelled(scrape(obs), "model_info") == set()  # before the first statistics record
    other = "77e0b512" + "1" * 24
    obs.stats(STATS)
    obs.stats({**STATS, "partition": 1, "model_id": other})
    s = scrape(obs)
    assert value(s, "model_info", **P0, model_id=MODEL) == 1
    assert value(s, "model_info", **P1, model_id=other) == 1
    assert len(labelled(s, "model_info")) == 2
    fresh = "0badc0de" + "2" * 24  # partition 0's state began again: a new model
    obs.stats({**STATS, "model_id": fresh})
    s = scrape(obs)
    assert labelled(s, "model_info") == {
        tuple(sorted({**P0, "model_id": fresh}.items())), tuple(sorted({**P1, "model_id": other}.items()))}


def test_a_record_without_topic_and_partition_sets_the_unlabelled_series(make):
    obs = make()
    old = {k: v for k, v in STATS.items() if k not in ("topic", "partition")}  # an older worker's
    obs.stats(old)
    s = scrape(obs)
    empty = {"topic": "", "partition": ""}  # PromQL reads empty labels as none
    assert value(s, "mistakes_total", **empty) == 40
    assert value(s, "mistake_rate", **empty) == pytest.approx(40 / 900)
    assert value(s, "model_info", **empty, model_id=MODEL) == 1
    assert labelled(s, "mistakes_total") == {tuple(sorted(empty.items()))}


def test_counter_names_end_in_total_and_the_scrape_parses(make):
    obs = make()
    ok, text = probe(url(obs, "/metrics"))
    assert ok
    families = {f.name: f for f in text_string_to_metric_families(text + "\n")}
    counters = {name for name, f in families.items() if f.type == "counter"}
    assert counters == {P + n for n in ["examples", "labeled_examples", "mistakes", "updates",
                                        "dead_letters", "label_joins", "label_expiries", "drifts",
                                        "rebalances", "checkpoints", "mix_paused_seconds", "mix_overdue",
                                        "class_labeled_examples", "class_mistakes", "class_predicted"]}
    for name in counters:
        for sample in families[name].samples:
            assert sample.name.endswith(("_total", "_created")), sample.name
    # the text format carries counters' creation times as separate "_created" gauge families
    gauges = {name for name, f in families.items() if f.type == "gauge" and not name.endswith("_created")}
    assert gauges == {P + n for n in [
        "mistake_rate", "served_mistake_rate", "window_mistake_rate", "ewma_mistake_rate", "margin_min",
        "margin_mean", "radius",
        "theta_norm", "mistake_bound", "gamma", "examples_per_second", "checkpoint_age_seconds",
        "checkpoint_duration_seconds", "consumer_lag", "assigned_partitions", "ready",
        "feature_names", "feature_names_limit", "pending_labels",
        "mix_version", "mix_staleness_epochs", "mix_sum_mu_k", "classes",
        "model_info"]}  # an info metric: a gauge of 1 whose labels are the information


def test_feature_names_in_use_and_their_limit_are_gauges_per_partition(make):
    obs = make()
    assert labelled(scrape(obs), "feature_names") == set()
    obs.feature_names(3, 5, topic="examples", partition=0)
    obs.feature_names(1, None, topic="examples", partition=1)  # no bound
    s = scrape(obs)
    assert value(s, "feature_names", **P0) == 3 and value(s, "feature_names_limit", **P0) == 5
    assert value(s, "feature_names", **P1) == 1 and math.isnan(value(s, "feature_names_limit", **P1))


def test_none_statistics_become_nan(make):
    obs = make()
    obs.stats(STATS)
    obs.stats({**STATS, "gamma": None, "bound": None, "margin_min": None})
    s = scrape(obs)
    assert math.isnan(value(s, "gamma", **P0))
    assert math.isnan(value(s, "mistake_bound", **P0))
    assert math.isnan(value(s, "margin_min", **P0))
    assert value(s, "radius", **P0) == 2.0
    obs.stats({k: v for k, v in STATS.items() if k != "examples_per_s"})  # missing: NaN too
    s = scrape(obs)
    assert math.isnan(value(s, "examples_per_second", **P0))
    assert value(s, "gamma", **P0) == 0.1


def test_counters_follow_the_restored_statistics_and_never_decrease(make):
    obs = make()
    obs.batch(**counts(partition=1, records=4, labeled=4, mistakes=1, dead_letters=0))
    obs.stats(STATS)  # partition 0 restored: its counters jump to its totals, partition 1's stay
    s = scrape(obs)
    assert value(s, "examples_total", **P0) == 1000
    assert value(s, "labeled_examples_total", **P0) == 900
    assert value(s, "mistakes_total", **P0) == 40
    assert value(s, "updates_total", **P0) == 40
    assert value(s, "dead_letters_total", **P0) == 3
    assert value(s, "examples_total", **P1) == 4 and value(s, "mistakes_total", **P1) == 1

    obs.batch(**counts(records=12, labeled=10, mistakes=2, dead_letters=2))  # advanced between records
    s = scrape(obs)
    assert value(s, "examples_total", **P0) == 1010
    assert value(s, "mistakes_total", **P0) == 42
    assert value(s, "dead_letters_total", **P0) == 5

    obs.stats({**STATS, "seen": 990, "mistakes": 30, "updates": 30})  # an older record: no decrease
    s = scrape(obs)
    assert value(s, "examples_total", **P0) == 1010
    assert value(s, "mistakes_total", **P0) == 42

    newer = {**STATS, "seen": 1500, "labeled": 1300, "mistakes": 55, "updates": 55, "dead_letters": 9}
    obs.stats(newer)
    s = scrape(obs)
    assert [value(s, n, **P0) for n in ["examples_total", "labeled_examples_total", "mistakes_total",
                                        "updates_total", "dead_letters_total"]] == [1500, 1300, 55, 55, 9]
    assert value(s, "examples_total", **P1) == 4


def test_forget_removes_the_series_of_revoked_partitions_only(make):
    obs = make(clock=Clock())
    for part in (0, 1):
        obs.stats({**STATS, "partition": part})
        obs.batch(**counts(partition=part, records=5, labeled=5, mistakes=1, dead_letters=0))
        obs.feature_names(2, 10, topic="examples", partition=part)
    obs.assigned([("examples", 0), ("examples", 1)])
    obs.lag({("examples", 0): 3, ("examples", 1): 4})
    obs.stats({**STATS, "topic": "other", "partition": 0})  # another input topic's partition 0
    obs.forget([("examples", 0)])  # revoked
    s = scrape(obs)
    for name in ["examples_total", "labeled_examples_total", "mistakes_total", "updates_total",
                 "dead_letters_total", "mistake_rate", "served_mistake_rate", "window_mistake_rate",
                 "ewma_mistake_rate", "margin_min", "margin_mean", "radius", "theta_norm", "gamma",
                 "mistake_bound", "examples_per_second", "feature_names", "feature_names_limit",
                 "consumer_lag", "model_info"]:
        held = {dict(labels)["topic"] + ":" + dict(labels)["partition"] for labels in labelled(s, name)}
        assert "examples:0" not in held, name
        assert "examples:1" in held, name
    assert value(s, "mistakes_total", **P1) == 41
    assert value(s, "mistakes_total", topic="other", partition="0") == 40
    assert obs.readiness() == (True, f"partitions assigned: 2, lag 4; {obs.liveness()[1]}")  # 3 + 4 before
    # assigned again later (a rebalance gave it back): from 0, raised to the totals of its state
    obs.batch(**counts(records=2, labeled=2, mistakes=1, dead_letters=0))
    assert value(scrape(obs), "mistakes_total", **P0) == 1
    obs.stats({**STATS, "mistakes": 70})
    s = scrape(obs)
    assert value(s, "mistakes_total", **P0) == 70
    assert value(s, "model_info", **P0, model_id=MODEL) == 1
    obs.forget([("examples", 7)])  # never held: nothing happens


def test_each_adoption_observes_its_staleness_and_the_waits_add_up(make):
    obs = make(clock=Clock())
    for staleness in (0, 1, 1, 4):
        obs.mix_adopted("examples", 0, staleness=staleness, overdue=staleness > 3)
    obs.mix_paused("examples", 0, 0.25)
    obs.mix_paused("examples", 0, 1.5)
    s = scrape(obs)
    assert value(s, "mix_staleness_versions_count", **P0) == 4
    assert value(s, "mix_staleness_versions_sum", **P0) == 6
    assert value(s, "mix_staleness_versions_bucket", **P0, le="0.0") == 1
    assert value(s, "mix_staleness_versions_bucket", **P0, le="1.0") == 3
    assert value(s, "mix_staleness_versions_bucket", **P0, le="5.0") == 4
    assert value(s, "mix_paused_seconds_total", **P0) == 1.75
    assert value(s, "mix_overdue_total", **P0) == 1
    obs.forget([("examples", 0)])
    s = scrape(obs)
    assert not labelled(s, "mix_staleness_versions_count") and not labelled(s, "mix_paused_seconds_total")


def test_batch_rejects_impossible_counts(make):
    obs = make()
    with pytest.raises(ValueError):
        obs.batch(**counts(records=1, labeled=0, mistakes=0, dead_letters=2))
    with pytest.raises(ValueError):
        obs.batch(**counts(records=1, labeled=-1, mistakes=0, dead_letters=0))
    assert labelled(scrape(obs), "examples_total") == set()  # nothing counted


def test_lag_of_revoked_partitions_disappears(make):
    obs = make()
    obs.assigned([("examples", 0), ("examples", 1)])
    obs.lag({("examples", 0): 3, ("examples", 1): 4})
    obs.assigned([("examples", 1)])
    s = scrape(obs)
    assert ("stream_perceptron_consumer_lag", (("partition", "0"), ("topic", "examples"))) not in s
    assert value(s, "consumer_lag", topic="examples", partition="1") == 4
    obs.lag({})
    assert not any(name == P + "consumer_lag" for name, _ in scrape(obs))


def test_calls_from_many_threads_add_up(make):
    obs = make()

    def work():
        for _ in range(200):
            obs.batch(**counts(records=3, labeled=2, mistakes=1, dead_letters=1))
            obs.polled()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = scrape(obs)
    assert value(s, "examples_total", **P0) == 1600
    assert value(s, "mistakes_total", **P0) == 800


# ---------------------------------------------------------------------- readiness and liveness
def test_readyz_transitions(make):
    clock = Clock()
    obs = make(clock=clock)
    obs.polled()
    ok, body = answer(obs, "/readyz")
    assert (ok, body["ok"]) == (False, False)
    assert "no partitions assigned" in body["reason"]

    obs.rebalance()
    obs.assigned([("examples", 0)])
    ok, body = answer(obs, "/readyz")  # no checkpoint attempted yet: ready
    assert ok and body["ok"] is True
    assert value(scrape(obs), "ready") == 1

    obs.checkpoint(ok=False, duration_s=0.01)  # the directory refuses writes
    ok, body = answer(obs, "/readyz")
    assert not ok and body == {"ok": False, "reason": "the last checkpoint failed"}
    assert value(scrape(obs), "ready") == 0
    assert obs.liveness()[0]  # unready, still alive

    obs.checkpoint(ok=True, duration_s=0.01)
    assert answer(obs, "/readyz")[0]

    obs.assigned([])
    ok, body = answer(obs, "/readyz")
    assert not ok and "no partitions assigned" in body["reason"]


def test_outputs_confirmed_after_a_failed_flush_make_the_worker_ready_again(make):
    obs = make(clock=Clock())
    obs.polled()
    obs.assigned([("examples", 0)])
    obs.checkpoint(ok=False, duration_s=0.01)  # statistics records not acknowledged in time
    assert answer(obs, "/readyz") == (False, {"ok": False, "reason": "the last checkpoint failed"})
    checkpoints = value(scrape(obs), "checkpoints_total", result="ok")
    obs.outputs_confirmed()  # the next flush worked, and nothing new was there to write
    assert answer(obs, "/readyz")[0]
    assert value(scrape(obs), "checkpoints_total", result="ok") == checkpoints  # none written


def test_a_client_that_stops_half_way_through_its_request_is_let_go(make):
    assert Limits().read_timeout_s == 10  # the limit served; 1 s here, to keep the suite short
    obs = make(limits=Limits(read_timeout_s=1))
    with socket.create_connection(("127.0.0.1", obs.port)) as stalled:
        stalled.sendall(b"GET /metr")  # and nothing more
        stalled.settimeout(30)
        started = time.monotonic()
        assert stalled.recv(1024) == b""  # the server closed it
    assert 0.5 < time.monotonic() - started < 10


def test_not_ready_when_polling_stops(make):
    clock = Clock()
    obs = make(clock=clock, liveness_timeout_s=60.0)
    ready_worker(obs)
    clock.t += 60.0
    assert answer(obs, "/readyz")[0]
    clock.t += 0.5
    ok, body = answer(obs, "/readyz")
    assert not ok and "last poll 60.5 s ago (limit 60 s)" in body["reason"]
    obs.polled()
    assert answer(obs, "/readyz")[0]


def test_not_ready_when_stalled_with_lag(make):
    clock = Clock()
    obs = make(clock=clock, liveness_timeout_s=60.0, stall_timeout_s=300.0)
    ready_worker(obs)
    obs.lag({("examples", 0): 0})
    clock.t += 1000.0  # idle without lag is fine
    obs.polled()
    assert obs.readiness()[0]

    obs.lag({("examples", 0): 50})  # new records: the stall clock starts now, not at the last progress
    clock.t += 299.0
    obs.polled()
    assert obs.readiness()[0]
    clock.t += 2.0
    obs.polled()
    ok, body = answer(obs, "/readyz")
    assert not ok and body["reason"].startswith("stalled: lag 50 and no progress for 301.0 s")

    obs.batch(**counts(records=10, labeled=10, mistakes=0, dead_letters=0))  # progress: ready again
    assert answer(obs, "/readyz")[0]


def test_healthz_with_an_injected_clock(make):
    clock = Clock()
    obs = make(clock=clock, liveness_timeout_s=10.0)
    clock.t += 9.0
    ok, body = answer(obs, "/healthz")  # before the first poll: alive for the timeout after start
    assert ok and body["ok"] is True and "no poll yet" in body["reason"]
    clock.t += 2.0
    ok, body = answer(obs, "/healthz")
    assert not ok and body == {"ok": False, "reason": "no poll yet, 11.0 s after start (limit 10 s)"}

    obs.polled()
    clock.t += 10.0
    assert answer(obs, "/healthz")[0]
    clock.t += 0.1
    ok, body = answer(obs, "/healthz")
    assert not ok and body["reason"] == "last poll 10.1 s ago (limit 10 s)"


def test_an_unstarted_observer_is_neither_alive_nor_ready():
    obs = Observer(host="127.0.0.1", port=0)
    assert obs.liveness() == (False, "not started")
    assert obs.readiness() == (False, "not started")
    obs.stop()  # harmless


def test_timeouts_must_be_positive():
    with pytest.raises(ValueError):
        Observer(liveness_timeout_s=0)


# ---------------------------------------------------------------------- the server and probe
def test_probe_against_the_server_and_unknown_paths(make):
    obs = make()
    ok, body = probe(url(obs, "/healthz"))
    assert ok and json.loads(body)["ok"] is True
    ok, body = probe(url(obs, "/readyz?verbose=1"))
    assert not ok and json.loads(body)["ok"] is False
    ok, body = probe(url(obs, "/nope"))
    assert not ok and "not found" in body


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_probe_never_raises():
    ok, err = probe(f"http://127.0.0.1:{free_port()}/healthz", timeout_s=1.0)
    assert not ok and "Connection" in err
    assert probe("ftp://example.invalid/x") == (False, "not an http(s) URL: 'ftp://example.invalid/x'")
    assert probe("http://127.0.0.1:notaport/")[0] is False
    assert probe("not a url at all")[0] is False


def test_the_observer_of_the_settings_asks_for_their_token_on_metrics_only():
    token = "tok-0123456789abcdef"
    assert isinstance(observer_for(ObserveSettings(enabled=False, token=token)), NullObserver)
    obs = observer_for(ObserveSettings(host="127.0.0.1", port=0, token=token))
    assert isinstance(obs, Observer)
    with obs:
        assert probe(url(obs, "/metrics")) == (False, "the token is needed")
        assert probe(url(obs, "/healthz"))[0]  # the probes stay open
    with observer_for(ObserveSettings(host="127.0.0.1", port=0)) as open_obs:
        assert probe(url(open_obs, "/metrics"))[0]


def test_two_observers_in_one_process_do_not_collide(make):
    a, b = make(), make()
    assert a.port != b.port and a.registry is not b.registry
    a.batch(**counts(records=5, labeled=5, mistakes=5, dead_letters=0))
    b.assigned([("examples", 0), ("examples", 1)])
    sa, sb = scrape(a), scrape(b)
    assert value(sa, "mistakes_total", **P0) == 5 and labelled(sb, "mistakes_total") == set()
    assert value(sa, "assigned_partitions") == 0 and value(sb, "assigned_partitions") == 2


def test_stop_frees_the_port(make):
    first = Observer(host="127.0.0.1", port=0)
    with first:
        port = first.port
        assert port != 0
        assert probe(url(first, "/healthz"))[0]
        with pytest.raises(RuntimeError):
            first.start()
    assert probe(f"http://127.0.0.1:{port}/healthz", timeout_s=1.0)[0] is False
    first.stop()  # idempotent
    again = make(port=port)
    assert again.port == port
    assert probe(url(again, "/healthz"))[0]


def test_drift_alarms_count_per_partition_and_follow_the_restored_statistics(make):
    obs = make()
    assert (P + "drifts_total", tuple(sorted(P0.items()))) not in scrape(obs)  # none before it shows
    obs.drift("examples", 0)
    obs.drift("examples", 0)
    obs.drift("examples", 1)
    s = scrape(obs)
    assert (value(s, "drifts_total", **P0), value(s, "drifts_total", **P1)) == (2, 1)
    obs.stats({**STATS, "drifts": 5})  # a restored state that raised 5 so far
    obs.drift("examples", 0)
    obs.stats({**STATS, "drifts": 4})  # never lowered
    assert value(scrape(obs), "drifts_total", **P0) == 6
    obs.forget([("examples", 0)])
    assert (P + "drifts_total", tuple(sorted(P0.items()))) not in scrape(obs)


def test_late_label_counts_follow_the_statistics_records(make):
    obs = make()
    where = {"topic": "examples", "partition": 0}
    obs.stats({**STATS, **where, "pending_labels": 7, "label_joins": 12, "label_expiries": 3})
    s = scrape(obs)
    assert value(s, "pending_labels", **P0) == 7
    assert (value(s, "label_joins_total", **P0), value(s, "label_expiries_total", **P0)) == (12, 3)
    obs.stats({**STATS, **where, "pending_labels": 2, "label_joins": 20, "label_expiries": 3})
    s = scrape(obs)
    assert value(s, "pending_labels", **P0) == 2 and value(s, "label_joins_total", **P0) == 20


def test_the_mix_gauges_follow_the_statistics_records_mix(make):
    obs = make()
    where = {"topic": "examples", "partition": 0}
    obs.stats({**STATS, **where})  # mixing off, or not mixed yet: no mix series
    assert labelled(scrape(obs), "mix_version") == set()
    mix = {"version": 3, "offset": 120, "k": 2, "mu": 0.25, "sum_mu_k": 1.5, "partitions": [0, 1],
           "staleness": 1}
    obs.stats({**STATS, **where, "mix": mix})
    s = scrape(obs)
    assert value(s, "mix_version", **P0) == 3 and value(s, "mix_staleness_epochs", **P0) == 1
    assert value(s, "mix_sum_mu_k", **P0) == 1.5
    obs.forget([("examples", 0)])
    assert labelled(scrape(obs), "mix_version") == set()


# ---------------------------------------------------------------------- a K-class worker's statistics
def class_stats(per_class: list[dict], partition: int = 0, **extra) -> dict:
    """A K-class worker's statistics record (README, "Statistics"): the binary keys, ``classes``,
    ``per_class`` and ``confusion`` (whose cells the metrics never read)."""
    names = [entry.get("class") for entry in per_class]
    return {**STATS, "partition": partition, "classes": names, "per_class": per_class,
            "confusion": [[0] * len(names) for _ in names], "intercept": None,
            "intercepts": [0.0] * len(names), **extra}


def counted(name: str, labeled: int, mistakes: int, predicted: int) -> dict:
    return {"class": name, "labeled": labeled, "mistakes": mistakes, "predicted": predicted}


def per_class_values(samples, part: dict, name: str) -> dict[str, float]:
    """The class label → value of the per-class series ``name`` of partition ``part``."""
    return {dict(labels)["class"]: value for (sample, labels), value in samples.items()
            if sample == P + name and {k: dict(labels)[k] for k in part} == part}


def test_a_k_class_record_sets_a_series_per_class_that_follows_its_counts(make):
    obs = make()
    obs.stats(STATS)  # a binary record: no class series, no classes gauge
    s = scrape(obs)
    assert labelled(s, "class_mistakes_total") == set() and labelled(s, "classes") == set()
    obs.stats(class_stats([counted("cat", 500, 20, 510), counted(7, 300, 15, 290),
                           counted("eel", 100, 5, 100)]))
    s = scrape(obs)
    assert value(s, "classes", **P0) == 3
    assert per_class_values(s, P0, "class_labeled_examples_total") == {"cat": 500, "7": 300, "eel": 100}
    assert per_class_values(s, P0, "class_mistakes_total") == {"cat": 20, "7": 15, "eel": 5}
    assert per_class_values(s, P0, "class_predicted_total") == {"cat": 510, "7": 290, "eel": 100}
    assert value(s, "mistake_bound", **P0) == STATS["bound"]  # the record's, 2(R/γ)² with K classes
    # a newer record raises them, a new class gets its series; a lower count never lowers one
    obs.stats(class_stats([counted("cat", 600, 22, 610), counted(7, 250, 15, 290),
                           counted("eel", 100, 5, 100), counted("fox", 1, 1, 0)]))
    s = scrape(obs)
    assert value(s, "classes", **P0) == 4
    assert per_class_values(s, P0, "class_labeled_examples_total") == {"cat": 600, "7": 300, "eel": 100,
                                                                       "fox": 1}
    assert per_class_values(s, P0, "class_predicted_total") == {"cat": 610, "7": 290, "eel": 100, "fox": 0}


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\n\"}\\\u202e"  # escapes, a line break, what ends a label


def test_class_labels_are_cleaned_bounded_and_the_scrape_parses(make):
    obs = make()
    obs.stats(class_stats([
        counted(f"cat{HOSTILE}", 5, 1, 4), counted("cat", 2, 1, 3),  # the same label once cleaned: summed
        counted("x" * 500, 7, 0, 7), counted("", 1, 0, 1),
        {"class": 2.5, "labeled": 9, "mistakes": 9, "predicted": 9},  # not a class name: no series
        {"class": "odd", "labeled": True, "mistakes": -3, "predicted": "9"},  # no count: 0
    ]))
    ok, text = probe(url(obs, "/metrics"))
    assert ok and "pwned" not in text and "\x1b" not in text and "\u202e" not in text
    s = scrape(obs)  # parses: the label values were escaped for the text format
    assert per_class_values(s, P0, "class_labeled_examples_total") == {
        'cat "}\\': 5, "cat": 2, "x" * 100: 7, "": 1, "odd": 0}
    obs.stats(class_stats([counted("cat\x07", 4, 1, 4), counted("cat", 2, 1, 3)]))  # cat and cat\a: one label
    assert per_class_values(scrape(obs), P0, "class_labeled_examples_total")["cat"] == 6


def test_forget_removes_the_per_class_series_of_revoked_partitions_only(make):
    obs = make()
    for part in (0, 1):
        obs.stats(class_stats([counted("cat", 5, 1, 5), counted("dog", 5, 1, 5)], partition=part))
    obs.forget([("examples", 0)])
    s = scrape(obs)
    for name in ("class_labeled_examples_total", "class_mistakes_total", "class_predicted_total", "classes"):
        held = {(dict(labels)["partition"], dict(labels).get("class")) for labels in labelled(s, name)}
        assert held and all(part == "1" for part, _ in held), name
    assert per_class_values(s, P1, "class_mistakes_total") == {"cat": 1, "dog": 1}
    # assigned again later: from 0, raised to its record's totals
    obs.stats(class_stats([counted("cat", 9, 2, 9)]))
    assert per_class_values(scrape(obs), P0, "class_mistakes_total") == {"cat": 2}


def test_promtool_reads_a_scrape_of_hostile_and_many_classes(make):
    import subprocess

    from tests.monitoring import tool

    obs = make()
    names = [f"cat{HOSTILE}", "x" * 500, "<b>&amp;</b>", "", *(f"c{i}" for i in range(200))]
    obs.stats(class_stats([counted(name, i + 1, i // 2, i) for i, name in enumerate(names)]))
    ok, text = probe(url(obs, "/metrics"))
    assert ok  # probe gives the page without its last line break
    proc = subprocess.run([tool("promtool"), "check", "metrics"], input=text + "\n", capture_output=True,
                          text=True, timeout=60, check=False)
    # promtool parses the page and lints it: no error, no finding (it names a line it cannot read)
    assert proc.returncode == 0 and proc.stdout + proc.stderr == "", proc.stdout + proc.stderr
    assert value(scrape(obs), "classes", **P0) == len(names)
    assert len(per_class_values(scrape(obs), P0, "class_mistakes_total")) == len(names)
