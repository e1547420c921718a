"""Settings: environment (``SP_`` prefix, nested ``__``), an optional TOML file, validation.

Precedence, highest first: values passed by the CLI, environment variables, the TOML
file named by ``--config`` or ``SP_CONFIG``, then the defaults below.

Every model is frozen. Secrets are :class:`pydantic.SecretStr`, so printing or logging
the settings shows ``'**********'`` in their place (see :func:`redacted`).
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    FilePath,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from stream_perceptron.codec.limits import (
    OUTPUT_RECORD_BYTES,
    Limits,
    check_class_output_bounds,
    check_output_bounds,
)
from stream_perceptron.errors import SettingsError
from stream_perceptron.features.spec import FeatureSpec, SpecError

ENV_PREFIX = "SP_"
ENV_NESTED = "__"


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KafkaSettings(_Section):
    """How to reach the cluster; security settings pass through to every client."""

    backend: Literal["kafka-python", "confluent-kafka"] = Field(
        "kafka-python",
        description="the worker's client library: `kafka-python` (pure Python) or `confluent-kafka` (`pip "
        "install 'stream-perceptron[confluent]'`)",
    )
    bootstrap_servers: str | None = Field(
        None,
        description="`host:port,...`; unset (or blank): `demo` starts an embedded broker, `run` refuses "
        "to start. With TLS each host must be a name the broker's certificate holds "
        "([Deploy](deploy.md#a-secured-cluster-sasl_ssl-and-tls))",
    )
    group_id: str = Field("stream-perceptron", description="the consumer group")
    client_id: str = Field(
        "stream-perceptron",
        description="client id (also in statistics records); with exactly-once the transactional id is "
        "`<group>:<client id>:<host name>`, so workers of one group on one host need client "
        "ids of their own",
    )
    session_timeout_ms: int = Field(10_000, ge=1_000, description="the group session timeout")
    heartbeat_interval_ms: int = Field(
        3_000, ge=100,
        description="the group heartbeat interval, below the session timeout",
    )
    max_poll_records: int = Field(
        2_000, ge=1,
        description="records per poll (learned and published in chunks of `SP_OUTPUT__CHUNK_RECORDS`); "
        "with confluent-kafka the consumer also fetches ahead at most ten polls' worth per "
        "partition (and 32 MB), where librdkafka's own default is 100,000 messages",
    )
    poll_timeout_ms: int = Field(500, ge=0, description="how long one poll waits for records")
    fetch_max_wait_ms: int = Field(
        50, ge=0,
        description="how long the broker may hold a fetch for data: lower is lower latency on a broker "
        "that holds fetches (the embedded one), more requests and more CPU while the input is "
        "idle (the trade-off measured: [Performance](performance.md#decisions))",
    )
    fetch_max_bytes: int = Field(
        1_048_576,
        ge=1_000_000,  # librdkafka refuses less than its message.max.bytes (1,000,000)
        description="most bytes one fetch response may carry (Kafka's `fetch.max.bytes`, for both "
        "clients; at least 1,000,000, librdkafka's floor). The clients' own default, 50 MB, "
        "lets a broker answer with several MB at a time, held in memory until polled",
    )
    request_timeout_ms: int = Field(
        30_000, ge=1_000,
        description="the clients' request timeout; a flush, commit or send is retried in rounds of it",
    )
    linger_ms: int = Field(20, ge=0, description="producer batching: how long a record may wait for others")
    batch_size: int = Field(262_144, ge=1, description="producer batch bytes")
    producer_process: bool = Field(
        False,
        description="kafka-python only: produce from a second process beside the worker, on a second core "
        "(1.2–1.6× the records/s over six full runs, about 60 MB more memory, about 10 ms "
        "more latency; see [Performance](performance.md)); not with exactly-once, whose "
        "transaction carries the consumer's offsets (the producer then stays in the worker's "
        "process, said in a log line)",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT",
        description="how the clients connect: plaintext, TLS, SASL, or SASL over TLS",
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None,
        description="the SASL mechanism; required with a `SASL_*` protocol",
    )
    sasl_username: str | None = Field(None, description="the SASL user")
    sasl_password: SecretStr | None = Field(None, description="secret: the SASL user's password")
    # checked at load: a missing file is one line naming the setting, not a client that
    # retries a handshake it can never make
    ssl_cafile: FilePath | None = Field(
        None,
        description="CA bundle (each of these three files must exist when the settings load; a blank "
        "value is refused)",
    )
    ssl_certfile: FilePath | None = Field(None, description="client certificate")
    ssl_keyfile: FilePath | None = Field(None, description="client key")
    ssl_password: SecretStr | None = Field(
        None,
        description="secret: the client key's password (a blank value is refused: leave it unset for a "
        "key without one)",
    )
    ssl_check_hostname: bool = Field(
        True,
        description="check that the broker's certificate names the host connected to; `false` only for a "
        "test",
    )

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers_listed(cls, value: str | None) -> str | None:
        """Blank entries dropped; a value with none left is unset (``run`` then refuses). Each
        entry is ``host``, ``host:port`` or ``[ipv6]:port``; a port is a number from 1 to 65535."""
        servers = server_list(value)
        for server in servers:
            m = _SERVER.fullmatch(server)
            if (m is None and not _is_ipv6(server)) or (m and m[2] and not 0 < int(m[2]) < 65536):
                raise ValueError(f"{server!r} is not host:port (the port a number from 1 to 65535)")
        return ",".join(servers) or None

    @field_validator("ssl_password")
    @classmethod
    def _ssl_password_not_blank(cls, value: SecretStr | None) -> SecretStr | None:
        """A blank key password is refused at load, as a blank CA file is: a key without a
        password is said by leaving the setting unset."""
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("is blank: leave it unset for a client key without a password")
        return value

    @property
    def servers(self) -> list[str]:
        """The bootstrap servers, one ``host:port`` each (empty when unset)."""
        return server_list(self.bootstrap_servers)

    @model_validator(mode="after")
    def _heartbeat_below_session(self) -> KafkaSettings:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"SP_KAFKA__HEARTBEAT_INTERVAL_MS ({self.heartbeat_interval_ms}) must be lower than"
                f" SP_KAFKA__SESSION_TIMEOUT_MS ({self.session_timeout_ms})"
            )
        if self.security_protocol.startswith("SASL_") and self.sasl_mechanism is None:
            raise ValueError(
                f"SP_KAFKA__SECURITY_PROTOCOL is {self.security_protocol}: set SP_KAFKA__SASL_MECHANISM"
                " (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"
            )
        if self.producer_process and self.backend != "kafka-python":
            raise ValueError(
                "SP_KAFKA__PRODUCER_PROCESS applies to the kafka-python backend only"
                " (SP_KAFKA__BACKEND is confluent-kafka, whose producer already runs in C threads)"
            )
        return self


# host or [ipv6], then an optional :port; a bare IPv6 address (no port) is taken whole
_SERVER = re.compile(r"(\[[^\]]+\]|[^:\[\]]+)(?::(\d+))?")


def _is_ipv6(text: str) -> bool:
    """Whether ``text`` is an IPv6 address, without brackets or port (``::1``, ``fe80::1%eth0``)."""
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def server_list(value: str | None) -> list[str]:
    """``"a:1, ,b:2"`` as ``["a:1", "b:2"]``: comma-separated, blanks dropped.

    >>> server_list(" a:1 ,, b:2 "), server_list(None)
    (['a:1', 'b:2'], [])
    """
    return [s.strip() for s in (value or "").split(",") if s.strip()]


class RegistrySettings(_Section):
    """The schema registry that gives Avro records' writer schemas by id (Confluent's REST API)."""

    url: str | None = Field(
        None,
        description="the registry's Confluent-compatible REST API, `http(s)://host:port[/path]` (Confluent "
        "Schema Registry: its root; Apicurio Registry: `.../apis/ccompat/v7`); unset: no registry. "
        "Credentials go in the settings below, never in the URL",
    )
    username: str | None = Field(
        None, description="HTTP basic authentication's user (with `SP_REGISTRY__PASSWORD`)",
    )
    password: SecretStr | None = Field(None, description="secret: the basic authentication user's password")
    token: SecretStr | None = Field(
        None,
        description="secret: a bearer token, sent as `Authorization: Bearer ...` (instead of a user and "
        "password)",
    )
    ssl_cafile: FilePath | None = Field(
        None,
        description="CA bundle that verifies an `https` registry's certificate (unset: the system's); each "
        "of these three files must exist when the settings load",
    )
    ssl_certfile: FilePath | None = Field(
        None, description="client certificate, for a registry that asks for one",
    )
    ssl_keyfile: FilePath | None = Field(
        None, description="the client certificate's key (unset: it is in the certificate's file)",
    )
    timeout_s: float = Field(
        10.0, gt=0, le=300,
        description="how long one request may wait on the registry: connecting at most this long, the rest "
        "of the request within what is left of it; a registry silent that long is unavailable "
        "(retried later), never a record's fault",
    )

    @field_validator("url")
    @classmethod
    def _url_of_an_api(cls, value: str | None) -> str | None:
        """Blank is unset; else as :func:`registry_url_problem` asks, a trailing ``/`` dropped."""
        if value is None or not value.strip():
            return None
        problem = registry_url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value.strip().rstrip("/")

    @field_validator("password", "token")
    @classmethod
    def _secret_not_blank(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("is blank: leave it unset")
        return value

    @model_validator(mode="after")
    def _one_way_to_log_in(self) -> RegistrySettings:
        if (self.username is None) != (self.password is None):
            raise ValueError("SP_REGISTRY__USERNAME and SP_REGISTRY__PASSWORD go together: set both or"
                             " neither")
        if self.token is not None and self.username is not None:
            raise ValueError("SP_REGISTRY__TOKEN and SP_REGISTRY__USERNAME are two ways to log in: set one")
        if self.ssl_keyfile is not None and self.ssl_certfile is None:
            raise ValueError("SP_REGISTRY__SSL_KEYFILE is the key of SP_REGISTRY__SSL_CERTFILE: set that too")
        tls = [name for name in ("ssl_cafile", "ssl_certfile") if getattr(self, name) is not None]
        if tls and not (self.url or "").startswith("https://"):
            raise ValueError(f"SP_REGISTRY__{tls[0].upper()} is for an https:// registry, and"
                             f" SP_REGISTRY__URL is {'unset' if self.url is None else 'not https'}")
        return self


def registry_url_problem(url: str) -> str | None:
    """What is wrong with a schema registry's URL, or None: it must be ``http`` or ``https`` with a
    host, and hold no credentials, no query and no fragment.

    >>> registry_url_problem("https://registry:8081/apis/ccompat/v7"), registry_url_problem("registry:8081")
    (None, 'is not an http:// or https:// URL with a host')
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http:// or https:// URL with a host"
    if "@" in parts.netloc:
        return ("holds credentials: set SP_REGISTRY__USERNAME and SP_REGISTRY__PASSWORD (or"
                " SP_REGISTRY__TOKEN) instead")
    if parts.query or parts.fragment:
        return "has a query or a fragment: give the API's base URL"
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        return "has a port that is not a number from 1 to 65535"
    return None


class TopicSettings(_Section):
    """Topic names: one input, four outputs."""

    input: str = Field("examples", description="input records")
    predictions: str = Field("predictions", description="prediction records")
    stats: str = Field("stats", description="statistics records and drift events")
    dead_letter: str = Field("dead-letters", description="dead letters")
    outcomes: str = Field(
        "outcomes",
        description="outcome records of late labels (created like the other output topics)",
    )


class CheckpointSettings(_Section):
    """Where and how often the model and its offsets are made durable."""

    # Where each input partition's state is kept: "directory" (files under ``dir``; several workers
    # may share it) or "kafka" (the compacted topic ``topic``, so workers need no volume). The
    # initial model, a `fit` state starting the partitions that have no state, is read from ``dir``
    # with either store.
    store: Literal["directory", "kafka"] = Field(
        "directory",
        description="where each input partition's state is kept: `directory` (files under "
        "`SP_CHECKPOINT__DIR`, which several workers may share) or `kafka` (the compacted "
        "topic `SP_CHECKPOINT__TOPIC`: workers need no volume)",
    )
    dir: Path = Field(
        Path("checkpoints"),
        description="the directory store's files; with either store, a state from `fit` at its top is the "
        "initial model of the partitions that have no state yet",
    )
    topic: str = Field(
        "stream-perceptron-state", min_length=1, max_length=249,
        description="the Kafka store's topic, created when missing with `cleanup.policy=compact`",
    )
    # The Kafka store writes a state in records of at most this many bytes (the manifest last), so
    # a state larger than the broker's largest message still fits.
    chunk_bytes: int = Field(
        512 * 1024, ge=1024, le=64 * 1024 * 1024,
        description="the Kafka store writes a state in records of at most this many bytes, its manifest "
        "last, so a state larger than the broker's largest message still fits",
    )
    every_examples: int = Field(10_000, ge=1, description="a checkpoint every this many examples")
    every_seconds: float = Field(30.0, gt=0, description="a checkpoint every this many seconds")
    keep: int = Field(3, ge=1, description="state files kept per partition in the directory store")
    # From SIGTERM (or the end of --until-caught-up) to exit: past it the worker exits 1 without
    # its final checkpoint, as the grace period's SIGKILL would, but saying so. Below the deploy
    # files' 60 s grace period; ``inf``: wait as long as the retries take.
    shutdown_timeout_s: float = Field(
        50.0, gt=0,
        description="`run`'s shutdown, from SIGTERM (or the end of `--until-caught-up`) to exit: past it "
        "a shutdown still waiting on Kafka exits 1 at once, with one ERROR line saying what "
        "it waited for and where a restart resumes; nothing is lost, as with a SIGKILL. Keep "
        "it below your grace period (60 s in the deploy files); `inf`: wait as long as the "
        "retries take",
    )

    @field_validator("dir", mode="before")
    @classmethod
    def _dir_named(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():  # Path("") is the working directory
            raise ValueError("must name a directory (empty, it would be the working directory)")
        return value


class ModelSettings(_Section):
    """The perceptron's configuration (part of the checkpoint fingerprint)."""

    n_features: int | None = Field(
        None, ge=1,
        description="fixed dimension; unset: a stored state's width, else the first dense example fixes "
        "it, and named features grow it up to `SP_LIMITS__MAX_NAMES`. A record that does not "
        "fit the restored state's width is a dead letter with its reason (one WARNING per "
        "partition), never a stop: only this setting disagreeing with a stored state stops "
        "the worker (one line, exit 2)",
    )
    fit_intercept: bool = Field(True, description="`false`: perceptron through the origin")
    # serve the averaged weights (Rosenblatt's update still drives learning and E_n)
    average: bool = Field(
        False,
        description="`true`: serve the averaged perceptron (predictions and scores from θ̄, the mean of θ "
        "over the labeled examples; learning, `mistake` and `E_n` stay the plain "
        "perceptron's); its own error rate is `served_mistake_rate`. Part of the state's "
        "configuration",
    )
    # named features hashed into 2**hash_bits columns: constant memory however many names arrive
    hash_bits: int | None = Field(
        None, ge=1, le=30,  # model.hashing.MAX_HASH_BITS
        description="named features hashed (BLAKE2b, the same on every machine) into 2^b columns, 1 to "
        "30: memory and stored states stay the same size however many names arrive, colliding "
        "names share a weight, and `SP_LIMITS__MAX_NAMES` no longer applies. Unset: each name "
        "gets its own index, up to `SP_LIMITS__MAX_NAMES`. Part of the state's configuration",
    )
    hash_sign: bool = Field(
        False,
        description="with `SP_MODEL__HASH_BITS`: each name also gets a hashed sign, so colliding names "
        "cancel on average rather than add",
    )
    classes: list[str | int] | None = Field(
        None,
        description="the class names, a JSON list of strings or integers (an integer is a name: `3` and "
        "`\"3\"` cannot both be classes). Three or more: the K-class perceptron, one row of weights "
        "per class in this order. Exactly two: the binary model with "
        "those names, negative first (as `SP_LIMITS__NEGATIVE_CLASS` and `SP_LIMITS__POSITIVE_CLASS`, "
        "which are then left unset). Part of the state: a stored state's classes must begin with these",
    )
    multiclass: bool = Field(
        False,
        description="`true`: the K-class perceptron even with fewer than three `SP_MODEL__CLASSES`, "
        "classes learned as they appear (after `SP_MODEL__CLASSES` when set); a label outside the "
        "binary values then is a class, not a dead letter",
    )
    unknown_class: Literal["learn", "dead-letter"] = Field(
        "learn",
        description="what a K-class worker does with a label outside the classes it holds: `learn` it "
        "as a new class (up to `SP_LIMITS__MAX_CLASSES`), or send its record to the dead-letter "
        "topic with the reason (`dead-letter`, needs `SP_MODEL__CLASSES`)",
    )

    @field_validator("classes", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, list):
            for name in value:
                if type(name) is not str and type(name) is not int:
                    kind = {bool: "a bool", float: "a float", type(None): "null", list: "an array",
                            dict: "an object"}.get(type(name), type(name).__name__)
                    raise ValueError(f"each class is a string or an integer, got {kind} ({name!r})")
        return value

    def k_class(self) -> bool:
        """Whether these settings make the K-class perceptron (chosen once per partition)."""
        return self.multiclass or (self.classes is not None and len(self.classes) >= 3)

    @model_validator(mode="after")
    def _hashing_fits(self) -> ModelSettings:
        self._classes_named()
        if self.hash_bits is None:
            if self.hash_sign:
                raise ValueError(
                    "SP_MODEL__HASH_SIGN=true needs SP_MODEL__HASH_BITS (sign hashing hashes names)"
                )
            return self
        if self.n_features is not None and self.n_features != 1 << self.hash_bits:
            raise ValueError(
                f"SP_MODEL__N_FEATURES={self.n_features} but SP_MODEL__HASH_BITS={self.hash_bits} makes"
                f" {1 << self.hash_bits} columns: leave SP_MODEL__N_FEATURES unset with hashing"
            )
        return self


    def _classes_named(self) -> None:
        if self.classes is not None:
            if len(self.classes) < 2 and not self.multiclass:
                raise ValueError(f"SP_MODEL__CLASSES names {len(self.classes)} class: name two or more, or"
                                 " set SP_MODEL__MULTICLASS=true to learn the others as they appear")
            texts: dict[str, str | int] = {}
            for name in self.classes:
                if str(name) in texts:
                    raise ValueError(f"SP_MODEL__CLASSES names {texts[str(name)]!r} and {name!r}: class names"
                                     " must differ as text")
                texts[str(name)] = name
            named = all(isinstance(n, str) for n in self.classes)
            if len(self.classes) == 2 and not self.multiclass and not named:
                raise ValueError(f"SP_MODEL__CLASSES={list(self.classes)!r} names two classes, the binary"
                                 " model's, which are strings (integers are labels there: 0/1, -1/1); set"
                                 " SP_MODEL__MULTICLASS=true for two classes named by integers")
        elif self.unknown_class == "dead-letter":
            raise ValueError("SP_MODEL__UNKNOWN_CLASS=dead-letter needs SP_MODEL__CLASSES (the classes"
                             " the others are refused against)")
        if self.unknown_class == "dead-letter" and not self.k_class():
            raise ValueError("SP_MODEL__UNKNOWN_CLASS=dead-letter is for the K-class perceptron"
                             " (three or more SP_MODEL__CLASSES, or SP_MODEL__MULTICLASS=true)")


_DEFAULT_LIMITS = Limits()


class LimitSettings(_Section):
    """What the input decoder accepts; anything beyond goes to the dead-letter topic.

    The defaults are the codec's own (:class:`~stream_perceptron.codec.limits.Limits`), written once.
    """

    max_record_bytes: int = Field(
        _DEFAULT_LIMITS.max_record_bytes, ge=16, le=2**31 - 1,
        description="larger records are dead-lettered",
    )
    max_features: int = Field(
        _DEFAULT_LIMITS.max_features, ge=1, le=2**31 - 1,
        description="features in one record",
    )
    max_name_chars: int = Field(
        _DEFAULT_LIMITS.max_name_chars, ge=1, le=1_000_000,
        description="records with a longer feature name are dead-lettered",
    )
    # with model.n_features unset, named features would otherwise grow the model (and each
    # checkpoint) by every new name, for good
    max_names: int = Field(
        _DEFAULT_LIMITS.max_names, ge=1, le=2**31 - 1,
        description="with `SP_MODEL__N_FEATURES` unset, the most feature names the model indexes; a "
        "record bringing more new names is dead-lettered (names are kept for good, in memory "
        "and in every stored state; `SP_MODEL__HASH_BITS` keeps both constant instead)",
    )
    max_abs_value: float = Field(
        _DEFAULT_LIMITS.max_abs_value, gt=0, allow_inf_nan=False,
        description="larger magnitudes (and NaN/Inf) are dead-lettered, each value compared as the "
        "float64 the model holds (an integer past 2**53 once rounded); at most 1e100, past "
        "which the sums can overflow",
    )
    dead_letter_value_bytes: int = Field(
        _DEFAULT_LIMITS.dead_letter_value_bytes, ge=0, le=700_000,
        description="bytes of a bad record's value kept in its dead letter",
    )
    # a key and an id are copied into outputs, which must fit OUTPUT_RECORD_BYTES
    max_key_bytes: int = Field(
        _DEFAULT_LIMITS.max_key_bytes, ge=0, le=OUTPUT_RECORD_BYTES,
        description="records with longer Kafka keys are dead-lettered",
    )
    max_id_chars: int = Field(
        _DEFAULT_LIMITS.max_id_chars, ge=0, le=OUTPUT_RECORD_BYTES,
        description="records with longer string ids are dead-lettered",
    )
    positive_class: str | None = Field(
        None,
        description="string label meaning +1; set (or the negative one), each prediction names its class "
        "in `class`",
    )
    negative_class: str | None = Field(None, description="string label meaning −1")
    max_classes: int = Field(
        _DEFAULT_LIMITS.max_classes, ge=2, le=10_000,
        description="the most classes a K-class worker holds; a record bringing one more is "
        "dead-lettered with the reason (each class costs a row of weights, in memory and in every "
        "stored state, and K×K counts in each statistics record)",
    )
    max_class_chars: int = Field(
        _DEFAULT_LIMITS.max_class_chars, ge=1, le=100_000,
        description="a K-class record whose label is a longer string is dead-lettered",
    )

    @field_validator("max_abs_value")
    @classmethod
    def _sums_stay_finite(cls, value: float) -> float:
        # past 1e100, ‖x‖², θ·x or ‖θ‖² can overflow to inf (2^31 features, 10^12 updates), and a
        # checkpoint would then hold a statistic that no worker can restore
        if value > 1e100:
            raise ValueError(f"at most 1e100, got {value:g}: larger values can overflow the sums")
        return value

    def codec_limits(self) -> Limits:
        """These settings as the codec's :class:`~stream_perceptron.codec.limits.Limits`."""
        return Limits(**self.model_dump())

    @model_validator(mode="after")
    def _classes_differ(self) -> LimitSettings:
        if self.positive_class is not None and self.positive_class == self.negative_class:
            raise ValueError(
                f"SP_LIMITS__POSITIVE_CLASS and SP_LIMITS__NEGATIVE_CLASS are both {self.positive_class!r}:"
                " a label can only be one of them"
            )
        return self

    @model_validator(mode="after")
    def _outputs_fit_a_request(self) -> LimitSettings:
        # A key and an id are copied to the prediction, a key and a value to a dead letter: their
        # bounds must leave every output record small enough to send, or one record would stop
        # the worker at its offset on every restart.
        check_output_bounds(self.codec_limits())  # its ValueError names the SP_LIMITS__* variables
        return self


class StatsSettings(_Section):
    """The running statistics and how often they are published."""

    window: int = Field(1_000, ge=1, description="W, labeled examples in the window")
    ewma_alpha: float = Field(0.01, gt=0, le=1, description="α of the EWMA mistake rate")
    every_examples: int = Field(
        5_000, ge=1,
        description="a statistics record every this many examples of a partition",
    )
    every_seconds: float = Field(10.0, gt=0, description="a statistics record every this many seconds")


class DriftSettings(_Section):
    """Drift alarms on each partition's mistake stream (docs/drift.md)."""

    # river.drift detector watching the 0/1 mistakes ("none": no alarms)
    detector: Literal["adwin", "page-hinkley", "ddm", "hddm-a", "none"] = Field(
        "adwin",
        description="the detector of rises of each partition's mistake rate ([Drift alarms](drift.md)); "
        "`none`: no alarms",
    )
    # what an alarm does besides its event: "reset-window" restarts the window statistics,
    # "reset-model" restarts θ, θ0 (and the averaging) at zero; E_n counts on in both
    on_drift: Literal["none", "reset-window", "reset-model"] = Field(
        "none",
        description="what an alarm does besides its event: `none`; `reset-window` empties the window "
        "statistics at the alarm's record (E_n and the EWMA go on); `reset-model` restarts θ, "
        "θ0 (and the averaging) at zero there, so the model relearns the new concept (E_n "
        "goes on counting its mistakes)",
    )


class MixSettings(_Section):
    """Iterative parameter mixing across the input's partitions (docs/mixing.md)."""

    # every this many labeled examples of a partition, it publishes its state to the model topic
    # and adopts the mix of every partition's newest state; 0 (the default) never mixes
    every_examples: int = Field(
        0, ge=0,
        description="every this many labeled examples of a partition, it publishes its state to the model "
        "topic and adopts the mix of the newest states of all the input's partitions "
        "(iterative parameter mixing, [Mixing](mixing.md)); `0`: no mixing, one model per "
        "partition. Dense features or `SP_MODEL__HASH_BITS` only; not with "
        "`SP_OUTPUT__GUARANTEE=exactly-once`. Each mixing point flushes the producer: 1000 or "
        "more keeps the cost small",
    )
    topic: str = Field(
        "model",  # compacted: one record per input partition, the newest kept
        description="the model topic (compacted, one partition, created when missing): one record per "
        "input partition, key `<topic>:<partition>`",
    )
    weights: Literal["uniform", "mistakes"] = Field(
        "uniform",
        description="μ of the mix: `uniform`, or `mistakes` (μ ∝ each state's mistakes since its previous "
        "mixing point)",
    )
    # s of bounded staleness: a partition at its n-th mixing point adopts a mix only once every
    # partition of the input has published a state of version >= n - s; unset (inf): no bound
    max_staleness: int | None = Field(
        None, ge=0,
        description="bounded staleness across workers: a partition at its n-th mixing point waits "
        "(paused) until every partition of the input has published a state of mix version n − s or "
        "later, for at most `SP_MIX__MAX_WAIT_S`; unset or `inf`: no bound, a mix takes the newest "
        "states whatever their age. The partitions of one worker always advance together "
        "([Mixing](mixing.md#bounded-staleness))",
    )
    # with s >= 1: how much longer than its lap (the time from its last mixing point to its n-th)
    # a partition waits at its n-th point for other workers' partitions to publish their states
    # of version n, before it mixes those it has (within s)
    fresh_wait_s: float = Field(
        1.0, ge=0, allow_inf_nan=False,
        description="with `SP_MIX__MAX_STALENESS` of 1 or more: a partition at a mixing point waits "
        "(paused), once nothing beyond s holds it, for other workers' partitions that are within s "
        "versions but have not reached the point yet, so that the mix takes states of one version: its "
        "lap (the seconds from its last mixing point to this one) plus this, the whole wait at most "
        "`SP_MIX__MAX_WAIT_S`; then it mixes the states it has. "
        "`0`: no such wait, a mix takes states up to s versions behind as soon as it may "
        "([Mixing](mixing.md#bounded-staleness))",
    )
    max_wait_s: float = Field(
        10.0, gt=0, allow_inf_nan=False,
        description="the longest a partition waits at a mixing point for partitions that are behind "
        "(no input, or their worker gone); then it mixes what there is, logs which were stale and "
        "by how many versions, counts it (statistics `mix.overdue`) and waits for them no more "
        "until they publish again",
    )

    @field_validator("max_staleness", mode="before")
    @classmethod
    def _inf_is_unbounded(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in ("", "inf", "infinity", "∞"):
            return None
        if isinstance(value, float) and math.isinf(value) and value > 0:
            return None
        return value


class OutputSettings(_Section):
    """Which prediction records are published, and how soon."""

    predictions: Literal["all", "unlabeled", "none"] = Field(
        "all",
        description="which records get a prediction: all, only unlabeled ones, or none",
    )
    scores: Literal["top", "all"] = Field(
        "top",
        description="a K-class worker's predictions: `top` carries the predicted class and the "
        "runner-up with their scores; `all` adds `scores`, every class's score by name",
    )
    # A poll batch is decoded, learned and published in chunks of at most this many records, so
    # the first records' predictions leave before the last ones are decoded.
    chunk_records: int = Field(
        500, ge=1, le=1_000_000,
        description="a poll batch is decoded, learned and published in chunks of at most this many "
        "records: the first predictions of a batch leave before its last records are decoded "
        "(lower latency); larger means fewer calls",
    )
    # "exactly-once": each checkpoint interval is one Kafka transaction holding the outputs, the
    # partitions' states and the input offsets (needs SP_CHECKPOINT__STORE=kafka).
    guarantee: Literal["at-least-once", "exactly-once"] = Field(
        "at-least-once",
        description="`exactly-once`: each checkpoint interval is one Kafka transaction carrying the "
        "outputs, the partitions' states and the input offsets, and the input is read "
        "`read_committed`; needs `SP_CHECKPOINT__STORE=kafka` and "
        "`SP_CHECKPOINT__EVERY_SECONDS` below 50 (the broker aborts a transaction after 60 "
        "s); outputs become visible at each commit ([Guarantees](guarantees.md))",
    )


class LabelSettings(_Section):
    """Labels that arrive late: how many predictions wait for theirs, and for how long
    (model/pending.py). Age is measured with Kafka record timestamps, never the wall clock."""

    # 0 (the default): late labels are off, a record without y is predicted and forgotten as
    # before; kept events cost their features in memory and in every stored state
    pending_max: int = Field(
        0, ge=0, le=10_000_000,
        description="events (`id` and `x`, no `y`) each partition keeps waiting for a late label; one "
        "more drops the oldest; `0` (late labels off) keeps none, and a label record is then "
        "a dead letter. Each costs its features in memory and in every stored state",
    )
    pending_ttl_s: float = Field(
        86_400.0, gt=0,  # inf: no bound by age
        description="the most a kept event's Kafka timestamp may trail the partition's stream time (the "
        "largest record timestamp seen); `inf`: no bound by age",
    )
    pending_max_offsets: int | None = Field(
        None, ge=1,
        description="the most offsets a kept event may trail the current record; unset: no bound by "
        "distance",
    )


TOKEN_CHARS = 16
"""The fewest characters a token may have."""


def _usable_token(value: SecretStr | None) -> SecretStr | None:
    """A token of at least :data:`TOKEN_CHARS` printable ASCII characters without spaces, which
    goes unchanged into a bearer token and a basic-auth password; the error never shows it."""
    if value is None:
        return None
    token = value.get_secret_value()
    if len(token) < TOKEN_CHARS or not all("!" <= c <= "~" for c in token):
        raise ValueError(f"must be at least {TOKEN_CHARS} printable ASCII characters without spaces"
                         " (e.g. `openssl rand -hex 32`)")
    return value


Token = Annotated[SecretStr | None, AfterValidator(_usable_token)]
"""A secret token of an HTTP endpoint, unset or usable (:func:`_usable_token`)."""


class ObserveSettings(_Section):
    """The HTTP endpoint serving ``/metrics`` (Prometheus), ``/healthz`` and ``/readyz``."""

    enabled: bool = Field(True, description="serve `/metrics`, `/healthz`, `/readyz`")
    host: str = Field(
        "0.0.0.0",  # noqa: S104 - a daemon's probes and scrapes come from outside the pod
        description="the address the endpoint listens on",
    )
    port: int = Field(9464, ge=0, le=65535, description="the endpoint's port; `0` picks a free port")
    liveness_timeout_s: float = Field(
        60.0, gt=0,
        description="`/healthz` fails when the loop has not polled for this long",
    )
    token: Token = Field(
        None,
        description="secret: `/metrics` asks for it (`Authorization: Bearer <token>`, or basic auth with "
        "the token as the password); `/healthz` and `/readyz` stay open for probes. At least 16 "
        "characters, printable ASCII without spaces. Unset: `/metrics` is open to whoever reaches the "
        "port ([Operations](operations.md#who-may-reach-the-endpoints))",
    )


class DashboardSettings(_Section):
    """The web dashboard of ``stream-perceptron dashboard`` (its address and port are options)."""

    token: Token = Field(
        None,
        description="secret: every page of the dashboard asks for it (a browser asks for a user name, "
        "any, and a password, the token; or `Authorization: Bearer <token>`). As "
        "`SP_OBSERVE__TOKEN`: at least 16 characters, printable ASCII without spaces",
    )


class InputSettings(_Section):
    """What the input topic's records are."""

    format: Literal["envelope", "json", "avro"] = Field(
        "envelope",
        description="`envelope`: `{\"x\", \"y\", \"id\"}` records; `json`: any JSON object, through the "
        "feature spec (`SP_FEATURES__*`); `avro`: the Confluent wire format (a schema id, then "
        "Avro), its writer's schema from the schema registry (`SP_REGISTRY__*`), through the "
        "feature spec",
    )


class FeatureSettings(_Section):
    """The feature spec: how an event becomes an example (docs/events.md). In the config file's
    ``[features]`` table, or in the TOML file ``spec`` names (whose keys are the table's)."""

    spec: FilePath | None = Field(
        None,
        description="a TOML file holding the feature spec (its top-level keys are the `[features]` "
        "table's); the spec's own keys, when also set, are refused",
    )
    label: str | None = Field(None, description="the label's path (absent or null: unlabeled)")
    positive: list[bool | int | str] | None = Field(None, description="the positive class's values")
    negative: list[bool | int | str] | None = Field(
        None, description="the negative class's values (unset: every value not positive)")
    id: str | None = Field(None, description="the id's path, which a late label record names")
    echo: list[str] | None = Field(None, description="paths copied into each prediction record")
    numeric: dict[str, dict[str, Any]] | list[str] | None = Field(
        None, description="numeric features: path → options (`transform`, `clip`, `standardize`, "
        "`missing`), or a list of paths")
    categorical: dict[str, dict[str, Any]] | list[str] | None = Field(
        None, description="categorical features: path → options (`missing`), or a list of paths")
    text: dict[str, dict[str, Any]] | list[str] | None = Field(
        None, description="text features: path → options (`max_tokens`, `missing`), or a list of paths")

    def table(self) -> dict[str, Any] | None:
        """The spec as a table (from ``spec``'s file, or the inline keys); None when none is set."""
        inline = {k: v for k, v in self.model_dump(exclude={"spec"}).items() if v is not None}
        if self.spec is None:
            return inline or None
        if inline:
            raise ValueError(f"SP_FEATURES__SPEC names a file and {', '.join(sorted(inline))} are set too:"
                             " keep the spec in one place")
        try:
            with open(self.spec, "rb") as fh:
                table = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"SP_FEATURES__SPEC: cannot read {self.spec}: {exc}") from None
        return dict(table.get("features", table))

    def feature_spec(self) -> FeatureSpec | None:
        """The parsed spec; None when none is set."""
        table = self.table()
        return None if table is None else FeatureSpec.parse(table)

    @model_validator(mode="after")
    def _a_spec_that_parses(self) -> FeatureSettings:
        try:
            self.feature_spec()
        except SpecError as exc:
            raise ValueError(str(exc)) from None
        return self


class Settings(BaseSettings):
    """All settings of a worker. Environment: ``SP_<SECTION>__<NAME>``, e.g. ``SP_KAFKA__GROUP_ID``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED,
        frozen=True,
        extra="forbid",
        nested_model_default_partial_update=True,
    )

    kafka: KafkaSettings = KafkaSettings()
    registry: RegistrySettings = RegistrySettings()
    topics: TopicSettings = TopicSettings()
    checkpoint: CheckpointSettings = CheckpointSettings()
    model: ModelSettings = ModelSettings()
    limits: LimitSettings = LimitSettings()
    stats: StatsSettings = StatsSettings()
    drift: DriftSettings = DriftSettings()
    output: OutputSettings = OutputSettings()
    labels: LabelSettings = LabelSettings()
    mix: MixSettings = MixSettings()
    observe: ObserveSettings = ObserveSettings()
    input: InputSettings = InputSettings()
    features: FeatureSettings = FeatureSettings()
    dashboard: DashboardSettings = DashboardSettings()
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO",
        description="the lowest level of the lines written",
    )
    log_format: Literal["text", "json"] = Field("text", description="`text`, or `json` (one object per line)")
    # the worker's routine INFO lines (progress, interval checkpoints) at most once per this many
    # seconds each, the others at DEBUG; 0 writes every one at INFO
    log_every_seconds: float = Field(
        10.0, ge=0,
        description="the progress line and an interval checkpoint's line are written at INFO at most once "
        "per this many seconds each, the others at DEBUG; `0` writes every one at INFO",
    )

    @model_validator(mode="after")
    def _a_spec_for_events(self) -> Settings:
        spec = self.features.table() is not None
        if self.input.format != "envelope" and not spec:
            raise ValueError(f"SP_INPUT__FORMAT={self.input.format} needs a feature spec: the config"
                             " file's [features] table, or SP_FEATURES__SPEC")
        if self.input.format == "avro" and self.registry.url is None:
            raise ValueError("SP_INPUT__FORMAT=avro needs the schema registry's address:"
                             " SP_REGISTRY__URL")
        if self.input.format == "envelope" and spec:
            raise ValueError("a feature spec (SP_FEATURES__*) reads events: set SP_INPUT__FORMAT=json"
                             " or avro")
        return self

    @model_validator(mode="after")
    def _classes_agree(self) -> Settings:
        model, limits = self.model, self.limits
        if model.classes is not None and len(model.classes) == 2 and not model.multiclass and (
                limits.positive_class is not None or limits.negative_class is not None):
            raise ValueError("SP_MODEL__CLASSES names the two classes and SP_LIMITS__POSITIVE_CLASS /"
                             " SP_LIMITS__NEGATIVE_CLASS do too: set one form")
        if not model.k_class():
            return self
        if limits.positive_class is not None or limits.negative_class is not None:
            raise ValueError("SP_LIMITS__POSITIVE_CLASS / SP_LIMITS__NEGATIVE_CLASS name the binary"
                             " model's classes: a K-class worker (SP_MODEL__CLASSES,"
                             " SP_MODEL__MULTICLASS) takes its classes from SP_MODEL__CLASSES")
        if self.features.positive is not None or self.features.negative is not None:
            raise ValueError("SP_FEATURES__POSITIVE / SP_FEATURES__NEGATIVE map labels to the binary"
                             " model's signs: a K-class worker takes the label's value as its class")
        named = model.classes or []
        if len(named) > limits.max_classes:
            raise ValueError(f"SP_MODEL__CLASSES names {len(named)} classes, over"
                             f" SP_LIMITS__MAX_CLASSES ({limits.max_classes})")
        for name in named:
            if isinstance(name, str) and len(name) > limits.max_class_chars:
                raise ValueError(f"SP_MODEL__CLASSES: {name[:32]!r}… is {len(name)} characters, over"
                                 f" SP_LIMITS__MAX_CLASS_CHARS ({limits.max_class_chars})")
        check_class_output_bounds(self.codec_limits(), scores=self.output.scores == "all")
        return self

    def codec_limits(self) -> Limits:
        """The limits the codec decodes with: ``SP_LIMITS__*``, and the binary model's two class
        names from ``SP_MODEL__CLASSES`` when it names two."""
        limits = self.limits.codec_limits()
        named = self.model.classes
        if named is not None and len(named) == 2 and not self.model.k_class():
            return replace(limits, negative_class=str(named[0]), positive_class=str(named[1]))
        return limits

    @model_validator(mode="after")
    def _mixing_outside_transactions(self) -> Settings:
        if self.mix.every_examples and self.output.guarantee == "exactly-once":
            raise ValueError(
                f"SP_MIX__EVERY_EXAMPLES={self.mix.every_examples} with SP_OUTPUT__GUARANTEE="
                "exactly-once: a partition's adoption must be on the model topic before the"
                " predictions after it, which a transaction holds back; use at-least-once or"
                " SP_MIX__EVERY_EXAMPLES=0"
            )
        return self

    @model_validator(mode="after")
    def _exactly_once_needs_the_kafka_store(self) -> Settings:
        if self.output.guarantee == "exactly-once" and self.checkpoint.store != "kafka":
            raise ValueError(
                "SP_OUTPUT__GUARANTEE=exactly-once needs SP_CHECKPOINT__STORE=kafka: the states"
                " must be written in the transaction that carries the outputs"
            )
        # a checkpoint interval is one transaction, which the broker aborts after the producer's
        # transaction.timeout.ms (60 s: kafka/edge.py's TRANSACTION_TIMEOUT_MS)
        if self.output.guarantee == "exactly-once" and self.checkpoint.every_seconds >= 50:
            raise ValueError(
                f"SP_CHECKPOINT__EVERY_SECONDS={self.checkpoint.every_seconds:g} with"
                " SP_OUTPUT__GUARANTEE=exactly-once: each interval is one transaction, which the"
                " broker aborts after 60 s; use less than 50 (outputs become visible at each"
                " commit: a few seconds or less suits most readers)"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if _CONFIG_FILE is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=_CONFIG_FILE))
        return tuple(sources)


# The TOML file of the current load; set only inside load_settings().
_CONFIG_FILE: Path | None = None


def env_name(loc: tuple[str | int, ...]) -> str:
    """The environment variable that sets the field at ``loc``, e.g. ``SP_KAFKA__GROUP_ID``."""
    return ENV_PREFIX + ENV_NESTED.join(str(p).upper() for p in loc)


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Load and validate the settings, raising :class:`SettingsError` with one line per problem.

    ``config_file`` defaults to ``$SP_CONFIG``; ``overrides`` are nested dicts that win over
    every other source (the CLI passes its options this way).
    """
    global _CONFIG_FILE
    path = config_file or os.environ.get("SP_CONFIG") or None
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise SettingsError(f"config file {path} (--config / SP_CONFIG) does not exist")
    unknown = unknown_sections(os.environ)
    misspelt = misspelt_names(os.environ)
    if unknown or misspelt:
        known = ", ".join(f"{ENV_PREFIX}{name.upper()}{ENV_NESTED}" for name in _section_names())
        raise SettingsError("\n".join(
            [f"invalid setting {k}: no such section (the sections: {known})" for k in unknown]
            + [f"invalid setting {k}: no such setting (did you mean {hint}?)" for k, hint in misspelt]
        ))
    _CONFIG_FILE = path
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError(describe_validation_error(exc)) from None
    except ValueError as exc:  # e.g. malformed TOML or a nested env value that is not JSON
        where = f" in {path}" if path is not None else ""
        raise SettingsError(f"could not read settings{where}: {exc}") from None
    finally:
        _CONFIG_FILE = None


def describe_validation_error(exc: ValidationError) -> str:
    """One line per invalid setting, naming its environment variable and dotted path.

    A check across a section's settings (a model validator) names the variables in its message;
    the line then names the section as ``SP_<SECTION>__*``.
    """
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not isinstance(p, int))
        dotted = ".".join(str(p) for p in loc) or "settings"
        value = err.get("input")
        msg = err["msg"].removeprefix("Value error, ")
        if isinstance(value, dict) and err["type"] == "value_error" and not loc:
            lines.append(f"invalid settings: {msg}")  # across sections: the message names them
            continue
        if isinstance(value, dict) and err["type"] == "value_error":
            lines.append(f"invalid settings {env_name(loc)}{ENV_NESTED}* ({dotted}): {msg}")
            continue
        # an unknown name may be a misspelt secret (SP_KAFKA__SASL_PASSWD): its value is not shown
        hidden = (_is_secret_loc(loc) or isinstance(value, dict) or err["type"] == "extra_forbidden"
                  or _holds_credentials(value))
        shown = "" if hidden else f" (got {value!r})"
        lines.append(f"invalid setting {env_name(loc)} ({dotted}): {msg}{shown}")
    return "\n".join(lines)


def unknown_sections(environ: Mapping[str, str]) -> list[str]:
    """The variables ``SP_<SECTION>__<NAME>`` in ``environ`` whose section does not exist (a
    misspelt section would otherwise be ignored: ``SP_KAFAK__GROUP_ID``). A misspelt name in a
    section that exists is refused by the section itself."""
    sections = {name.upper() for name in _section_names()}
    out = []
    for key in environ:
        upper = key.upper()
        if upper.startswith(ENV_PREFIX) and ENV_NESTED in upper:
            section = upper[len(ENV_PREFIX):].split(ENV_NESTED, 1)[0]
            if section not in sections:
                out.append(key)
    return sorted(out)


def misspelt_names(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """The variables ``SP_…`` without ``__`` in ``environ`` that are a setting misspelt, each with
    the name meant: a section and one of its settings joined by one underscore
    (``SP_CHECKPOINT_DIR``), or a name close to ``SP_LOG_LEVEL`` or ``SP_LOG_FORMAT``
    (``SP_LOG_LEVL``). Other ``SP_`` variables are not this program's settings and are left alone
    (the fault suite's ``SP_FAULTS_*``, or ``SP_KAFKA_BROKERS`` of some other program).

    >>> misspelt_names({"SP_CHECKPOINT_DIR": "x", "SP_LOG_LEVL": "x", "SP_FAULTS_KILLS": "3",
    ...                 "SP_LOG_LEVEL": "x", "SP_KAFKA": "{}", "SP_KAFKA_BROKERS": "x", "SP_CONF": "x"})
    [('SP_CHECKPOINT_DIR', 'SP_CHECKPOINT__DIR'), ('SP_LOG_LEVL', 'SP_LOG_LEVEL')]
    """
    sections = {name.upper(): Settings.model_fields[name].annotation for name in _section_names()}
    top = [ENV_PREFIX + name.upper() for name in Settings.model_fields if name.upper() not in sections]
    out = []
    for key in sorted(environ):
        upper = key.upper()
        if not upper.startswith(ENV_PREFIX) or ENV_NESTED in upper or upper in top:
            continue
        rest = upper[len(ENV_PREFIX):]
        for section, model in sections.items():
            name = rest.removeprefix(section + "_")
            if name != rest and isinstance(model, type) and name.lower() in model.model_fields:
                out.append((key, f"{ENV_PREFIX}{section}{ENV_NESTED}{name}"))
                break
        else:
            if close := difflib.get_close_matches(upper, top, n=1, cutoff=0.85):
                out.append((key, close[0]))
    return out


def _section_names() -> list[str]:
    """The sections of :class:`Settings` (``kafka``, ``topics``, …), in declaration order."""
    return [name for name, f in Settings.model_fields.items() if isinstance(f.default, BaseModel)]


_SECRET_WORDS = ("password", "secret", "token")
"""A setting whose name holds one of these is a secret: its value is never shown."""


def _is_secret_loc(loc: tuple[str | int, ...]) -> bool:
    return any(word in str(p) for p in loc for word in _SECRET_WORDS)


def _holds_credentials(value: Any) -> bool:
    """Whether ``value`` is a URL with a user or password in it (``https://u:p@host``)."""
    return isinstance(value, str) and "@" in value.partition("://")[2].partition("/")[0]


def redacted(settings: Settings) -> dict[str, Any]:
    """The effective settings as plain data, secrets masked: safe to log."""
    data: dict[str, Any] = settings.model_dump(mode="json")
    for section in data.values():
        if isinstance(section, dict):
            for name, value in section.items():
                if value is not None and any(word in name for word in _SECRET_WORDS):
                    section[name] = "**********"
    return data
