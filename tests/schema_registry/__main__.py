"""``python -m tests.schema_registry``: a local schema registry, Apicurio Registry (``make registry``).

Runs until Ctrl-C, printing the URL of its Confluent-compatible API, then removes its storage.
``--fetch`` only fetches the server into the cache (``make registry-jars``).
"""

from __future__ import annotations

import argparse
import sys
import time

from stream_perceptron.signals import stopping_on_signals
from tests.schema_registry import APICURIO_VERSION, Apicurio, ApicurioUnavailable, fetch, why_not


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.schema_registry", description=__doc__)
    parser.add_argument("--fetch", action="store_true", help="only fetch the server")
    args = parser.parse_args(argv)
    reason = why_not()
    if reason is not None:
        print(f"schema-registry: cannot run a schema registry here: {reason}", file=sys.stderr)
        return 2
    try:
        if args.fetch:
            print(f"Apicurio Registry {APICURIO_VERSION} in {fetch()}")
            return 0
        started = time.monotonic()
        registry = Apicurio()
        registry.start()
    except ApicurioUnavailable as exc:
        print(f"schema-registry: {exc}", file=sys.stderr)
        return 1
    try:
        with stopping_on_signals(again=None) as stop:
            print(f"Apicurio Registry {APICURIO_VERSION}, ready in {time.monotonic() - started:.1f} s "
                  f"(storage and log in {registry.root})")
            print(f"  {registry.url}   e.g. SP_REGISTRY__URL={registry.url}")
            print("Ctrl-C stops it and removes its storage.", flush=True)
            while not stop.wait(0.5):
                pass
    finally:
        registry.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
