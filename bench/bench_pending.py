"""Memory and stored-state size of the late-label store under a flood of ids never labeled.

Run from the repository root::

    .venv/bin/python -m bench.bench_pending                      # 100,000 events, 20 features
    .venv/bin/python -m bench.bench_pending --events 20000 --features 5

``--events`` events with fresh ids go into one partition's
:class:`~stream_perceptron.model.pending.PendingLabels` bounded at ``--max`` (the default of
``SP_LABELS__PENDING_MAX``), none ever labeled, first with dense features, then with named ones.
Printed for each: the entries kept, the expiries, the memory the store holds at the end as
``tracemalloc`` counts it, the size of its state as a checkpoint writes it (JSON), and the
events per second. The store holds at most ``--max`` events, so both sizes are the same for any
``--events`` past it.
"""

from __future__ import annotations

import argparse
import random
import time
import tracemalloc

import orjson

from stream_perceptron.model.pending import PendingEvent, PendingLabels, kept_features


def flood(events: int, features: int, cap: int, *, named: bool) -> dict[str, float]:
    """One flood through a fresh store; its figures."""
    rng = random.Random(0)
    rows = [[rng.random() for _ in range(features)] for _ in range(256)]
    names = [f"f{j}" for j in range(features)]
    tracemalloc.start()
    store = PendingLabels(cap, 86_400_000)
    started = time.perf_counter()
    for o in range(events):
        row = rows[o % 256]
        x = dict(zip(names, row, strict=True)) if named else row
        store.advance(o, 1_700_000_000_000 + o)
        store.add(f"evt-{o}", PendingEvent(kept_features(x), 1, 0.5, o, 1_700_000_000_000 + o))
    elapsed = time.perf_counter() - started
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"kept": len(store), "expiries": store.expiries, "memory_mb": held / 1e6,
            "state_mb": len(orjson.dumps(store.get_state())) / 1e6, "events_per_s": events / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--max", type=int, default=10_000)
    args = parser.parse_args()
    for named in (False, True):
        r = flood(args.events, args.features, args.max, named=named)
        print(f"{'named' if named else 'dense'}: {r['kept']:,} kept, {r['expiries']:,} expired,"
              f" {r['memory_mb']:.1f} MB held, stored state {r['state_mb']:.1f} MB,"
              f" {r['events_per_s']:,.0f} events/s")


if __name__ == "__main__":
    main()
