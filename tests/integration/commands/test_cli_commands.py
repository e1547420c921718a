"""The commands a user runs: demo, produce and broker, as processes."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys

import numpy as np
from PIL import Image

from stream_perceptron import Perceptron
from stream_perceptron.commands.broker import free_port
from stream_perceptron.commands.demo import led_source
from stream_perceptron.commands.read import read_topic
from stream_perceptron.sources import open_source
from tests.integration.helpers import predictions_by_offset, wait_for


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SP_")}
    env.update(extra)
    return env


def _cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stream_perceptron.cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_demo_runs_on_the_broker_and_writes_its_plot(kafka_bootstrap, tmp_path):
    # a second demo started in the same second gets topics, a group and a directory of its own
    env = _env(SP_KAFKA__BOOTSTRAP_SERVERS=kafka_bootstrap)
    cli = [sys.executable, "-m", "stream_perceptron.cli", "demo", "--out", str(tmp_path), "--limit"]
    other = subprocess.Popen([*cli, "500"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    proc = _cli(*cli[3:], "3000", env=env)
    other_out, other_err = other.communicate(timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert other.returncode == 0, other_err
    summary = dict(line.split(None, 1) for line in proc.stdout.splitlines() if line.strip()
                   and line.split()[0] in {"examples", "mistakes", "plot", "checkpoint"})
    assert summary["examples"].strip() == "3000"
    assert re.search(r"^examples\s+500$", other_out, re.MULTILINE), other_out
    assert len(list(tmp_path.glob("run-*"))) == 2
    # the core, run on the same records in order, makes the mistakes the demo reports
    source = list(open_source("river:Shuttle", limit=3000))
    core = Perceptron()
    core.learn_many(np.array([x for x, _ in source], dtype=np.float64), [y for _, y in source])
    assert int(summary["mistakes"]) == core.mistakes > 0
    png = summary["plot"].strip()
    with Image.open(png) as img:
        assert img.format == "PNG" and img.size == (1200, 700)
    assert os.path.exists(summary["checkpoint"].strip())


def test_produce_publishes_a_dataset_and_run_learns_it(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topic = new_topic()
    env = _env(SP_KAFKA__BOOTSTRAP_SERVERS=kafka.bootstrap_servers)
    proc = _cli("produce", "river:Phishing", "--topic", topic, "--unlabeled-every", "5", env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"sent 1250 records to {topic}" in proc.stdout
    preds, stats = new_topic(), new_topic()
    run = _cli("run", "--until-caught-up", env={
        **env, "SP_TOPICS__INPUT": topic, "SP_TOPICS__PREDICTIONS": preds,
        "SP_TOPICS__STATS": stats, "SP_TOPICS__DEAD_LETTER": new_topic(), "SP_OBSERVE__PORT": "0",
        "SP_KAFKA__GROUP_ID": kafka.group_id, "SP_KAFKA__SESSION_TIMEOUT_MS": "6000",
        "SP_KAFKA__HEARTBEAT_INTERVAL_MS": "1000", "SP_CHECKPOINT__DIR": str(tmp_path / "ck"),
    })
    assert run.returncode == 0, run.stderr
    got = predictions_by_offset(kafka, preds)
    assert len(got) == 1250
    assert sum(1 for (p,) in got.values() if p["label"] is None) == 250
    png = tmp_path / "stats.png"
    shown = _cli("plot", "--topic", stats, "--out", str(png), env=env)
    assert shown.returncode == 0, shown.stderr
    assert re.fullmatch(rf"wrote {re.escape(str(png))} from \d+ statistics records\n", shown.stdout)
    with Image.open(png) as img:
        assert img.format == "PNG" and img.size == (1200, 700)


def test_produce_sends_nothing_of_a_file_with_a_bad_row(kafka_settings, new_topic, tmp_path):
    # the file is read through before the first send: fixed and sent again, no record goes twice
    kafka = kafka_settings()
    topic = new_topic()
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,y\n1,2,1\n-1,-2,-1\n3,foo,1\n")
    env = _env(SP_KAFKA__BOOTSTRAP_SERVERS=kafka.bootstrap_servers)
    proc = _cli("produce", str(csv), "--topic", topic, env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"stream-perceptron: {csv}:4: column 'b' is not a number: 'foo'"
    csv.write_text("a,b,y\n1,2,1\n-1,-2,-1\n3,4,1\n")
    again = _cli("produce", str(csv), "--topic", topic, env=env)
    assert again.returncode == 0, again.stderr
    records = read_topic(kafka, topic)
    assert [(offset, value["id"], value["x"]) for _, offset, _, value in records] == [
        (0, 0, [1.0, 2.0]), (1, 1, [-1.0, -2.0]), (2, 2, [3.0, 4.0])]


def test_run_without_bootstrap_is_one_clear_line(tmp_path):
    proc = _cli("run", env=_env())
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "SP_KAFKA__BOOTSTRAP_SERVERS" in proc.stderr


def test_broker_command_listens_until_interrupted():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "stream_perceptron.cli", "broker", "--port", str(port)],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        def accepts() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        wait_for(accepts, 30, "the broker to listen")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
    finally:
        proc.kill()
        proc.communicate()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_multiclass_demo_on_the_embedded_broker_reports_what_its_checkpoint_holds(tmp_path):
    # no bootstrap configured: the demo starts the embedded broker, and stops it before it prints
    proc = _cli("demo", "--multiclass", "--limit", "1500", "--out", str(tmp_path), env=_env())
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    summary = dict(line.split(None, 1) for line in lines
                   if line.split()[0] in {"examples", "mistakes", "plot", "checkpoint"})
    table = lines[lines.index("class   labeled  mistakes  mistake rate") + 1:]
    per_class = {int(c): (int(n), int(m), float(r)) for c, n, m, r in (line.split() for line in table)}
    shown = _cli("checkpoint", "show", str(tmp_path / next(tmp_path.glob("run-*")).name / "checkpoints"),
                 env=_env())
    assert shown.returncode == 0, shown.stderr
    state = json.loads(shown.stdout)
    assert state["classes"] == list(range(10)) and state["seen"] == int(summary["examples"]) == 1500
    assert int(summary["mistakes"]) == state["mistakes"] == state["stats"]["mistakes"]
    assert per_class == {c["class"]: (c["labeled"], c["mistakes"], round(c["mistakes"] / c["labeled"], 4))
                         for c in state["stats"]["per_class"]}
    assert sum(n for n, _, _ in per_class.values()) == 1500
    # the K-class perceptron, run on the same records in order, makes the mistakes the demo reports
    source = list(led_source(1500))
    core = Perceptron(classes=list(range(10)))
    core.learn_many(np.array([x for x, _ in source], dtype=np.float64), [y for _, y in source])
    assert core.mistakes == state["mistakes"] > 0
    assert np.array_equal(np.asarray(state["weights"]), core.weights)
    with Image.open(summary["plot"].strip()) as img:
        assert img.format == "PNG" and img.size == (1200, 700)
    assert os.path.exists(summary["checkpoint"].strip())
