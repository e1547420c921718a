"""What clients that hold connections open cost the worker's metrics server and the dashboard:
resident memory and threads, with large request headers held open, and whether the server still
answers meanwhile.

    .venv/bin/python -m bench.bench_http                      # this checkout: 60 and 200 connections
    .venv/bin/python -m bench.bench_http --compare 5cb8f5d    # the same probes on 5cb8f5d too
    .venv/bin/python -m bench.bench_http --connections 60 --server metrics

The probe (:func:`large_headers`) and the figures: docs/reliability.md, row 12. Each server runs
alone in a child process (:func:`served`); the connections are held 1 s after the probe, and a
``GET`` of the main path is timed just before they close.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.worker.formatting import format_table, write_json
from bench.worker.measures import parse_status

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ("metrics", "dashboard")
MAIN_PATH = {"metrics": "/metrics", "dashboard": "/api/state"}

# the child: one server on 127.0.0.1, port 0, with the code on its path (this checkout's or a
# ref's: both APIs take these calls); it prints its port and serves until its stdin closes
_CHILD = """\
import sys, threading
kind = sys.argv[1]
if kind == "metrics":
    from stream_perceptron.worker.observe import Observer
    server = Observer(host="127.0.0.1", port=0)
    server.start()
    port = server.port
else:
    from stream_perceptron.commands.dashboard import DashboardServer
    from stream_perceptron.commands.stats_view import StatsView
    server = DashboardServer("127.0.0.1", 0, StatsView())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
print(port, flush=True)
sys.stdin.read()
"""


@dataclass(frozen=True)
class Served:
    """A server in a child process: its process id and port."""

    pid: int
    port: int


@contextlib.contextmanager
def served(kind: str, root: Path = ROOT) -> Iterator[Served]:
    """The ``kind`` server (``metrics`` or ``dashboard``) in a child process running the code
    under ``root``; stopped on leaving."""
    if kind not in SERVERS:
        raise ValueError(f"kind must be one of {SERVERS}")
    env = {**os.environ, "PYTHONPATH": str(root)}
    with tempfile.TemporaryDirectory(prefix="bench-http-") as cwd:  # not a checkout: its code only
        child = subprocess.Popen([sys.executable, "-c", _CHILD, kind], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, cwd=cwd, env=env, text=True)
        try:
            assert child.stdout is not None
            line = child.stdout.readline()
            if not line.strip().isdigit():
                raise RuntimeError(f"the {kind} server did not start (exit {child.wait(10)})")
            yield Served(child.pid, int(line))
        finally:
            if child.stdin is not None:
                child.stdin.close()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(10)
            if child.stdout is not None:
                child.stdout.close()


def process_status(pid: int) -> tuple[int, int]:
    """(resident memory in KiB, threads) of ``pid``, from /proc/PID/status."""
    status = parse_status(Path(f"/proc/{pid}/status").read_text(), ("VmRSS", "Threads"))
    return status.get("VmRSS", -1), status.get("Threads", -1)


def get(port: int, path: str, timeout_s: float = 10.0) -> tuple[int, float]:
    """``GET path``: (status, seconds to the whole answer); status 0 when there was none."""
    started = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
    except OSError:
        return 0, time.monotonic() - started
    parts = data.split(b" ", 2)
    status = int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else 0
    return status, time.monotonic() - started


def large_head(lines: int = 99, line_bytes: int = 65536) -> bytes:
    """A request line and ``lines`` header lines of ``line_bytes`` each, with no end to the head."""
    filler = b"a" * (line_bytes - 14)  # "X-Big-NNNN: " and CR LF around it
    return b"GET /metrics HTTP/1.1\r\n" + b"".join(b"X-Big-%04d: %s\r\n" % (i, filler) for i in range(lines))


@dataclass
class Samples:
    """Resident memory (KiB) and threads of a process, sampled."""

    pid: int
    rss_kb: list[int] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)

    def take(self) -> tuple[int, int]:
        rss, threads = process_status(self.pid)
        self.rss_kb.append(rss)
        self.threads.append(threads)
        return rss, threads


def large_headers(served: Served, connections: int, *, path: str = "/metrics", seconds: float = 60.0,
                  head: bytes | None = None) -> dict[str, Any]:
    """The probe (see the module's docstring) against ``served``: its figures."""
    payload = memoryview(head if head is not None else large_head())
    samples = Samples(served.pid)
    before_kb, threads_before = samples.take()
    socks: dict[socket.socket, int] = {}  # each connection: how much of the payload it has sent
    closed = 0
    selector = selectors.DefaultSelector()
    started = time.monotonic()
    try:
        for _ in range(connections):
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=10)
            sock.setblocking(False)
            socks[sock] = 0
            selector.register(sock, selectors.EVENT_WRITE)
        next_sample = time.monotonic()
        while selector.get_map() and time.monotonic() - started < seconds:
            for key, _ in selector.select(timeout=0.02):
                sock = key.fileobj  # type: ignore[assignment]
                try:
                    socks[sock] += sock.send(payload[socks[sock]:socks[sock] + 262144])
                except BlockingIOError:
                    continue
                except OSError:  # closed by the server
                    closed += 1
                    selector.unregister(sock)
                    continue
                if socks[sock] >= len(payload):
                    selector.unregister(sock)  # all sent: held open, the head never ended
            if time.monotonic() >= next_sample:
                samples.take()
                next_sample = time.monotonic() + 0.02
        sent_s = time.monotonic() - started
        held_until = time.monotonic() + 1.0
        while time.monotonic() < held_until:
            samples.take()
            time.sleep(0.02)
        held_kb, _ = samples.take()
        status, answer_s = get(served.port, path)
    finally:
        selector.close()
        for sock in socks:
            sock.close()
    after_until = time.monotonic() + 1.0
    while time.monotonic() < after_until:
        samples.take()
        time.sleep(0.02)
    after_kb, _ = samples.take()
    return {
        "connections": connections, "closed_by_server": closed, "seconds": round(sent_s, 2),
        "rss_before_kb": before_kb, "rss_peak_kb": max(samples.rss_kb), "rss_held_kb": held_kb,
        "rss_after_kb": after_kb, "threads_before": threads_before, "threads_peak": max(samples.threads),
        "answer_status": status, "answer_s": round(answer_s, 3),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--connections", default="60,200", help="comma-separated connection counts (60,200)")
    p.add_argument("--server", choices=[*SERVERS, "both"], default="both")
    p.add_argument("--compare", metavar="REF", help="the same probes on REF too (a git ref)")
    p.add_argument("--seconds", type=float, default=60.0, help="the most a probe sends for (60)")
    p.add_argument("--json", type=Path, help="write every figure to this file")
    args = p.parse_args(argv)
    try:
        args.connections = [int(n) for n in args.connections.split(",")]
    except ValueError:
        p.error("--connections takes comma-separated counts")
    if min(args.connections) < 1 or args.seconds <= 0:
        p.error("--connections must be >= 1, --seconds positive")
    return args


def _mb(kb: int) -> str:
    return f"{kb / 1024:.0f}"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    kinds = SERVERS if args.server == "both" else (args.server,)
    runs: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        sides = [("this checkout", ROOT)]
        if args.compare:
            from bench.worker.machine import worktree

            base, commit = stack.enter_context(worktree(args.compare))
            sides.insert(0, (commit[:7], base))
        for label, root in sides:
            for kind in kinds:
                for n in args.connections:
                    with served(kind, root) as server:
                        get(server.port, MAIN_PATH[kind])  # warm: the first answer's allocations
                        run = large_headers(server, n, path=MAIN_PATH[kind], seconds=args.seconds)
                    runs.append({"code": label, "server": kind, **run})
    rows = [[r["code"], r["server"], r["connections"], _mb(r["rss_before_kb"]), _mb(r["rss_peak_kb"]),
             _mb(r["rss_held_kb"]), _mb(r["rss_after_kb"]), f"+{_mb(r['rss_peak_kb'] - r['rss_before_kb'])}",
             f"{r['threads_before']} → {r['threads_peak']}", f"{r['closed_by_server']}/{r['connections']}",
             f"{r['answer_status']} in {r['answer_s']:.3f} s"] for r in runs]
    print(format_table(["code", "server", "conns", "MB before", "peak", "held", "after", "growth",
                        "threads", "closed", "GET while held"], rows, align="llrrrrrrrrl"))
    report = {"runs": runs}
    write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
