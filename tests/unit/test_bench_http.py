"""bench/bench_http.py measures what it says (its figures are quoted from a run, not here)."""

from __future__ import annotations

import pytest

from bench.bench_http import large_head, main, parse_args


def test_the_probe_head_is_the_reviews_and_never_ends():
    head = large_head()
    lines = head.split(b"\r\n")
    assert lines[0] == b"GET /metrics HTTP/1.1" and lines[-1] == b""  # the last line ended, not the head
    assert len(lines) == 101 and {len(line) + 2 for line in lines[1:-1]} == {65536}
    assert b"\r\n\r\n" not in head


def test_it_reports_each_server_before_during_and_after(capsys):
    report = main(["--connections", "3", "--seconds", "10"])
    assert [(r["server"], r["connections"]) for r in report["runs"]] == [("metrics", 3), ("dashboard", 3)]
    for run in report["runs"]:
        assert run["closed_by_server"] == 3 and run["answer_status"] == 200
        assert run["rss_before_kb"] > 0 and run["rss_peak_kb"] >= run["rss_before_kb"]
    assert "GET while held" in capsys.readouterr().out


def test_its_arguments_are_checked():
    with pytest.raises(SystemExit):
        parse_args(["--connections", "0"])
    assert parse_args(["--connections", "60,200"]).connections == [60, 200]
