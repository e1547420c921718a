"""``bench.pipe``'s pipes against the test broker. kafka-python's (sending per record or appending
each poll at once, decoding fetched batches the stock way or in one loop, as the worker's edge
does) and confluent-kafka's bare pipe each forward every record unchanged, in order;
confluent-kafka's codec pipe sends one prediction record per input, in order."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.pipe import confluent_pipe, kafka_settings, main, pipe  # noqa: E402
from stream_perceptron.commands.read import read_topic  # noqa: E402
from tests.integration.conftest import is_tansu  # noqa: E402
from tests.integration.helpers import send_all  # noqa: E402


@pytest.mark.parametrize(("append", "decode"), [(False, False), (True, False), (True, True)])
def test_the_kafka_python_pipe_forwards_every_record_unchanged(
    kafka_bootstrap: str, new_topic: Callable[..., str], append: bool, decode: bool
) -> None:
    kafka = kafka_settings(kafka_bootstrap)
    source, out = new_topic(1), new_topic(1)
    values = [b'{"x":[%d.5],"y":1,"id":%d}' % (i, i) for i in range(1_500)]
    send_all(kafka, source, values, partition=0)
    result = pipe(kafka, source, out, len(values), append=append, decode=decode)
    assert result["records"] == len(values)
    assert result["decoding"] is result["waking"] is decode  # the worker's consumer, or the stock one
    # every poll appended once the pipe's new producer knows the output topic: at start on tansu
    # (its metadata answers name every topic); Apache Kafka's name only the topics asked for, so
    # the first poll's records go through send, which fetches it
    first_poll = 0 if is_tansu(kafka_bootstrap) else kafka.max_poll_records
    if append:
        assert len(values) - first_poll <= result["appended"] <= len(values)
    else:
        assert result["appended"] == 0
    got = read_topic(kafka, out)
    assert [(p, o) for p, o, _, _ in got] == [(0, i) for i in range(len(values))]
    assert [key for _, _, key, _ in got] == [str(i).encode() for i in range(len(values))]
    assert [value["id"] for _, _, _, value in got] == list(range(len(values)))


def test_the_confluent_pipes_forward_every_record_or_its_prediction(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    pytest.importorskip("confluent_kafka")
    kafka = kafka_settings(kafka_bootstrap)
    source, bare, coded = new_topic(1), new_topic(1), new_topic(1)
    n = 1_500
    values = [b'{"x":[%d.5,-1],"y":%d,"id":%d}' % (i, 1 - 2 * (i % 2), i) for i in range(n)]
    send_all(kafka, source, values, partition=0)

    result = confluent_pipe(kafka, source, bare, n)
    assert (result["records"], result["codec"], result["rejected"]) == (n, False, 0)
    got = read_topic(kafka, bare)
    assert [(p, o, key) for p, o, key, _ in got] == [(0, i, str(i).encode()) for i in range(n)]
    assert [value["id"] for _, _, _, value in got] == list(range(n))

    result = confluent_pipe(kafka, source, coded, n, codec=True)
    assert (result["records"], result["codec"], result["rejected"]) == (n, True, 0)
    got = read_topic(kafka, coded)
    assert [(p, o, key) for p, o, key, _ in got] == [(0, i, str(i).encode()) for i in range(n)]
    # θ = linspace(-1, 1, 2) = [-1, 1], fixed: score = -(i + 0.5) - 1, never above the boundary
    first, second = got[0][3], got[1][3]
    assert first == {
        "topic": source, "partition": 0, "offset": 0, "key": "0", "id": 0, "prediction": -1,
        "score": -1.5, "label": 1, "mistake": True, "margin": -1.5 / 2**0.5, "updates": 1,
    }
    assert (second["score"], second["label"], second["mistake"]) == (-2.5, -1, False)
    assert [value["id"] for _, _, _, value in got] == list(range(n))
    assert {value["prediction"] for _, _, _, value in got} == {-1}
    # every positive record is a mistake of the fixed model: the running count, as `updates`
    assert [value["updates"] for _, _, _, value in got] == [i // 2 + 1 for i in range(n)]


def test_the_codec_pipe_answers_valid_records_only_and_says_it_ran_its_codec(
    kafka_bootstrap: str, new_topic: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("confluent_kafka")
    kafka = kafka_settings(kafka_bootstrap)
    source, out = new_topic(1), new_topic(1)
    values = [b'{"x":[]}' if i % 50 == 7 else b'{"x":[1,2],"y":1,"id":%d}' % i for i in range(500)]
    send_all(kafka, source, values, partition=0)
    result = main(["--bootstrap", kafka_bootstrap, "--input", source, "--output", out,
                   "--records", "500", "--client", "confluent-kafka", "--codec"])
    assert (result["records"], result["codec"], result["rejected"]) == (500, True, 10)
    assert '"codec": true' in capsys.readouterr().out  # the result line the benchmark reads
    got = read_topic(kafka, out)
    assert [value["offset"] for _, _, _, value in got] == [i for i in range(500) if i % 50 != 7]
    assert {value["score"] for _, _, _, value in got} == {1.0}  # θ = [-1, 1]


@pytest.mark.parametrize("flag", ["--append", "--decode"])
def test_append_and_decode_are_for_the_kafka_python_pipe_only(
    capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    with pytest.raises(SystemExit):
        main(["--bootstrap", "h:1", "--input", "i", "--output", "o", "--records", "1",
              "--client", "confluent-kafka", flag])
    assert f"{flag} is for --client kafka-python" in capsys.readouterr().err


def test_codec_is_for_the_confluent_pipe_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--bootstrap", "h:1", "--input", "i", "--output", "o", "--records", "1", "--codec"])
    assert "--codec is for --client confluent-kafka" in capsys.readouterr().err
