"""bench/bench_columns.py runs end to end on a few messages (the benchmark itself is not a test)."""

from __future__ import annotations

from bench.bench_columns import CONTENDERS, POLL_MESSAGES, main, polls, same_batches


def test_a_tiny_run_times_both_contenders_on_both_inputs(tmp_path, capsys):
    report = main(["--records", "2500", "--repeats", "2", "--json", str(tmp_path / "columns.json")])
    assert set(report["seconds"]) == {"1", "4"}
    for by_name in report["seconds"].values():
        assert set(by_name) == set(CONTENDERS)
        assert all(len(v) == 2 and min(v) > 0 for v in by_name.values())
    assert (tmp_path / "columns.json").read_text().startswith("{")
    out = capsys.readouterr().out
    assert "one partition" in out and "4 partitions, runs of 50" in out


def test_the_polls_hold_every_message_with_offsets_counted_per_partition():
    inputs = polls(2500, seed=1, partitions=4)
    assert [len(p) for p in inputs] == [POLL_MESSAGES, 500]
    ms = [m for p in inputs for m in p]
    assert [m.partition() for m in ms[:201:50]] == [0, 1, 2, 3, 0]
    assert [m.offset() for m in ms if m.partition() == 1][:3] == [0, 1, 2]
    assert same_batches(inputs)


def test_a_disagreement_is_found(monkeypatch):
    inputs = polls(300, seed=1, partitions=2)
    right = CONTENDERS["batches_of"]

    def one_dropped(messages):
        batches, errors = right(messages)
        batches[0].offsets.pop()
        return batches, errors

    monkeypatch.setitem(CONTENDERS, "broken", one_dropped)
    assert not same_batches(inputs)
