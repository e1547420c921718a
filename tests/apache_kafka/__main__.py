"""``python -m tests.apache_kafka``: a local Apache Kafka from its Maven jars (``make kafka``).

Runs until Ctrl-C, then removes its storage. ``--fetch`` only fetches the jars into the cache
(``make kafka-jars``). With ``--secure`` it also serves SSL and SASL_SSL; the CA file and the
users' passwords are written to a file in its directory (never printed).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from tests.apache_kafka import KAFKA_VERSION, ApacheKafka, KafkaUnavailable, fetch_jars, why_not


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.apache_kafka", description=__doc__)
    parser.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    parser.add_argument("--secure", action="store_true", help="SSL and SASL_SSL listeners too")
    parser.add_argument("--fetch", action="store_true", help="only fetch the jars")
    args = parser.parse_args(argv)
    reason = why_not()
    if reason is not None:
        print(f"apache-kafka: cannot run Apache Kafka here: {reason}", file=sys.stderr)
        return 2
    try:
        if args.fetch:
            print(f"Apache Kafka {KAFKA_VERSION} jars in {fetch_jars()}")
            return 0
        started = time.monotonic()
        cluster = ApacheKafka(nodes=args.nodes, secure=args.secure)
        cluster.start()
    except KafkaUnavailable as exc:
        print(f"apache-kafka: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):  # SIGINT too where a shell ignored it
        signal.signal(signum, lambda *_: stop.set())
    try:
        print(f"Apache Kafka {KAFKA_VERSION}, {args.nodes} node(s), ready in "
              f"{time.monotonic() - started:.1f} s (storage and logs in {cluster.root})")
        print(f"  PLAINTEXT  {cluster.bootstrap}   e.g. SP_KAFKA__BOOTSTRAP_SERVERS={cluster.bootstrap}")
        if args.secure:
            secrets_file = cluster.root / "credentials.txt"
            secrets_file.write_text("".join(f"{user} {password}\n"
                                            for user, password in cluster.passwords.items()))
            secrets_file.chmod(0o600)
            print(f"  SSL        {cluster.ssl_bootstrap}   CA file {cluster.ca_file}")
            print(f"  SASL_SSL   {cluster.sasl_bootstrap}   SCRAM-SHA-512 and PLAIN; users and "
                  f"passwords in {secrets_file}")
        print("Ctrl-C stops it and removes its storage.", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
