"""kafka-python clients' configuration, and the topic checks made at start: which topics are
missing, and creating the outputs. Used by the kafka-python edge, the worker's start, and the
commands (produce, read, watch, demo).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.errors import IncompatibleBrokerVersion, KafkaError, TopicAlreadyExistsError, for_code

from stream_perceptron.errors import KafkaAuthError, KafkaEdgeError
from stream_perceptron.kafka.config import (
    certificate_refused,
    check_reachable,
    describe,
    path_text,
    reveal,
    servers,
    servers_text,
)
from stream_perceptron.settings import KafkaSettings

log = logging.getLogger(__name__)


def consumer_config(kafka: KafkaSettings) -> dict[str, Any]:
    """Common kwargs for every kafka-python consumer: :func:`client_config`, and the bound on one
    fetch response.

    ``fetch_max_bytes`` bounds one fetch response. Kafka-python's own default (50 MB) lets a
    broker that ignores the per-partition limit, as the embedded one does, answer with 5 MB
    (50,000 records) at a time, which came and went as 15-30 MB of resident memory.

    >>> consumer_config(KafkaSettings(bootstrap_servers="a:9092"))["fetch_max_bytes"]
    1048576
    """
    return {**client_config(kafka), "fetch_max_bytes": kafka.fetch_max_bytes}


def consumer_fetch_config(kafka: KafkaSettings) -> dict[str, Any]:
    """How many records the worker's consumer returns per poll and how long a fetch waits.

    >>> consumer_fetch_config(KafkaSettings())
    {'max_poll_records': 2000, 'fetch_max_wait_ms': 50}
    """
    return {"max_poll_records": kafka.max_poll_records, "fetch_max_wait_ms": kafka.fetch_max_wait_ms}


def client_config(kafka: KafkaSettings) -> dict[str, Any]:
    """Common kwargs for every kafka-python client, unset options omitted.

    Secrets (SASL and SSL key passwords) are revealed here and nowhere else: never log
    the returned dict.

    >>> cfg = client_config(KafkaSettings(bootstrap_servers="a:9092, b:9092"))
    >>> cfg["bootstrap_servers"], cfg["security_protocol"], "sasl_mechanism" in cfg
    (['a:9092', 'b:9092'], 'PLAINTEXT', False)
    """
    config: dict[str, Any] = {
        "bootstrap_servers": servers(kafka),
        "client_id": kafka.client_id,
        "request_timeout_ms": kafka.request_timeout_ms,
        "security_protocol": kafka.security_protocol,
        "ssl_check_hostname": kafka.ssl_check_hostname,
    }
    optional: dict[str, Any] = {
        "sasl_mechanism": kafka.sasl_mechanism,
        "sasl_plain_username": kafka.sasl_username,
        "sasl_plain_password": reveal(kafka.sasl_password),
        "ssl_cafile": path_text(kafka.ssl_cafile),
        "ssl_certfile": path_text(kafka.ssl_certfile),
        "ssl_keyfile": path_text(kafka.ssl_keyfile),
        "ssl_password": reveal(kafka.ssl_password),
    }
    config.update({name: value for name, value in optional.items() if value is not None})
    return config


# kafka-python's words for a login the broker refused (the broker's reason follows the last
# error name), for a mechanism it does not offer, for a certificate it refused (OpenSSL's
# reason) and for another TLS failure
_SASL_REFUSED = re.compile(r"SaslAuthenticationFailedError: (?!.*SaslAuthenticationFailedError: )(.*)")
_SASL_UNOFFERED = re.compile(r"SaslHandshake failed: .*|does not support \S+ sasl mechanism.*")
_CERTIFICATE_REFUSED = re.compile(
    r"\[SSL: CERTIFICATE_VERIFY_FAILED\] certificate verify failed: (.*?)(?: \(_ssl\.c:\d+\))?\)?$")
_TLS_FAILED = re.compile(r"\[SSL: \w+\] .*?(?=(?: \(_ssl\.c:\d+\))?\)?$)")
# A connection the broker closed after its ApiVersions answer (the client knows the broker's
# version) and before the client said it was connected: with SASL, during the login. Apache
# Kafka answers a refused login, then closes; kafka-python 3.0.12 drops what it read when the
# close comes in the same read, so the broker's reason can be missing from its lines.
_CLOSED_AFTER_VERSIONS = re.compile(
    r"<KafkaConnection [^>]*broker_version=\(\d[^)]*\)[^>]*>: Connection lost: KafkaConnectionError:"
    r" socket disconnected")


class _ClientErrors(logging.Handler):
    """Collects kafka-python's own ERROR lines while a client connects: they name the cause
    (a refused login, a TLS failure) that its exceptions leave out."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def security_failure(kafka: KafkaSettings, messages: Sequence[str]) -> str | None:
    """One line for the last refused login or TLS failure that kafka-python's ERROR
    ``messages`` name (None if none does): a refused login names the user and mechanism and the
    broker's reason; a TLS failure, the CA file and the host name checked. Lines that merely
    follow such a failure (``socket disconnected``, a timeout) name nothing, but with SASL a
    connection the broker closed during the login, where no line names a reason, is taken for a
    refused login.

    >>> kafka = KafkaSettings(bootstrap_servers="kafka:9093", security_protocol="SASL_SSL",
    ...                       sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p")
    >>> said = security_failure(kafka, [
    ...     "<KafkaConnection node_id=bootstrap-0 (disconnected)>: Connection lost: [Error 58]"
    ...     " SaslAuthenticationFailedError: SaslAuthenticationFailedError: Authentication failed:"
    ...     " Invalid username or password",
    ...     "<KafkaSSLTransport [127.0.0.1:9093<-1]>: Abort (KafkaConnectionError: socket disconnected)"])
    >>> print(said.removeprefix("Kafka at kafka:9093 refused the connection: "))
    SASL authentication failed (mechanism PLAIN, user u): Authentication failed: Invalid username or password
    """
    for message in reversed(messages):
        if certificate := _CERTIFICATE_REFUSED.search(message):
            return certificate_refused(kafka, servers_text(kafka), certificate.group(1))
        if tls := _TLS_FAILED.search(message):
            return f"TLS with Kafka at {servers_text(kafka)} failed: the handshake failed: {tls.group(0)}"
        sasl = _SASL_REFUSED.search(message) or _SASL_UNOFFERED.search(message)
        if sasl:
            reason = sasl.group(1) if sasl.re is _SASL_REFUSED else sasl.group(0)
            if message.endswith(")") and reason.count(")") > reason.count("("):
                reason = reason[:-1]  # the close of kafka-python's "Abort (...)"
            return _login_refused(kafka, reason)
    if kafka.security_protocol.startswith("SASL") and any(map(_CLOSED_AFTER_VERSIONS.search, messages)):
        return _login_refused(kafka, "the broker closed the connection during the login, its reason"
                                     " unread by the client")
    return None


def _login_refused(kafka: KafkaSettings, reason: str) -> str:
    return (f"Kafka at {servers_text(kafka)} refused the connection: SASL authentication failed"
            f" (mechanism {kafka.sasl_mechanism}, user {kafka.sasl_username}): {reason}")


@contextlib.contextmanager
def explained(kafka: KafkaSettings) -> Iterator[None]:
    """Turn a failed connection whose cause was authentication or TLS into :class:`KafkaAuthError`."""
    handler = _ClientErrors()
    logger = logging.getLogger("kafka")
    logger.addHandler(handler)
    try:
        yield
    except KafkaEdgeError as exc:
        if isinstance(exc, KafkaAuthError):
            raise
        said = security_failure(kafka, handler.messages)
        if said is None:
            raise
        raise KafkaAuthError(said[:600]) from None
    finally:
        logger.removeHandler(handler)


@contextlib.contextmanager
def reaching(kafka: KafkaSettings) -> Iterator[None]:
    """Within it, a client error while reaching the cluster (a port that does not answer as Kafka,
    a refused login) becomes one :class:`KafkaEdgeError` (:class:`KafkaAuthError`) naming it."""
    with explained(kafka):
        try:
            yield
        except KafkaError as exc:
            raise KafkaEdgeError(f"cannot reach Kafka at {servers_text(kafka)}: {describe(exc)}") from None


def _metadata_consumer(kafka: KafkaSettings, timeout_s: float) -> Any:
    check_reachable(kafka, timeout_s)
    with reaching(kafka):
        return KafkaConsumer(
            **client_config(kafka),
            allow_auto_create_topics=False,
            enable_auto_commit=False,  # no group: nothing to commit (and no warning)
            bootstrap_timeout_ms=max(1_000, int(timeout_s * 1000)),
        )


def missing_topics(kafka: KafkaSettings, names: Iterable[str], timeout_s: float = 30) -> list[str]:
    """Which of ``names`` do not exist (asked without creating any)."""
    consumer = _metadata_consumer(kafka, timeout_s)
    try:
        existing = consumer.topics()
    except KafkaError as exc:
        raise KafkaEdgeError(f"cannot list topics at {servers_text(kafka)}: {describe(exc)}") from None
    finally:
        consumer.close()
    return [name for name in names if name not in existing]


def partition_count(kafka: KafkaSettings, topic: str, timeout_s: float = 30) -> int | None:
    """How many partitions ``topic`` has (None: it does not exist)."""
    consumer = _metadata_consumer(kafka, timeout_s)
    try:
        consumer.topics()  # the cluster's metadata, fetched
        found = consumer.partitions_for_topic(topic)
    except KafkaError as exc:
        raise KafkaEdgeError(f"cannot read topics at {servers_text(kafka)}: {describe(exc)}") from None
    finally:
        consumer.close()
    return len(found) if found else None


def ensure_topics(kafka: KafkaSettings, topics: Mapping[str, int], timeout_s: float = 30,
                  configs: Mapping[str, str] | None = None) -> None:
    """Create each topic (name -> partition count) that does not exist yet, with the topic
    ``configs`` given (``{"cleanup.policy": "compact"}``; the broker's defaults otherwise).

    Idempotent: existing topics are left as they are (their partition count and configs are
    not changed). The replication factor is the cluster default (-1) on brokers >= 2.4, else 1.
    Raises :class:`KafkaEdgeError` when the cluster cannot be reached within ``timeout_s``
    or refuses to create a topic.
    """
    if not topics:
        return
    timeout_ms = max(1_000, int(timeout_s * 1000))
    check_reachable(kafka, timeout_s)
    try:
        admin = KafkaAdminClient(**client_config(kafka), bootstrap_timeout_ms=timeout_ms)
    except KafkaError as exc:
        raise KafkaEdgeError(
            f"cannot reach Kafka at {servers_text(kafka)} to create topics: {describe(exc)}"
        ) from None
    try:
        _create_topics(admin, topics, timeout_ms, configs or {})
    except KafkaError as exc:
        raise KafkaEdgeError(
            f"cannot create topics {sorted(topics)} at {servers_text(kafka)}: {describe(exc)}"
        ) from None
    finally:
        admin.close()


def _create_topics(admin: Any, topics: Mapping[str, int], timeout_ms: int, configs: Mapping[str, str]
                   ) -> None:
    def request(replication: int) -> dict[str, Any]:
        spec = {
            name: {"num_partitions": count, "replication_factor": replication, "configs": dict(configs)}
            for name, count in topics.items()
        }
        result: dict[str, Any] = admin.create_topics(
            spec, timeout_ms=timeout_ms, raise_errors=False, wait_for_metadata=True
        )
        return result

    try:
        result = request(-1)
    except IncompatibleBrokerVersion:  # broker < 2.4: no "cluster default" replication
        result = request(1)
    for topic in result["topics"]:
        error = for_code(topic["error_code"])
        if error is TopicAlreadyExistsError:
            log.debug("topic %s exists already", topic["name"])
        elif topic["error_code"] != 0:
            message = topic.get("error_message") or error.__name__
            raise KafkaEdgeError(f"cannot create topic {topic['name']}: {message}")
        else:
            log.info("created topic %s (%d partitions)", topic["name"], topics[topic["name"]])
