"""Parts of kafka-python's internals replaced for speed, each guarded by shape checks and a live
equivalence probe, falling back to kafka-python's own path: see ``README.md`` beside this file."""
