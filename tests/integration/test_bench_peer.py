"""``bench.bench_peer`` against the test broker, on a few records: every contender puts out a
prediction per record and gets a rate and a ratio; the Quix Streams + river peer where its
environment is there (``make peer-venv``). The benchmark itself is not a test."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_peer import PEER, contenders, main  # noqa: E402
from bench.worker.contenders import peer_python  # noqa: E402

pytest.importorskip("confluent_kafka")


def test_each_contender_gets_its_settings():
    eos = "exactly-once:SP_OUTPUT__GUARANTEE=exactly-once,SP_CHECKPOINT__STORE=kafka"
    which = contenders([2000, 10000], [eos], peer=True)
    assert list(which.values())[0] is None and list(which)[0] == PEER
    every = which["worker (confluent-kafka), checkpoint every 10,000"]
    assert every == {"SP_CHECKPOINT__EVERY_EXAMPLES": "10000"}
    assert which["worker (confluent-kafka), exactly-once"] == {
        "SP_CHECKPOINT__EVERY_EXAMPLES": "2000", "SP_OUTPUT__GUARANTEE": "exactly-once",
        "SP_CHECKPOINT__STORE": "kafka"}


def test_a_tiny_run_of_the_workers_puts_out_every_prediction(kafka_bootstrap: str, tmp_path: Path):
    out = main(["--bootstrap", kafka_bootstrap, "--records", "3000", "--repeats", "1", "--every", "500,2000",
                "--no-peer", "--json", str(tmp_path / "peer.json")])
    assert all(r["complete"] and r["rate"] > 0 for rs in out["runs"].values() for r in rs)
    first = out["ratios"]["worker (confluent-kafka), checkpoint every 500"]
    assert first["ratio"] == pytest.approx(1.0) and (tmp_path / "peer.json").is_file()


def test_the_peer_puts_out_a_prediction_per_record(kafka_bootstrap: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    if peer_python() is None:  # `make test` makes .venv-peer; in CI its absence is a failure
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no Quix Streams here (make peer-venv)")
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the contenders' temporary files go here
    out = main(["--bootstrap", kafka_bootstrap, "--records", "2000", "--repeats", "1", "--every", "1000"])
    peer = out["runs"][PEER][0]
    assert peer["complete"] and peer["rate"] > 0 and out["ratios"][PEER]["ratio"] == pytest.approx(1.0)
    assert not list(temp.glob("peer-quix-state-*"))  # Quix's state directory is removed after the run
