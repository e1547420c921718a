"""Logging set-up: JSON lines on request, and secrets never in the logged settings."""

from __future__ import annotations

import json
import logging

from stream_perceptron.logs import setup_logging
from stream_perceptron.settings import load_settings, redacted


def test_json_lines(capsys):
    setup_logging("INFO", "json")
    logging.getLogger("stream_perceptron.worker").info("seen %d", 5, extra={"examples_per_s": 12.5})
    line = capsys.readouterr().err.strip()
    rec = json.loads(line)
    assert rec["msg"] == "seen 5" and rec["level"] == "INFO" and rec["examples_per_s"] == 12.5
    assert rec["logger"] == "stream_perceptron.worker"


def test_effective_settings_log_line_masks_secrets(capsys, monkeypatch):
    monkeypatch.setenv("SP_KAFKA__SASL_PASSWORD", "pa55-w0rd")
    setup_logging("INFO", "text")
    logging.getLogger("stream_perceptron.worker").info("effective settings: %s", redacted(load_settings()))
    err = capsys.readouterr().err
    assert "effective settings" in err and "pa55-w0rd" not in err and "**********" in err


def test_kafka_python_slow_task_notices_are_debug_only(capsys):
    notice = "Task <t> ran for 0.126s (>0.100s threshold). It is blocking the event loop -- ..."
    setup_logging("INFO", "text")
    logging.getLogger("kafka.net.selector").warning(notice)
    logging.getLogger("kafka.net.selector").warning("connection to broker lost")
    err = capsys.readouterr().err
    assert "blocking the event loop" not in err and "connection to broker lost" in err
    logging.getLogger("kafka").setLevel(logging.DEBUG)  # kafka-python's own debugging asked for
    try:
        logging.getLogger("kafka.net.selector").warning(notice)
    finally:
        logging.getLogger("kafka").setLevel(logging.WARNING)
    assert "DEBUG   kafka.net.selector: Task <t> ran for" in capsys.readouterr().err
