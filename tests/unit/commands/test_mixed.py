"""``mixed``'s lines without a broker: the rows to score, the lines, and what --follow prints of
records read in turns (the model topic's reader replaced by a script of what each read returns;
tests/integration/commands/test_mixed.py reads a real one)."""

from __future__ import annotations

import logging
import threading

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

import stream_perceptron.commands.mixed as mixed
from stream_perceptron.cli import main
from stream_perceptron.errors import ModelTopicError
from stream_perceptron.model.mixing import Published, mix
from stream_perceptron.model.newest_mix import Adopted
from stream_perceptron.settings import Settings


def _record(p: int, epoch: int, weights: list[float], intercept: float = 0.5, topic: str = "in") -> bytes:
    m = mix([Published(p, np.array(weights), intercept, 1, epoch, 10 * epoch)])
    entry = {"offset": 10 * epoch, "epoch": epoch, "mix": m.record()}
    return orjson.dumps({"topic": topic, "partition": p, "state": {}, "log": [entry], "ts": 0.0})


class ScriptedTopic:
    """What each ``newer()`` returns, in turn; after the script, nothing, and ``stop`` is set."""

    def __init__(self, reads: list[list[bytes | None]], stop: threading.Event) -> None:
        self.reads, self.stop, self.closed = list(reads), stop, False

    def newer(self):
        if not self.reads:
            self.stop.set()
            return []
        return [("in:0", v) for v in self.reads.pop(0)]

    def close(self):
        self.closed = True


@pytest.fixture
def scripted(monkeypatch):
    """Run ``mixed_lines`` over a script of reads; returns the lines and the reader."""
    monkeypatch.setattr(mixed, "partition_count", lambda kafka, topic, timeout_s: 1)

    def run(reads, **kwargs):
        stop = threading.Event()
        topic = ScriptedTopic(reads, stop)
        monkeypatch.setattr(mixed, "KafkaModelTopic", lambda settings: topic)
        lines = list(mixed.mixed_lines(Settings(), stop=stop, poll_s=0.0, **kwargs))
        return lines, topic

    return run


def test_a_row_to_score_is_a_json_array_of_numbers():
    assert mixed.parse_row("[1, 2.5]") == [1.0, 2.5]
    for bad in ("[]", "{}", "1", '["a"]', "[true]", "[1e999]", "[NaN]", "nope"):
        with pytest.raises(ModelTopicError, match=r"a row is a JSON array of numbers, like \[0.5, 1.0\]"):
            mixed.parse_row(bad)


def test_a_bad_row_is_one_line_and_exit_2_before_any_cluster_is_asked():
    res = CliRunner().invoke(main, ["mixed", "--score", "[1, 2]", "--score", "[1,"],
                             env={"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1"})
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr == ("stream-perceptron: --score '[1,': a row is a JSON array of numbers, like"
                          " [0.5, 1.0]\n")


def test_a_line_carries_the_scores_and_predictions_of_the_rows():
    adopted = Adopted.from_record(orjson.loads(_record(3, 2, [1.0, -1.0], 0.25)))
    assert adopted is not None
    out = mixed.line(adopted, [[2.0, 1.0], [1.0, 2.0], [0.0, 0.25]])
    assert out["scores"] == [1.25, -0.75, 0.0] and out["predictions"] == [1, -1, -1]
    assert (out["topic"], out["partition"], out["epoch"], out["offset"]) == ("in", 3, 2, 20)
    assert "scores" not in mixed.line(adopted)
    with pytest.raises(ModelTopicError, match="--score row 2 has 3 values; the mix of in:3 has 2 weights"):
        mixed.line(adopted, [[1.0, 1.0], [1.0, 2.0, 3.0]])


def test_without_follow_each_partition_gives_its_newest_mix_in_partition_order(scripted):
    reads = [[_record(1, 1, [1.0]), _record(0, 1, [2.0]), _record(1, 2, [3.0]),
              _record(0, 1, [2.0], topic="b")]]
    lines, topic = scripted(reads)
    assert [(x["topic"], x["partition"], x["epoch"], x["weights"]) for x in lines] == [
        ("b", 0, 1, [2.0]), ("in", 0, 1, [2.0]), ("in", 1, 2, [3.0])]
    assert topic.closed


def test_follow_prints_each_new_mix_once_as_it_comes(scripted, caplog):
    reads = [[_record(0, 1, [1.0])], [], [_record(1, 1, [2.0]), _record(1, 2, [3.0])],
             [_record(0, 1, [1.0]), b"not json", None], [_record(0, 2, [4.0])]]
    with caplog.at_level(logging.WARNING):
        lines, _ = scripted(reads, follow=True, rows=[[2.0]])
    assert [(x["partition"], x["epoch"], x["scores"]) for x in lines] == [
        (0, 1, [2.5]), (1, 1, [4.5]), (1, 2, [6.5]), (0, 2, [8.5])]  # a repeated record: not again
    assert "not a model record" in caplog.text


def test_an_empty_topic_is_one_error_without_follow_and_waited_on_with_it(scripted, monkeypatch):
    with pytest.raises(ModelTopicError, match="the model topic model holds no mix yet"):
        scripted([[]])
    lines, _ = scripted([[], [], [_record(0, 1, [1.0])]], follow=True)
    assert [x["epoch"] for x in lines] == [1]
    monkeypatch.setattr(mixed, "partition_count", lambda kafka, topic, timeout_s: None)
    with pytest.raises(ModelTopicError, match=r"the model topic model does not exist \(SP_MIX__TOPIC\)"):
        list(mixed.mixed_lines(Settings()))
