"""The worker benchmark's parts; ``python -m bench.bench_worker`` runs it (see its docstring)."""
