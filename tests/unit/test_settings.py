"""Settings: environment, TOML, precedence, one clear line per bad value, secrets masked."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from stream_perceptron.errors import SettingsError
from stream_perceptron.settings import load_settings, redacted


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os
    for name in list(os.environ):
        if name.startswith("SP_"):
            monkeypatch.delenv(name)


def test_defaults():
    s = load_settings()
    assert s.topics.input == "examples" and s.kafka.bootstrap_servers is None
    assert s.model.fit_intercept is True


def test_limit_settings_default_to_the_codecs_limits_and_set_every_one():
    from dataclasses import fields

    from stream_perceptron.codec.limits import Limits

    s = load_settings()
    assert Limits(**s.limits.model_dump()) == Limits()
    assert set(s.limits.model_dump()) == {f.name for f in fields(Limits)}


def test_environment_with_nested_delimiter(monkeypatch):
    monkeypatch.setenv("SP_KAFKA__BOOTSTRAP_SERVERS", "broker:9092")
    monkeypatch.setenv("SP_KAFKA__SESSION_TIMEOUT_MS", "6000")
    monkeypatch.setenv("SP_KAFKA__HEARTBEAT_INTERVAL_MS", "1000")
    monkeypatch.setenv("SP_TOPICS__INPUT", "in")
    monkeypatch.setenv("SP_CHECKPOINT__EVERY_EXAMPLES", "500")
    s = load_settings()
    assert s.kafka.bootstrap_servers == "broker:9092"
    assert s.kafka.session_timeout_ms == 6000
    assert s.topics.input == "in" and s.topics.stats == "stats"
    assert s.checkpoint.every_examples == 500


def test_toml_file_and_precedence(tmp_path, monkeypatch):
    cfg = tmp_path / "sp.toml"
    cfg.write_text('[topics]\ninput = "from-toml"\npredictions = "p-toml"\n[model]\nfit_intercept = false\n')
    monkeypatch.setenv("SP_TOPICS__PREDICTIONS", "p-env")
    s = load_settings(cfg, topics={"stats": "s-cli"})
    assert s.topics.input == "from-toml"
    assert s.topics.predictions == "p-env"  # environment beats the file
    assert s.topics.stats == "s-cli"  # CLI beats both
    assert s.model.fit_intercept is False
    monkeypatch.setenv("SP_CONFIG", str(cfg))
    assert load_settings().topics.input == "from-toml"


_EXAMPLE = Path(__file__).parents[2] / "config" / "stream-perceptron.toml"


def _example_keys() -> dict[str | None, set[str]]:
    """Keys of the example config per ``[section]`` (None: top level), set or commented out."""
    keys: dict[str | None, set[str]] = {None: set()}
    section = None
    for line in _EXAMPLE.read_text().splitlines():
        if m := re.match(r"^\[(\w+)\]", line):
            section = m.group(1)
            keys.setdefault(section, set())
        elif m := re.match(r"^#? ?(\w+) = ", line):
            keys[section].add(m.group(1))
    return keys


def test_every_value_of_the_example_config_file_reaches_its_setting():
    s = load_settings(_EXAMPLE)
    data = tomllib.loads(_EXAMPLE.read_text())
    assert data  # values, not only comments
    for name, value in data.items():
        if not isinstance(value, dict):
            assert getattr(s, name) == value, name
            continue
        for key, set_to in value.items():
            got = getattr(getattr(s, name), key)
            assert (str(got) if isinstance(got, Path) else got) == set_to, f"{name}.{key}"


def test_bad_value_is_one_line_naming_the_setting(monkeypatch):
    monkeypatch.setenv("SP_KAFKA__SESSION_TIMEOUT_MS", "soon")
    with pytest.raises(SettingsError) as err:
        load_settings()
    msg = str(err.value)
    assert msg.count("\n") == 0
    assert "SP_KAFKA__SESSION_TIMEOUT_MS" in msg and "kafka.session_timeout_ms" in msg


def test_a_fetch_bound_below_librdkafkas_floor_is_one_line(monkeypatch):
    monkeypatch.setenv("SP_KAFKA__FETCH_MAX_BYTES", "65536")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value).count("\n") == 0 and "SP_KAFKA__FETCH_MAX_BYTES" in str(err.value)
    monkeypatch.setenv("SP_KAFKA__FETCH_MAX_BYTES", "4194304")
    assert load_settings().kafka.fetch_max_bytes == 4_194_304


@pytest.mark.parametrize("value", ["0", "-5", "nan", "soon"])
def test_a_shutdown_timeout_must_be_a_positive_number_of_seconds(monkeypatch, value):
    monkeypatch.setenv("SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S", value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value).count("\n") == 0 and "SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S" in str(err.value)


def test_a_shutdown_timeout_defaults_below_the_deploy_files_grace_period_and_may_be_inf(monkeypatch):
    assert load_settings().checkpoint.shutdown_timeout_s == 50.0  # they allow 60 s
    monkeypatch.setenv("SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S", "inf")
    assert load_settings().checkpoint.shutdown_timeout_s == float("inf")


def test_a_producer_process_is_refused_with_confluent_kafka(monkeypatch):
    monkeypatch.setenv("SP_KAFKA__BACKEND", "confluent-kafka")
    monkeypatch.setenv("SP_KAFKA__PRODUCER_PROCESS", "true")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value).count("\n") == 0 and "SP_KAFKA__PRODUCER_PROCESS" in str(err.value)
    monkeypatch.setenv("SP_KAFKA__BACKEND", "kafka-python")
    assert load_settings().kafka.producer_process is True


def test_limits_allowing_an_output_too_large_to_send_are_one_line(monkeypatch):
    monkeypatch.setenv("SP_LIMITS__MAX_KEY_BYTES", "200000")
    with pytest.raises(SettingsError) as err:
        load_settings()
    msg = str(err.value)
    assert msg.count("\n") == 0
    assert msg.startswith("invalid settings SP_LIMITS__* (limits): ")
    assert "SP_LIMITS__MAX_KEY_BYTES (200,000)" in msg and "over the 998,976 an output record may take" in msg
    monkeypatch.setenv("SP_LIMITS__MAX_KEY_BYTES", "50000")
    assert load_settings().limits.max_key_bytes == 50_000


@pytest.mark.parametrize(("name", "value", "says"), [
    ("SP_LIMITS__MAX_ABS_VALUE", "inf", "finite"),
    ("SP_LIMITS__MAX_ABS_VALUE", "1e400", "finite"),
    ("SP_LIMITS__MAX_ABS_VALUE", "1e200", "at most 1e100, got 1e+200: larger values can overflow"),
    ("SP_LIMITS__MAX_FEATURES", str(2**63), "less than or equal to 2147483647"),
    ("SP_LIMITS__MAX_RECORD_BYTES", str(2**63), "less than or equal to 2147483647"),
    ("SP_LIMITS__MAX_KEY_BYTES", str(2**63), "less than or equal to 1000000"),
    ("SP_LIMITS__MAX_ID_CHARS", "300000000", "less than or equal to 1000000"),
])
def test_a_limit_out_of_range_is_one_line_before_anything_is_built(monkeypatch, name, value, says):
    # these once passed validation, then failed in the decoder's set-up with a traceback, or
    # built a record of gigabytes to measure it
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    msg = str(err.value)
    assert msg.count("\n") == 0 and msg.startswith(f"invalid setting {name} ") and says in msg


def test_one_class_name_for_both_labels_is_refused(monkeypatch):
    monkeypatch.setenv("SP_LIMITS__POSITIVE_CLASS", "spam")
    monkeypatch.setenv("SP_LIMITS__NEGATIVE_CLASS", "spam")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value).count("\n") == 0
    assert str(err.value) == (
        "invalid settings SP_LIMITS__* (limits): SP_LIMITS__POSITIVE_CLASS and SP_LIMITS__NEGATIVE_CLASS"
        " are both 'spam': a label can only be one of them"
    )
    monkeypatch.setenv("SP_LIMITS__NEGATIVE_CLASS", "ham")
    assert load_settings().limits.negative_class == "ham"


@pytest.mark.parametrize(("value", "servers"), [
    ("", None), (" , ,", None), (" a:1 ,, b:2 ", "a:1,b:2"), ("a:1", "a:1"),
])
def test_bootstrap_servers_without_a_server_are_unset(monkeypatch, value, servers):
    monkeypatch.setenv("SP_KAFKA__BOOTSTRAP_SERVERS", value)
    assert load_settings().kafka.bootstrap_servers == servers


@pytest.mark.parametrize("name", ["SP_KAFKA__SSL_CAFILE", "SP_KAFKA__SSL_CERTFILE", "SP_KAFKA__SSL_KEYFILE"])
def test_a_tls_file_that_is_not_there_is_one_line(monkeypatch, tmp_path, name):
    monkeypatch.setenv(name, str(tmp_path / "missing.pem"))
    with pytest.raises(SettingsError) as err:
        load_settings()
    msg = str(err.value)
    assert msg.count("\n") == 0 and msg.startswith(f"invalid setting {name} ") and "missing.pem" in msg
    (tmp_path / "missing.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    assert load_settings() is not None


@pytest.mark.parametrize("name", ["SP_KAFKA__SSL_CAFILE", "SP_KAFKA__SSL_PASSWORD"])
@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_tls_file_or_key_password_is_one_line(monkeypatch, name, blank):
    """Blank, the CA file and the key's password are each refused at load with one line naming
    the variable; a blank password would otherwise reach the client as a password."""
    monkeypatch.setenv(name, blank)
    with pytest.raises(SettingsError) as err:
        load_settings()
    msg = str(err.value)
    assert msg.count("\n") == 0 and msg.startswith(f"invalid setting {name} "), msg


def test_a_key_password_that_is_set_is_kept_and_masked(monkeypatch):
    monkeypatch.setenv("SP_KAFKA__SSL_PASSWORD", "k3y-pass")
    settings = load_settings()
    assert settings.kafka.ssl_password.get_secret_value() == "k3y-pass"
    assert redacted(settings)["kafka"]["ssl_password"] == "**********"


def test_a_misspelt_setting_is_named_and_its_value_not_shown(monkeypatch):
    monkeypatch.setenv("SP_KAFKA__SASL_PASSWD", "hunter2-do-not-print")  # PASSWD for PASSWORD
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "SP_KAFKA__SASL_PASSWD" in str(err.value) and "hunter2" not in str(err.value)


def test_a_heartbeat_not_below_the_session_names_both_variables(monkeypatch):
    monkeypatch.setenv("SP_KAFKA__HEARTBEAT_INTERVAL_MS", "20000")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value) == (
        "invalid settings SP_KAFKA__* (kafka): SP_KAFKA__HEARTBEAT_INTERVAL_MS (20000) must be lower"
        " than SP_KAFKA__SESSION_TIMEOUT_MS (10000)"
    )


@pytest.mark.parametrize("name", ["SP_KAFAK__GROUP_ID", "sp_kafak__group_id", "SP_CHECKPOINTS__DIR"])
def test_a_variable_of_a_section_that_does_not_exist_is_refused(monkeypatch, name):
    # ignored, a misspelt section would leave its setting at the default without a word
    monkeypatch.setenv(name, "x")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value).startswith(f"invalid setting {name}: no such section (the sections: SP_KAFKA__, ")
    assert str(err.value).count("\n") == 0


def test_variables_of_no_section_are_not_settings(monkeypatch):
    monkeypatch.setenv("SP_FAULTS_KILLS", "3")  # the fault suite's own tunables: not settings
    monkeypatch.setenv("SP_KAFKA__GROUP_ID", "g")
    assert load_settings().kafka.group_id == "g"


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_checkpoint_directory_is_refused(monkeypatch, value):
    monkeypatch.setenv("SP_CHECKPOINT__DIR", value)
    with pytest.raises(SettingsError,
                       match=r"^invalid setting SP_CHECKPOINT__DIR \(checkpoint.dir\): must name"):
        load_settings()


def test_unknown_setting_in_toml_is_named(tmp_path):
    cfg = tmp_path / "sp.toml"
    cfg.write_text("[topics]\ninptu = 'x'\n")
    with pytest.raises(SettingsError, match="SP_TOPICS__INPTU"):
        load_settings(cfg)


def test_missing_config_file():
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings("/nonexistent/sp.toml")


def test_secrets_are_masked(monkeypatch):
    monkeypatch.setenv("SP_KAFKA__SASL_PASSWORD", "hunter2")
    monkeypatch.setenv("SP_KAFKA__SSL_PASSWORD", "s3cret")
    s = load_settings()
    assert s.kafka.sasl_password.get_secret_value() == "hunter2"
    shown = str(redacted(s)) + repr(s) + str(s)
    assert "hunter2" not in shown and "s3cret" not in shown


def test_invalid_secret_value_is_not_echoed(tmp_path):
    cfg = tmp_path / "sp.toml"
    cfg.write_text("[kafka]\nsasl_password = 12345\n")
    with pytest.raises(SettingsError) as err:
        load_settings(cfg)
    assert "12345" not in str(err.value) and "SP_KAFKA__SASL_PASSWORD" in str(err.value)


@pytest.mark.parametrize("name", ["SP_OBSERVE__TOKEN", "SP_DASHBOARD__TOKEN"])
@pytest.mark.parametrize("token", ["short-token", "a token with spaces ok", "tøken-with-ø-0123456789", ""])
def test_a_token_too_short_or_not_printable_ascii_is_refused_without_being_shown(monkeypatch, name, token):
    monkeypatch.setenv(name, token)
    with pytest.raises(SettingsError) as err:
        load_settings()
    msg = str(err.value)
    assert msg.startswith(f"invalid setting {name} ") and "at least 16 printable ASCII" in msg
    assert msg.count("\n") == 0 and (not token or token not in msg)


def test_the_tokens_are_kept_and_masked(monkeypatch):
    monkeypatch.setenv("SP_OBSERVE__TOKEN", "observe-token-0123456789")
    monkeypatch.setenv("SP_DASHBOARD__TOKEN", "dashboard-token-0123456789")
    s = load_settings()
    assert s.observe.token.get_secret_value() == "observe-token-0123456789"
    assert s.dashboard.token.get_secret_value() == "dashboard-token-0123456789"
    assert redacted(s)["observe"]["token"] == redacted(s)["dashboard"]["token"] == "**********"
    shown = str(redacted(s)) + repr(s) + str(s)
    assert "0123456789" not in shown
    assert load_settings().observe.token is not None
    monkeypatch.delenv("SP_OBSERVE__TOKEN")
    assert load_settings().observe.token is None  # unset by default: /metrics open


def test_an_invalid_token_in_the_config_file_is_not_echoed(tmp_path):
    cfg = tmp_path / "sp.toml"
    cfg.write_text("[observe]\ntoken = 'not long enough'\n")
    with pytest.raises(SettingsError) as err:
        load_settings(cfg)
    assert "not long enough" not in str(err.value) and "SP_OBSERVE__TOKEN" in str(err.value)


def _settings_table():
    """docs/hooks/settings_table.py, the MkDocs hook that renders the settings page's table."""
    import importlib.util

    path = Path(__file__).parents[2] / "docs" / "hooks" / "settings_table.py"
    spec = importlib.util.spec_from_file_location("settings_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _every_variable():
    from pydantic import BaseModel

    from stream_perceptron.settings import Settings

    for section, field in Settings.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            for name, inner in ann.model_fields.items():
                yield f"SP_{section.upper()}__{name.upper()}", (section, name), inner
        else:
            yield f"SP_{section.upper()}", (None, section), field


def test_every_setting_has_a_description_and_is_in_the_example_config():
    example = _example_keys()
    for env, (where, key), field in _every_variable():
        assert field.description and field.description.strip(), f"{env} has no description"
        assert key in example.get(where, set()), f"{env} missing from the example config"


def test_the_settings_table_lists_every_variable_with_its_default_and_description():
    table = _settings_table().settings_table()
    rows = [line for line in table.splitlines() if line.startswith("| `SP_")]
    names = [re.match(r"\| `(SP_\w+)`", row).group(1) for row in rows]
    every = list(_every_variable())
    assert names == [env for env, _, _ in every]
    for row, (_, _, field) in zip(rows, every, strict=True):
        assert row.count(" | ") >= 3, row  # variable | type | default | description
        assert field.description.split("`")[0][:30] in row, row
    assert "| `SP_KAFKA__BACKEND` | `kafka-python` \\| `confluent-kafka` | `kafka-python` |" in table
    assert "| `SP_KAFKA__BOOTSTRAP_SERVERS` | string, optional | unset |" in table
    assert "| `SP_KAFKA__SASL_PASSWORD` | secret, optional | unset |" in table
    assert "| `SP_CHECKPOINT__EVERY_SECONDS` | number > 0 | `30.0` |" in table


def test_the_settings_page_is_where_the_table_goes():
    page = (Path(__file__).parents[2] / "docs" / "settings.md").read_text()
    hook = _settings_table()
    assert page.count(hook.MARKER) == 1
    assert "| `SP_LOG_EVERY_SECONDS` |" in hook.on_page_markdown(page, None, None, None)
    assert hook.render("# Another page\n") == "# Another page\n"


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_without_a_mechanism_is_refused(monkeypatch, protocol):
    # otherwise each client retries for good, logging "Kafka not reachable yet"
    monkeypatch.setenv("SP_KAFKA__SECURITY_PROTOCOL", protocol)
    monkeypatch.setenv("SP_KAFKA__SASL_PASSWORD", "hunter2")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value) == (
        f"invalid settings SP_KAFKA__* (kafka): SP_KAFKA__SECURITY_PROTOCOL is {protocol}: set"
        " SP_KAFKA__SASL_MECHANISM (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"
    )
    monkeypatch.setenv("SP_KAFKA__SASL_MECHANISM", "PLAIN")
    assert load_settings().kafka.sasl_mechanism == "PLAIN"


@pytest.mark.parametrize("name, meant", [("SP_CHECKPOINT_DIR", "SP_CHECKPOINT__DIR"),
                                         ("SP_KAFKA_BOOTSTRAP_SERVERS", "SP_KAFKA__BOOTSTRAP_SERVERS"),
                                         ("SP_LOG_LEVL", "SP_LOG_LEVEL"), ("sp_log_formt", "SP_LOG_FORMAT")])
def test_a_setting_misspelt_without_its_double_underscore_is_refused(monkeypatch, name, meant):
    # ignored, SP_CHECKPOINT_DIR would leave the checkpoints in ./checkpoints without a word
    monkeypatch.setenv(name, "x")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value) == f"invalid setting {name}: no such setting (did you mean {meant}?)"


@pytest.mark.parametrize("name", ["SP_KAFKA_BROKERS", "SP_STATS_PORT", "SP_CONF", "SP_CONFIG_DIR",
                                  "SP_LOGFILE", "SP_CLIENT_ID", "SP_FAULTS_KILLS"])
def test_other_programs_sp_variables_are_left_alone(monkeypatch, name):
    # only a section's own setting joined by one underscore, or a near-miss of a top-level one
    monkeypatch.setenv(name, "x")
    assert load_settings().log_level == "INFO"


@pytest.mark.parametrize("servers", ["localhost:abc", "kafka:", ":9092", "kafka:0", "kafka:65536",
                                     "a:1,b:x", "[::1]:abc", "[::1]:", "host:9092:9093", "[::1"])
def test_a_bootstrap_server_that_is_not_host_port_is_refused(monkeypatch, servers):
    monkeypatch.setenv("SP_KAFKA__BOOTSTRAP_SERVERS", servers)
    with pytest.raises(SettingsError, match=r"^invalid setting SP_KAFKA__BOOTSTRAP_SERVERS "
                                            r"\(kafka.bootstrap_servers\): '.*' is not host:port"):
        load_settings()


@pytest.mark.parametrize("servers", ["kafka", "kafka:9092", "10.0.0.1:9093, kafka-2:19092", "[::1]:9092",
                                     "::1", "[fe80::1]", "[fe80::1%eth0]:9092", "fe80::1%eth0",
                                     "my_host.example.com:09092"])
def test_bootstrap_servers_in_every_accepted_form(monkeypatch, servers):
    monkeypatch.setenv("SP_KAFKA__BOOTSTRAP_SERVERS", servers)
    assert load_settings().kafka.servers == [s.strip() for s in servers.split(",")]


def test_exactly_once_needs_the_kafka_store_and_an_interval_below_the_transaction_timeout(monkeypatch):
    from stream_perceptron.errors import SettingsError
    from stream_perceptron.settings import load_settings

    monkeypatch.setenv("SP_OUTPUT__GUARANTEE", "exactly-once")
    with pytest.raises(SettingsError, match=r"^invalid settings: SP_OUTPUT__GUARANTEE=exactly-once"
                                            r" needs SP_CHECKPOINT__STORE=kafka"):
        load_settings()
    monkeypatch.setenv("SP_CHECKPOINT__STORE", "kafka")
    with pytest.raises(SettingsError, match=r"SP_CHECKPOINT__EVERY_SECONDS=50 with SP_OUTPUT__GUARANTEE"):
        load_settings(checkpoint={"every_seconds": 50})
    monkeypatch.setenv("SP_CHECKPOINT__EVERY_SECONDS", "2")
    assert load_settings().output.guarantee == "exactly-once"


def test_drift_settings_default_to_adwin_reporting_only_and_a_bad_one_is_one_line(monkeypatch):
    s = load_settings()
    assert (s.drift.detector, s.drift.on_drift) == ("adwin", "none")
    monkeypatch.setenv("SP_DRIFT__DETECTOR", "page-hinkley")
    monkeypatch.setenv("SP_DRIFT__ON_DRIFT", "reset-model")
    s = load_settings()
    assert (s.drift.detector, s.drift.on_drift) == ("page-hinkley", "reset-model")
    for name, value in [("SP_DRIFT__DETECTOR", "kswin"), ("SP_DRIFT__ON_DRIFT", "retrain")]:
        monkeypatch.setenv(name, value)
        with pytest.raises(SettingsError) as err:
            load_settings()
        assert err.value.args[0].count("\n") == 0 and name in str(err.value)
        monkeypatch.delenv(name)


# ------------------------------------------------------------------------ the schema registry


@pytest.mark.parametrize(("value", "url"), [
    ("http://registry:8081", "http://registry:8081"),
    (" https://registry.example/apis/ccompat/v7/ ", "https://registry.example/apis/ccompat/v7"),
    ("http://[::1]:8081", "http://[::1]:8081"),
    ("", None),
    ("  ", None),
])
def test_a_registry_url_is_kept_without_its_trailing_slash_and_blank_is_unset(monkeypatch, value, url):
    monkeypatch.setenv("SP_REGISTRY__URL", value)
    assert load_settings().registry.url == url


@pytest.mark.parametrize(("value", "says"), [
    ("registry:8081", "is not an http:// or https:// URL with a host"),
    ("ftp://registry", "is not an http:// or https:// URL with a host"),
    ("http://registry:99999", "has a port that is not a number from 1 to 65535"),
    ("http://registry:8081/?debug=1", "has a query or a fragment: give the API's base URL"),
])
def test_a_bad_registry_url_is_one_line_naming_the_variable(monkeypatch, value, says):
    monkeypatch.setenv("SP_REGISTRY__URL", value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value) == f"invalid setting SP_REGISTRY__URL (registry.url): {says} (got {value!r})"


def test_a_registry_url_with_credentials_is_refused_without_showing_them(monkeypatch):
    monkeypatch.setenv("SP_REGISTRY__URL", "https://worker:hunter2@registry:8081")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "hunter2" not in str(err.value) and "\n" not in str(err.value)
    assert str(err.value) == ("invalid setting SP_REGISTRY__URL (registry.url): holds credentials: set "
                              "SP_REGISTRY__USERNAME and SP_REGISTRY__PASSWORD (or SP_REGISTRY__TOKEN) "
                              "instead")


@pytest.mark.parametrize(("env", "says"), [
    ({"SP_REGISTRY__USERNAME": "worker"},
     "SP_REGISTRY__USERNAME and SP_REGISTRY__PASSWORD go together: set both or neither"),
    ({"SP_REGISTRY__PASSWORD": "pw"},
     "SP_REGISTRY__USERNAME and SP_REGISTRY__PASSWORD go together: set both or neither"),
    ({"SP_REGISTRY__USERNAME": "worker", "SP_REGISTRY__PASSWORD": "pw", "SP_REGISTRY__TOKEN": "t"},
     "SP_REGISTRY__TOKEN and SP_REGISTRY__USERNAME are two ways to log in: set one"),
    ({"SP_REGISTRY__URL": "http://registry", "SP_REGISTRY__SSL_CAFILE": "{file}"},
     "SP_REGISTRY__SSL_CAFILE is for an https:// registry, and SP_REGISTRY__URL is not https"),
    ({"SP_REGISTRY__SSL_CERTFILE": "{file}"},
     "SP_REGISTRY__SSL_CERTFILE is for an https:// registry, and SP_REGISTRY__URL is unset"),
    ({"SP_REGISTRY__URL": "https://registry", "SP_REGISTRY__SSL_KEYFILE": "{file}"},
     "SP_REGISTRY__SSL_KEYFILE is the key of SP_REGISTRY__SSL_CERTFILE: set that too"),
])
def test_registry_settings_that_do_not_go_together_are_one_line(monkeypatch, tmp_path, env, says):
    (tmp_path / "f.pem").write_text("-")
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(file=tmp_path / "f.pem"))
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value) == f"invalid settings SP_REGISTRY__* (registry): {says}"
    assert "pw" not in str(err.value).replace("PASSWORD", "")


def test_the_registrys_secrets_are_masked_and_never_echoed(monkeypatch, tmp_path):
    monkeypatch.setenv("SP_REGISTRY__URL", "https://registry:8081")
    monkeypatch.setenv("SP_REGISTRY__TOKEN", "tok-secret-1")
    s = load_settings()
    assert s.registry.token.get_secret_value() == "tok-secret-1"
    assert "tok-secret-1" not in repr(s) and "tok-secret-1" not in str(redacted(s))
    assert redacted(s)["registry"]["token"] == "**********"
    monkeypatch.delenv("SP_REGISTRY__TOKEN")
    cfg = tmp_path / "sp.toml"
    cfg.write_text("[registry]\ntoken = 98765\n")
    with pytest.raises(SettingsError) as err:
        load_settings(cfg)
    assert "98765" not in str(err.value) and "SP_REGISTRY__TOKEN" in str(err.value)
