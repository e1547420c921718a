"""deploy/grafana/stream-perceptron.json: a Grafana dashboard that imports as it is (its data
source is a variable, its panels tile a 24-column grid without overlapping), shows what the
worker measures per input partition and per worker, filters every partition's series by the
``$topic`` and ``$partition`` variables, and names only metrics a worker exports. Its queries are
run on a real Prometheus scraping a real worker in tests/integration/test_prometheus_alerts.py."""

from __future__ import annotations

import re
from itertools import combinations
from typing import Any

from tests.monitoring import dashboard, dashboard_queries, named_metrics, observer_metrics

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
FILTER = '{topic=~"$topic", partition=~"$partition"}'

# what the dashboard must show: per partition, then per worker
PER_PARTITION = {
    "stream_perceptron_mistake_rate", "stream_perceptron_window_mistake_rate",
    "stream_perceptron_ewma_mistake_rate", "stream_perceptron_served_mistake_rate",
    "stream_perceptron_mistakes_total", "stream_perceptron_mistake_bound",
    "stream_perceptron_drifts_total", "stream_perceptron_margin_min", "stream_perceptron_margin_mean",
    "stream_perceptron_radius", "stream_perceptron_gamma", "stream_perceptron_examples_total",
    "stream_perceptron_consumer_lag",
}
PER_WORKER = {"stream_perceptron_checkpoint_age_seconds", "stream_perceptron_ready"}


def _panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dash["panels"] if p["type"] != "row"]


def test_it_shows_each_partitions_rates_geometry_throughput_lag_and_each_workers_checkpoints() -> None:
    named = named_metrics(dashboard_queries(dashboard()))
    assert PER_PARTITION | PER_WORKER <= named


def test_every_metric_it_names_is_exported() -> None:
    assert named_metrics(dashboard_queries(dashboard())) - set(observer_metrics()) == set()


def test_every_partitions_series_is_filtered_by_the_topic_and_partition_variables() -> None:
    """A metric labelled by partition appears only with the variables' filter; a worker's own
    metric (no partition label) never carries it."""
    exported = observer_metrics()
    for query in dashboard_queries(dashboard()):
        if query.startswith("label_values("):
            continue  # the variables themselves
        for match in re.finditer(r"\bstream_perceptron_[A-Za-z0-9_]+", query):
            name, rest = match.group(), query[match.end():]
            by_partition = "partition" in exported[name]
            assert rest.startswith(FILTER) == by_partition, f"{name} in {query!r}"


def test_its_data_source_and_variables_are_chosen_on_import() -> None:
    dash = dashboard()
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["topic"]["definition"] == "label_values(stream_perceptron_examples_total, topic)"
    assert variables["partition"]["definition"].endswith('{topic=~"$topic"}, partition)')
    for name in ("topic", "partition"):
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
        assert variables[name]["datasource"] == DATASOURCE
    for panel in _panels(dash):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs) and refs, panel["title"]
        assert all(t["datasource"] == DATASOURCE and t["expr"] for t in panel["targets"]), panel["title"]
    assert all(a["datasource"] == DATASOURCE for a in dash["annotations"]["list"] if "expr" in a)


def test_its_panels_tile_the_grid() -> None:
    dash = dashboard()
    ids = [p["id"] for p in dash["panels"]]
    assert len(set(ids)) == len(ids)
    boxes = [(p["title"], p["gridPos"]) for p in dash["panels"]]
    for title, g in boxes:
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, title
    for (a, g), (b, h) in combinations(boxes, 2):
        apart = (g["x"] + g["w"] <= h["x"] or h["x"] + h["w"] <= g["x"]
                 or g["y"] + g["h"] <= h["y"] or h["y"] + h["h"] <= g["y"])
        assert apart, f"{a!r} overlaps {b!r}"
