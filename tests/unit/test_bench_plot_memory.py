"""bench/bench_plot_memory.py measures what it says (its figures are quoted from a run, not here)."""

from __future__ import annotations

from bench.bench_plot_memory import main, statistics_record
from stream_perceptron.codec.outputs import decode
from stream_perceptron.commands.plot import PLOTTED, Thinned
from stream_perceptron.commands.watch import _History, is_stats_record


def test_the_record_is_a_statistics_record_and_plot_keeps_what_it_draws():
    record = decode(statistics_record())
    assert is_stats_record(record)
    history = _History(Thinned(10))
    history.add(record)
    (kept,) = history.labeled.kept()
    assert set(kept) == set(PLOTTED) and kept["seen"] == 20_000
    assert set(kept) < set(record)
    assert history.records == 1 and history.latest_ts == record["ts"]


def test_it_reports_bytes_held_each_way(capsys):
    out = main(["--records", "500"])
    assert out["plotted"] < out["whole"]
    assert "plot's fields" in capsys.readouterr().out
