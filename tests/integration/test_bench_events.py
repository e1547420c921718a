"""The worker benchmark's events section on a few hundred records, against the test broker and
the session's schema registry: every format's worker puts out every prediction, and, learning the
same examples, makes the same mistakes (the figures themselves are quoted from a full run in
docs/performance.md, "Events through a feature spec")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_worker import main  # noqa: E402
from tests.integration.conftest import group_timeouts  # noqa: E402
from tests.schema_registry import Apicurio  # noqa: E402


@pytest.mark.timeout(300)
def test_a_tiny_run_measures_every_format_and_hash_setting_on_the_same_examples(
    kafka_bootstrap: str, schema_registry: Apicurio
) -> None:
    timeout = group_timeouts(kafka_bootstrap)["session_timeout_ms"]
    report = main(["--only", "events", "--records", "600", "--repeats", "1", "--backends", "kafka-python",
                   "--hash-bits", "none,12", "--bootstrap", kafka_bootstrap, "--registry",
                   schema_registry.url, "--session-timeout-ms", str(timeout), "--quiet"])
    runs = report["events"]["runs"]
    assert sorted((r["format"], r["hash_bits"] or 0) for r in runs) == [
        ("avro", 0), ("avro", 12), ("envelope", 0), ("envelope", 12), ("json", 0), ("json", 12)]
    assert all(r["complete"] and r["output_records"] == 600 and r["dead_letters"] == 0 for r in runs)
    for bits in (None, 12):  # the same examples in every format: the same mistakes
        assert len({r["mistakes"] for r in runs if r["hash_bits"] == bits}) == 1
    judged = {t["target"].split()[0]: t for t in report["targets"]}
    assert set(judged) == {"json", "avro"}  # at the first hash setting only
    assert all(t["value"] is None or t["value"] > 0 for t in judged.values())  # 600 records: maybe no rate
