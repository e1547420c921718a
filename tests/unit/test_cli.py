"""The command line: fit, checkpoint show, and how bad settings are reported."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from click.testing import CliRunner

from stream_perceptron.cli import main
from stream_perceptron.settings import Settings


def run(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env or {}, catch_exceptions=False)


def test_fit_phishing_reports_passes_and_writes_a_checkpoint(tmp_path):
    res = run("fit", "river:Phishing", "--passes", "2", "--checkpoint-dir", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert "pass 1: 217 mistakes" in res.output  # the same count river and scikit-learn make
    assert "R = " in res.output and "checkpoint: " in res.output
    shown = run("checkpoint", "show", str(tmp_path))
    data = json.loads(shown.stdout)
    assert {"weights", "intercept", "mistakes", "seen", "labeled", "offsets"} <= set(data)
    assert data["seen"] == data["labeled"] == 2 * 1250
    assert len(data["weights"]) == 9
    assert "partitions" not in data  # a `fit` checkpoint alone shows as it always did


def test_fit_separable_converges_within_the_bound(tmp_path):
    res = run("fit", "separable:d=5,gamma=0.1,n=2000,seed=1", "--no-fit-intercept",
              "--passes", "100", "--checkpoint-dir", str(tmp_path))
    assert res.exit_code == 0, res.output
    line = next(s for s in res.output.splitlines() if s.startswith("gamma = "))
    bound = float(line.split("bound (R/gamma)^2 = ")[1].split(";")[0])
    total = int(line.split("mistakes in all = ")[1])
    assert 0 < total <= bound
    passes = [s for s in res.output.splitlines() if s.startswith("pass ")]
    assert passes[-1].split(": ")[1].startswith("0 mistakes") and len(passes) < 100  # stopped after it
    assert all(not p.split(": ")[1].startswith("0 mistakes") for p in passes[:-1])


def test_fit_csv(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,y\n1,2,1\n-1,-2,-1\n2,1,1\n")
    res = run("fit", str(csv), "--epochs", "5", "--checkpoint-dir", str(tmp_path / "ck"))
    assert res.exit_code == 0, res.output
    assert "3 examples" in res.output


def test_fit_refuses_what_the_worker_would_refuse(tmp_path):
    # a value past SP_LIMITS__MAX_ABS_VALUE would give an infinite R, and a checkpoint the worker
    # cannot start from; fit says which example, as the worker would
    csv = tmp_path / "big.csv"
    csv.write_text("a,b,y\n1,2,1\n1e200,2,-1\n")
    res = run("fit", str(csv), "--checkpoint-dir", str(tmp_path / "ck"))
    assert res.exit_code == 1
    assert res.output.strip() == (
        f"stream-perceptron: {csv}: example 2: x has a value of magnitude 1e+200, over the limit"
        " of 1e+12 (SP_LIMITS__MAX_ABS_VALUE)"
    )
    assert not (tmp_path / "ck").exists()


def test_fit_with_a_positive_class_no_label_has_is_refused(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,y\n1,1\n-1,0\n")
    res = run("fit", str(csv), "--checkpoint-dir", str(tmp_path / "ck"),
              env={"SP_LIMITS__POSITIVE_CLASS": "spam"})
    assert res.exit_code == 1
    assert ("no label is the positive class 'spam' (SP_LIMITS__POSITIVE_CLASS or [limits] in --config)"
            in res.output)
    assert not (tmp_path / "ck").exists()


def test_fit_reads_labels_by_both_class_names(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,y\n1,cat\n-1,dog\n2,cow\n")
    res = run("fit", str(csv), "--checkpoint-dir", str(tmp_path / "ck"),
              env={"SP_LIMITS__POSITIVE_CLASS": "cat", "SP_LIMITS__NEGATIVE_CLASS": "dog"})
    assert res.exit_code == 1
    assert res.output.strip() == (f"stream-perceptron: {csv}:4: label 'cow' is neither"
                                  " the positive class 'cat' nor the negative class 'dog'"
                                  " (SP_LIMITS__POSITIVE_CLASS, SP_LIMITS__NEGATIVE_CLASS)")


def test_fit_writes_its_own_directory_not_the_workers(tmp_path, monkeypatch):
    # a worker's directory holding fit's model would make the worker start from it
    monkeypatch.chdir(tmp_path)
    res = run("fit", "separable:d=3,n=50", env={"SP_CHECKPOINT__DIR": str(tmp_path / "worker")})
    assert res.exit_code == 0, res.output
    assert "checkpoint: fit-checkpoints/ckpt-000000000001.json" in res.output
    assert (tmp_path / "fit-checkpoints").is_dir() and not (tmp_path / "worker").exists()


def test_a_second_fit_into_a_directory_is_refused_unless_asked_to_replace(tmp_path):
    ck = tmp_path / "ck"
    first = run("fit", "separable:d=3,n=50,seed=1", "--checkpoint-dir", str(ck))
    assert first.exit_code == 0, first.output
    before = {p.name: p.read_bytes() for p in ck.iterdir()}
    old_id = json.loads(run("checkpoint", "show", str(ck)).stdout)["model_id"]

    # refused before the source is read (this one does not exist): one line, exit 2
    again = run("fit", str(tmp_path / "no-such.csv"), "--checkpoint-dir", str(ck))
    assert again.exit_code == 2
    assert again.output == (
        f"stream-perceptron: {ck} already holds a model (1 checkpoint files, the newest"
        " ckpt-000000000001.json): name another --checkpoint-dir, or pass --replace to move them"
        " aside first\n")
    assert {p.name: p.read_bytes() for p in ck.iterdir()} == before

    replaced = run("fit", "separable:d=4,n=50,seed=2", "--checkpoint-dir", str(ck), "--replace")
    assert replaced.exit_code == 0, replaced.output
    [aside] = [p for p in ck.iterdir() if p.is_dir()]
    assert aside.name.startswith("replaced-")
    assert f"the checkpoints the directory held before: moved to {aside}" in replaced.output
    assert {p.name: p.read_bytes() for p in aside.iterdir()} == {
        name: data for name, data in before.items() if name.startswith("ckpt-")}
    assert sorted(p.name for p in ck.glob("ckpt-*.json")) == ["ckpt-000000000001.json"]
    shown = json.loads(run("checkpoint", "show", str(ck)).stdout)
    assert len(shown["weights"]) == 4 and shown["model_id"] != old_id  # the new model only


def test_bad_setting_is_one_line_and_exit_2():
    proc = subprocess.run(
        [sys.executable, "-m", "stream_perceptron.cli", "fit", "river:Phishing"],
        env={"SP_CHECKPOINT__EVERY_EXAMPLES": "-3", "PATH": ""},
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "SP_CHECKPOINT__EVERY_EXAMPLES" in lines[0]


def test_bad_source_is_one_line(tmp_path):
    res = CliRunner().invoke(main, ["fit", "nope:thing", "--checkpoint-dir", str(tmp_path)])
    assert res.exit_code == 1
    assert res.stderr.count("\n") == 1 and "stream-perceptron:" in res.stderr


def test_checkpoint_show_on_an_empty_directory(tmp_path):
    res = CliRunner().invoke(main, ["checkpoint", "show", str(tmp_path)])
    assert res.exit_code == 1 and "no valid checkpoint" in res.stderr


def _partition_states(directory, *keys):
    from stream_perceptron.state.directory import DirectoryStore
    from tests.partition_states import partition_state

    store = DirectoryStore(directory)
    states = {}
    for i, (topic, partition) in enumerate(keys):
        state = partition_state(topic, partition, 100 + i, seed=i, rows=30 + i)
        store.save(state, store.claim(topic, partition))
        states[f"{topic}:{partition}"] = state
    return states


def test_checkpoint_show_prints_each_partition_of_a_directory(tmp_path):
    states = _partition_states(tmp_path, ("in", 0), ("in", 1), ("other", 0))
    seed = run("fit", "separable:d=4,n=50,seed=1", "--checkpoint-dir", str(tmp_path))
    assert seed.exit_code == 0, seed.output
    shown = json.loads(run("checkpoint", "show", str(tmp_path)).stdout)
    assert sorted(shown["partitions"]) == ["in:0", "in:1", "other:0"]
    for key, state in states.items():
        part = shown["partitions"][key]
        assert part["weights"] == state.model["weights"] and part["intercept"] == state.model["intercept"]
        assert part["mistakes"] == state.model["mistakes"]
        assert (part["seen"], part["labeled"]) == (state.stats["seen"], state.stats["labeled"])
        assert part["next_offset"] == next(iter(next(iter(state.offsets.values())).values()))
        assert part["model_id"] == state.model_id and part["path"].endswith("ckpt-000000000001.json")
    assert shown["initial_model"]["path"] == str(tmp_path / "ckpt-000000000001.json")
    assert shown["seed"] == shown["initial_model"]  # the old name, kept
    assert "weights" not in shown  # three partitions: no top-level model


def test_checkpoint_show_of_one_partition_keeps_the_top_level_keys(tmp_path):
    (state,) = _partition_states(tmp_path, ("in", 3)).values()
    shown = json.loads(run("checkpoint", "show", str(tmp_path)).stdout)
    assert list(shown["partitions"]) == ["in:3"]
    part = shown["partitions"]["in:3"]
    assert {k: v for k, v in shown.items() if k != "partitions"} == part
    assert {"path", "seq", "created", "model_id", "config", "fingerprint", "weights", "intercept",
            "mistakes", "seen", "labeled", "offsets", "stats", "next_offset"} <= set(part)
    assert shown["offsets"] == {"in": {"3": 100}} and shown["next_offset"] == 100
    assert "seed" not in shown and "initial_model" not in shown


def test_checkpoint_show_of_a_partition_whose_files_are_all_damaged_is_one_line(tmp_path):
    _partition_states(tmp_path, ("in", 0))
    path = tmp_path / "partitions" / "in" / "0" / "ckpt-000000000001.json"
    path.write_bytes(path.read_bytes()[:-10])
    res = CliRunner().invoke(main, ["checkpoint", "show", str(tmp_path)])
    warning, error = res.stderr.strip().splitlines()  # the error points at the warning: why
    assert res.exit_code == 1 and f"skipping checkpoint {path}: truncated" in warning
    assert error.startswith("stream-perceptron: none of the 1 checkpoint files in ")


@pytest.mark.parametrize("args", [[], [".", "--topic", "state"], [".", "--bootstrap-servers", "a:1"]])
def test_checkpoint_show_takes_a_directory_or_a_topic(args):
    res = CliRunner().invoke(main, ["checkpoint", "show", *args])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("stream-perceptron: give a checkpoint DIRECTORY, or --topic TOPIC")


def test_checkpoint_show_of_a_topic_needs_a_cluster_and_says_which_is_unreachable():
    res = CliRunner().invoke(main, ["checkpoint", "show", "--topic", "state"])
    assert res.exit_code == 2 and "SP_KAFKA__BOOTSTRAP_SERVERS is not set" in res.stderr
    res = CliRunner().invoke(main, ["checkpoint", "show", "--topic", "state", "--bootstrap-servers",
                                    "127.0.0.1:1"])
    assert res.exit_code == 1 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("stream-perceptron: cannot reach Kafka (127.0.0.1:1: ")


def test_run_reports_a_kafka_failure_that_stopped_the_worker_in_one_line(tmp_path, monkeypatch):
    from stream_perceptron.errors import KafkaEdgeError
    from stream_perceptron.worker.loop import Worker

    def failing_run(self, until=None):
        raise KafkaEdgeError("sending to predictions failed: MessageSizeTooLargeError: 1400000 bytes")

    monkeypatch.setattr(Worker, "run", failing_run)
    res = CliRunner().invoke(main, ["run"], env={"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1",
                                                 "SP_CHECKPOINT__DIR": str(tmp_path),
                                                 "SP_OBSERVE__ENABLED": "false"})
    assert res.exit_code == 1
    assert res.stderr.strip().splitlines()[-1] == (
        "stream-perceptron: sending to predictions failed: MessageSizeTooLargeError: 1400000 bytes")
    assert "Traceback" not in res.stderr


def test_run_bounds_its_shutdown_and_a_worker_made_elsewhere_is_not_bounded(tmp_path, monkeypatch):
    # `run` owns its process: SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S applies; a worker made by any
    # other program (the demo) must not exit that program's process
    from stream_perceptron.worker.loop import Worker

    bounds: list[float] = []
    monkeypatch.setattr(Worker, "run",
                        lambda self, until=None: bounds.append(self.shutdown.deadline.seconds) or 0)
    res = CliRunner().invoke(main, ["run"], env={"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1",
                                                 "SP_CHECKPOINT__DIR": str(tmp_path),
                                                 "SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S": "7.5",
                                                 "SP_OBSERVE__ENABLED": "false"})
    assert res.exit_code == 0 and bounds == [7.5]
    elsewhere = Worker(Settings(checkpoint={"dir": str(tmp_path), "shutdown_timeout_s": 7.5}))  # as demo.py
    assert elsewhere.shutdown.deadline.seconds == math.inf


def test_run_serves_metrics_behind_sp_observe_token_and_the_probes_open(tmp_path, monkeypatch):
    from stream_perceptron.worker.loop import Worker
    from tests.http_raw import request

    token = "run-token-0123456789abcdef"
    statuses: list[int] = []

    def serve_once(self, until=None):
        self.observer.start()
        try:
            port = self.observer.port
            statuses.extend([request(port, "GET", "/metrics").status,
                             request(port, "GET", "/metrics", f"Authorization: Bearer {token}").status,
                             request(port, "GET", "/healthz").status])
        finally:
            self.observer.stop()
        return 0

    monkeypatch.setattr(Worker, "run", serve_once)
    res = CliRunner().invoke(main, ["run"], env={"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1",
                                                 "SP_CHECKPOINT__DIR": str(tmp_path),
                                                 "SP_OBSERVE__HOST": "127.0.0.1", "SP_OBSERVE__PORT": "0",
                                                 "SP_OBSERVE__TOKEN": token})
    assert res.exit_code == 0, res.output
    assert statuses == [401, 200, 200]


def test_dashboard_hands_sp_dashboard_token_to_its_server(monkeypatch):
    seen: dict[str, object] = {}
    monkeypatch.setattr("stream_perceptron.commands.dashboard.run_dashboard",
                        lambda *args, **kwargs: seen.update(kwargs) or 0)
    res = CliRunner().invoke(main, ["dashboard"],
                             env={**_CLUSTER, "SP_DASHBOARD__TOKEN": "dash-token-0123456789"})
    assert res.exit_code == 0 and seen["token"] == "dash-token-0123456789"
    res = CliRunner().invoke(main, ["dashboard"], env=_CLUSTER)
    assert res.exit_code == 0 and seen["token"] is None


def test_run_writes_the_client_lines_held_back_before_its_last_line(tmp_path, monkeypatch):
    import logging

    from stream_perceptron.errors import KafkaEdgeError
    from stream_perceptron.worker.loop import Worker

    def outage_then_failure(self, until=None):
        for node in range(1, 5):
            logging.getLogger("kafka.conn").warning("node %d: connection refused", node)
        raise KafkaEdgeError("flush failed after 5 attempts: 3 records not acknowledged")

    monkeypatch.setattr(Worker, "run", outage_then_failure)
    res = CliRunner().invoke(main, ["run"], env={"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1",
                                                 "SP_CHECKPOINT__DIR": str(tmp_path),
                                                 "SP_OBSERVE__ENABLED": "false"})
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 1
    assert [ln.split("kafka.conn: ")[1] for ln in lines if "kafka.conn" in ln] == [
        "node 1: connection refused", "node 4: connection refused (2 similar suppressed)"]
    assert lines[-1] == "stream-perceptron: flush failed after 5 attempts: 3 records not acknowledged"


def test_run_on_a_backend_whose_package_is_missing_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "stream_perceptron.kafka.confluent_edge", None)  # import fails
    res = CliRunner().invoke(main, ["run"], env={"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1",
                                                 "SP_KAFKA__BACKEND": "confluent-kafka",
                                                 "SP_CHECKPOINT__DIR": str(tmp_path),
                                                 "SP_OBSERVE__ENABLED": "false"})
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith(
        "stream-perceptron: SP_KAFKA__BACKEND=confluent-kafka needs the confluent-kafka package")


def test_run_refuses_a_checkpoint_directory_it_cannot_create_in_one_line(tmp_path):
    (tmp_path / "afile").write_text("")
    res = CliRunner().invoke(main, ["run"], env={"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1",
                                                 "SP_CHECKPOINT__DIR": str(tmp_path / "afile" / "ck"),
                                                 "SP_OBSERVE__ENABLED": "false"})
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert "afile/ck cannot be used: Not a directory" in res.stderr.strip().splitlines()[-1]


def test_run_refuses_an_unreadable_newest_checkpoint_in_one_line(tmp_path):
    (tmp_path / "ckpt-000000000001.json").mkdir()  # reading it fails with an OSError
    res = CliRunner().invoke(main, ["run"], env={"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1",
                                                 "SP_CHECKPOINT__DIR": str(tmp_path),
                                                 "SP_OBSERVE__ENABLED": "false"})
    assert res.exit_code == 1
    last = res.stderr.strip().splitlines()[-1]  # after the log line of the effective settings
    assert last.startswith("stream-perceptron: cannot read checkpoint ") and "Is a directory" in last
    assert "Traceback" not in res.stderr


def test_demo_with_an_output_directory_it_cannot_write_stops_before_it_starts(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    res = CliRunner().invoke(main, ["demo", "--out", str(blocker / "out")],
                             env={"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1"})
    assert res.exit_code == 1
    assert res.output.startswith("stream-perceptron: cannot write the demo's output to ")
    assert "(--out)" in res.output and res.output.count("\n") == 1  # one line, nothing run


def test_multiclass_demo_with_a_source_stops_before_it_starts(tmp_path):
    res = CliRunner().invoke(main, ["demo", "--multiclass", "--source", "river:Phishing", "--out",
                                    str(tmp_path)], env={"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1"})
    assert res.exit_code == 2
    assert res.output == ("stream-perceptron: --multiclass streams synth.LED; --source names the"
                          " binary demo's dataset: give one\n")
    assert not list(tmp_path.iterdir())  # nothing made


def test_health_asks_the_host_the_worker_serves_on():
    # a worker bound to one address (not loopback) is probed there; a wildcard on loopback
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Ready(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"ok": true, "reason": "' + self.path.encode() + b'"}')

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.2", 0), Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        res = run("health", env={"SP_OBSERVE__HOST": "127.0.0.2", "SP_OBSERVE__PORT": str(port)})
        assert res.exit_code == 0, res.output
        assert res.output.startswith(f"ok: http://127.0.0.2:{port}/readyz")
        wildcard = run("health", "--live", env={"SP_OBSERVE__HOST": "0.0.0.0", "SP_OBSERVE__PORT": str(port)})
        assert wildcard.exit_code == 1 and f"http://127.0.0.1:{port}/healthz" in wildcard.output
    finally:
        server.shutdown()
        server.server_close()


def test_health_with_an_invalid_setting_is_unhealthy_not_exit_2():
    # a container's HEALTHCHECK takes 1 as unhealthy and reserves 2
    res = run("health", env={"SP_OBSERVE__PORT": "abc"})
    assert res.exit_code == 1
    assert res.output == (
        "stream-perceptron: invalid setting SP_OBSERVE__PORT (observe.port): Input should be"
        " a valid integer, unable to parse string as an integer (got 'abc')\n"
    )
    assert run("run", env={"SP_OBSERVE__PORT": "abc"}).exit_code == 2  # elsewhere, 2 as ever


_CLUSTER = {"SP_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1", "SP_OBSERVE__ENABLED": "false"}


@pytest.mark.parametrize(("error", "code"), [
    ("SettingsError", 2),  # a setting to fix: a restart alone fails again
    ("KafkaAuthError", 2),
    ("CheckpointError", 2),
    ("CheckpointMismatchError", 2),
    ("CheckpointUnreadableError", 1),  # an I/O error: a restart may succeed
    ("KafkaEdgeError", 1),  # Kafka failed after its retries: a restart replays the batch
    ("UndeliveredError", 1),
    ("StreamPerceptronError", 1),
])
def test_run_exits_with_the_code_of_its_error_kind(tmp_path, monkeypatch, error, code):
    from stream_perceptron import errors
    from stream_perceptron.worker.loop import Worker

    def failing_run(self, until=None):
        raise getattr(errors, error)(f"a {error}")

    monkeypatch.setattr(Worker, "run", failing_run)
    res = CliRunner().invoke(main, ["run"], env={**_CLUSTER, "SP_CHECKPOINT__DIR": str(tmp_path)})
    assert res.exit_code == code
    assert res.stderr.strip().splitlines()[-1] == f"stream-perceptron: a {error}"


@pytest.mark.parametrize(("command", "target", "error", "code"), [
    # every command but run: any error of the package is a failure of the moment (1), an
    # interrupted produce is 130
    (["fit", "separable:d=2,n=10"], "stream_perceptron.commands.fit.fit_source", "CheckpointError", 1),
    (["fit", "separable:d=2,n=10"], "stream_perceptron.commands.fit.fit_source", "SettingsError", 1),
    (["fit", "separable:d=2,n=10"], "stream_perceptron.commands.fit.fit_source", "CheckpointExistsError", 2),
    (["produce", "separable:d=2,n=10"], "stream_perceptron.kafka.admin.ensure_topics", "KafkaAuthError", 1),
    (["produce", "separable:d=2,n=10"], "stream_perceptron.commands.produce.produce_source",
     "ProduceInterrupted", 130),
    (["watch"], "stream_perceptron.commands.watch.run_watch", "NoStatsError", 1),
    (["watch"], "stream_perceptron.commands.watch.run_watch", "KafkaAuthError", 1),
    (["plot"], "stream_perceptron.commands.watch.run_plot", "KafkaAuthError", 1),
    (["dashboard", "--port", "0"], "stream_perceptron.commands.dashboard.run_dashboard", "OutputError", 1),
    (["dashboard"], "stream_perceptron.commands.dashboard.run_dashboard", "KafkaAuthError", 1),
    (["demo"], "stream_perceptron.commands.demo.run_demo", "SettingsError", 1),
    (["broker", "--port", "1"], "stream_perceptron.commands.broker.EmbeddedBroker.start", "BrokerError", 1),
    (["checkpoint", "show", "."], "stream_perceptron.state.stored.StateFiles.load",
     "CheckpointError", 1),
])
def test_the_other_commands_exit_with_the_code_of_their_error_kind(
        tmp_path, monkeypatch, command, target, error, code):
    import signal

    from stream_perceptron import errors

    def failing(*args, **kwargs):
        raise getattr(errors, error)(f"a {error}")

    monkeypatch.setattr("stream_perceptron.kafka.admin.ensure_topics", lambda *a, **k: None)  # no broker
    monkeypatch.setattr(target, failing)
    monkeypatch.chdir(tmp_path)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}  # broker sets them
    try:
        res = CliRunner().invoke(main, command, env={**_CLUSTER, "SP_CHECKPOINT__DIR": str(tmp_path)})
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert res.exit_code == code, res.output
    assert res.stderr.strip().splitlines()[-1] == f"stream-perceptron: a {error}"


def test_a_cluster_command_without_a_bootstrap_names_the_variable_to_set():
    res = run("watch")
    assert res.exit_code == 2
    assert res.output == ("stream-perceptron: SP_KAFKA__BOOTSTRAP_SERVERS is not set"
                          " (nor bootstrap_servers under [kafka] in --config)\n")


def test_checkpoint_export_writes_rivers_and_scikit_learns_perceptron_of_a_fit(tmp_path):
    """Issue 54: the model of a fit goes out with its weights, intercept, feature order and classes."""
    import pickle

    import joblib
    import pandas as pd
    from river import datasets
    from river import linear_model as river_lm
    from sklearn.linear_model import Perceptron as SkPerceptron

    from stream_perceptron import Perceptron
    from stream_perceptron.state.stored import StateFiles

    assert run("fit", "river:Phishing", "--checkpoint-dir", str(tmp_path / "ck")).exit_code == 0
    for to, name in (("river", "phishing.pkl"), ("sklearn", "phishing.joblib")):
        res = run("checkpoint", "export", "--to", to, "--checkpoint-dir", str(tmp_path / "ck"),
                  str(tmp_path / name))
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["classes"] == [False, True]
    model = Perceptron()
    model.set_state(StateFiles(tmp_path / "ck").load().model)
    rows = list(datasets.Phishing())
    with (tmp_path / "phishing.pkl").open("rb") as f:
        theirs = pickle.load(f)  # noqa: S301  # the file this test wrote
    assert isinstance(theirs, river_lm.Perceptron)
    assert list(theirs.weights.values()) == model.weights.tolist() and theirs.intercept == model.intercept
    assert list(theirs.weights) == list(rows[0][0])
    sk = joblib.load(tmp_path / "phishing.joblib")
    assert isinstance(sk, SkPerceptron) and sk.coef_[0].tolist() == model.weights.tolist()
    X = pd.DataFrame([x for x, _ in rows])
    ours = [model.predict_one(x) for x, _ in rows]
    assert [theirs.predict_one(x) for x, _ in rows] == ours == sk.predict(X).tolist()


def test_checkpoint_export_names_the_partition_of_a_directory_of_several(tmp_path):
    import pickle

    states = _partition_states(tmp_path, ("in", 0), ("in", 1))
    export = ["checkpoint", "export", "--to", "river", "--checkpoint-dir", str(tmp_path)]
    res = CliRunner().invoke(main, [*export, str(tmp_path / "m.pkl")])
    assert res.exit_code == 1
    assert "holds the states of 2 partitions (in:0, in:1): name one with --partition" in res.stderr
    res = run(*export, "--partition", "in:1", str(tmp_path / "m.pkl"))
    assert res.exit_code == 0, res.output
    with (tmp_path / "m.pkl").open("rb") as f:
        assert list(pickle.load(f).weights.values()) == states["in:1"].model["weights"]  # noqa: S301
    res = CliRunner().invoke(main, [*export, "--partition", "in:7", str(tmp_path / "m.pkl")])
    assert res.exit_code == 1 and "no valid state of in:7" in res.stderr
