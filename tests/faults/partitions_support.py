"""The pieces of the partition tests (``test_partitions.py``): a consumer group of worker
processes, the group's committed offsets watched while they run, a paced keyed input, and the
check of the end state against the seeds' perceptron run over each partition alone.

Everything waits with a deadline; nothing sleeps unboundedly.
"""

from __future__ import annotations

import random
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from bench.bench_scale import GroupAdmin
from stream_perceptron.commands.read import read_topic
from stream_perceptron.kafka.admin import client_config, consumer_config
from stream_perceptron.settings import KafkaSettings, Settings
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.state.stored import StoredState, read
from stream_perceptron.worker.stores import open_store
from tests.integration.helpers import core_reference

from .support import fault_settings, reap, start_worker, wait_until

STORES = ("directory", "kafka")
# the worker's log lines of a partition taken on (where it starts) and of partitions given up
ASSIGNED = re.compile(r"^(?P<stamp>\S+ \S+) .* assigned (?P<topic>\S+)\[(?P<partition>\d+)\]:"
                      r" starting at (?P<start>\d+|the earliest)")
REVOKED = re.compile(r" revoked \[(.*)\]: ")


def final_state(settings: Settings, topic: str, partition: int) -> StoredState | None:
    """The state the store of ``settings`` holds for ``topic[partition]`` at the end of a run
    (None: none); the one place these tests read a stored state, through the store's own
    ``load`` (:func:`~stream_perceptron.worker.stores.open_store`, reading the state topic as it
    is with the Kafka store)."""
    store = open_store(settings, partitions=None)
    try:
        return store.load(topic, partition)
    finally:
        store.close()


def rewinds(directory: Path, topic: str, partitions: int) -> tuple[int, list[tuple[int, str, int, int]]]:
    """The directory store's files of every partition, in the order they were saved: how many,
    and (partition, file, its next offset, the one before it) for each state stored behind the
    state saved before it, as a save that was not fenced would be. Needs ``SP_CHECKPOINT__KEEP``
    high enough that no file was pruned."""
    store = DirectoryStore(directory)
    files, behind = 0, []
    for p in range(partitions):
        before: int | None = None
        for path in store.files(topic, p).files():
            files += 1
            offset = read(path).offsets[topic][p]
            if before is not None and offset < before:
                behind.append((p, path.name, offset, before))
            before = offset
    return files, behind


# -- the consumer group, seen from outside -------------------------------------------------------

def group_members(admin: KafkaAdminClient, group: str) -> tuple[str, frozenset[str]]:
    """The group's state (``Stable`` once every member has its partitions) and member ids."""
    desc = admin.describe_groups([group])[group]
    return desc["group_state"], frozenset(m["member_id"] for m in desc["members"])


def group_admin(kafka: KafkaSettings) -> KafkaAdminClient:
    """An admin client that can describe the group on tansu too (:class:`GroupAdmin`)."""
    return GroupAdmin(**client_config(kafka))


class CommitWatch(threading.Thread):
    """The group's committed offsets, polled every ``every_s`` (``list_group_offsets``) for as
    long as the test runs: each partition's history of values, so a decrease shows."""

    def __init__(self, kafka: KafkaSettings, topic: str, every_s: float = 0.1) -> None:
        super().__init__(daemon=True, name="commit-watch")
        self.kafka, self.topic, self.every_s = kafka, topic, every_s
        self.history: dict[int, list[int]] = {}
        self.polls = 0
        self.errors: list[str] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        admin = KafkaAdminClient(**client_config(self.kafka))
        try:
            while not self._stop_event.is_set():
                try:
                    got = admin.list_group_offsets({self.kafka.group_id: None})[self.kafka.group_id]
                except Exception as exc:  # a broker busy with a rebalance: noted, polled again
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                else:
                    self.polls += 1
                    for tp, om in got.items():
                        if tp.topic == self.topic and om.offset >= 0:
                            seen = self.history.setdefault(tp.partition, [])
                            if not seen or seen[-1] != om.offset:
                                seen.append(om.offset)
                self._stop_event.wait(self.every_s)
        finally:
            admin.close()

    def latest(self) -> dict[int, int]:
        return {p: h[-1] for p, h in self.history.items() if h}

    def decreases(self) -> list[tuple[int, int, int]]:
        """(partition, from, to) for every committed offset that went below the one before it."""
        return [(p, a, b) for p, h in sorted(self.history.items()) for a, b in zip(h, h[1:], strict=False)
                if b < a]

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)


# -- worker processes in one group ---------------------------------------------------------------

@dataclass
class Member:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    settings: Settings
    log_from: int = 0  # where this run's lines begin in the log (it continues across restarts)

    def run_log(self) -> str:
        """This run's lines of the log ('' before it has written one)."""
        try:
            with open(self.log, "rb") as fh:
                fh.seek(self.log_from)
                return fh.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def learned(self) -> bool:
        """This run has published a statistics record of examples it processed (a progress
        line ``N partitions: seen S`` with S > 0): a kill now finds work since its last state."""
        return re.search(r"\d+ partitions: seen [1-9]", self.run_log()) is not None

    def held(self, topic: str) -> set[int]:
        """The partitions of ``topic`` this run holds, as its log says: each ``assigned T[p]:
        starting …`` line adds one, each ``revoked [(T, p), …]`` line takes its partitions away."""
        held: set[int] = set()
        for line in self.run_log().splitlines():
            if (m := ASSIGNED.match(line)) and m["topic"] == topic:
                held.add(int(m["partition"]))
            elif m := REVOKED.search(line):
                held -= {int(p) for t, p in re.findall(r"\('([^']*)', (\d+)\)", m[1]) if t == topic}
        return held


class Group:
    """Worker processes (``stream-perceptron run``) in one consumer group, started, killed,
    terminated, stopped and continued by name.

    With the directory store every worker shares one ``SP_CHECKPOINT__DIR``; with the Kafka store
    each process gets an empty directory of its own, so whatever it restores came from Kafka.
    A worker that exits unasked for is noted in :attr:`unexpected` and dropped.
    """

    def __init__(self, make_kafka: Callable[..., KafkaSettings], topics: dict[str, str], store: str,
                 root: Path, **sections: Any) -> None:
        self.make_kafka, self.topics, self.store, self.root = make_kafka, topics, store, root
        self.sections = sections
        self.live: dict[str, Member] = {}
        self.named: set[str] = set()
        self.started: list[subprocess.Popen[bytes]] = []  # every process, reaped by close()
        self.unexpected: list[str] = []
        self.exits: list[tuple[str, str, int | None]] = []  # (name, how, exit code)
        self.starts = 0
        self._admin = group_admin(make_kafka())
        self._before: frozenset[str] | None = None  # the members when a worker last started

    @property
    def group_id(self) -> str:
        return self.make_kafka().group_id

    def settings(self, name: str) -> Settings:
        """``name``'s settings: its client id, the store, and where its files go."""
        self.starts += 1
        ckpt: dict[str, Any] = {"store": self.store, "topic": f"{self.topics['input']}-state",
                                **self.sections.get("checkpoint", {})}
        ckpt["dir"] = str(self.root / "state" if self.store == "directory"
                          else self.root / "local" / f"{name}.{self.starts}")
        sections = {**self.sections, "checkpoint": ckpt}
        return fault_settings(self.make_kafka(client_id=name), self.topics, Path(ckpt["dir"]),
                              **sections)

    def new_name(self) -> str:
        """``w<k>`` for the lowest ``k`` no worker of this group has been named yet."""
        k = 1
        while f"w{k}" in self.named:
            k += 1
        return f"w{k}"

    def start(self, name: str, module: str = "stream_perceptron.cli",
              extra_env: Mapping[str, str] | None = None) -> Member:
        """Start worker ``name`` (again, if it ran before: its log continues); ``module`` and
        ``extra_env`` as :func:`~.support.start_worker` takes them (a worker with a fault inside)."""
        if name in self.live:
            raise ValueError(f"{name} is running already")
        self.named.add(name)
        if self._before is None:
            self._before = self.members()[1]
        settings = self.settings(name)
        log = self.root / f"{name}.log"
        start = log.stat().st_size if log.exists() else 0
        proc = start_worker(settings, log=log, module=module, extra_env=extra_env)
        member = self.live[name] = Member(name, proc, log, settings, start)
        self.started.append(member.proc)
        return member

    def run_until_caught_up(self, name: str, timeout_s: float = 90) -> Member:
        """Run worker ``name`` with ``--until-caught-up`` to its end; an exit other than 0 (or
        none by the deadline) is noted in :attr:`unexpected`."""
        settings = self.settings(name)
        log = self.root / f"{name}.log"
        proc = start_worker(settings, "--until-caught-up", log=log)
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            reap(proc)
        self.exits.append((name, "--until-caught-up", code))
        if code != 0:
            self.unexpected.append(f"{name} (--until-caught-up) exited {code}: {tail(log)}")
        return Member(name, proc, log, settings)

    def kill9(self, name: str) -> None:
        member = self.live.pop(name)
        member.proc.send_signal(signal.SIGKILL)
        self.exits.append((name, "kill -9", member.proc.wait(timeout=10)))

    def published(self) -> dict[int, int]:
        """The highest input offset of each partition that the predictions topic holds a
        prediction of (read_uncommitted: an open transaction's too)."""
        out: dict[int, int] = {}
        for value in read_raw(self.make_kafka(), self.topics["predictions"]):
            rec = orjson.loads(value)
            out[rec["partition"]] = max(out.get(rec["partition"], -1), rec["offset"])
        return out

    def starts_since(self, stamp: str) -> dict[int, list[int]]:
        """Where each worker of the group, in a log line stamped ``stamp`` or later, started
        a partition of the input it was assigned (``assigned T[p]: starting at X``; the
        earliest offset is 0), by partition."""
        out: dict[int, list[int]] = {}
        for log in self.root.glob("*.log"):
            for line in log.read_text(errors="replace").splitlines():
                m = ASSIGNED.match(line)
                if m and m["topic"] == self.topics["input"] and m["stamp"] >= stamp:
                    start = 0 if m["start"] == "the earliest" else int(m["start"])
                    out.setdefault(int(m["partition"]), []).append(start)
        return out

    def kill9_noting(self, name: str) -> Callable[[], bool]:
        """``kill -9`` ``name`` now, and return a check to call once the group has settled
        again: whether the kill left work to redo. It did when a partition ``name`` held at
        the kill was started again after it (by any worker) at or before an offset of that
        partition whose prediction was published before the kill. (A kill just after a
        checkpoint, or before the predictions since it left the client, leaves none: under
        load a worker checkpoints after most of its batches.)"""
        member = self.live[name]
        published, held = self.published(), member.held(self.topics["input"])
        self.kill9(name)
        now = time.time()  # the logs' stamps: local time, to the millisecond
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"

        def left_work_to_redo() -> bool:
            deadline = time.monotonic() + 10
            while True:  # the workers log their assignments just after the group is stable
                starts = self.starts_since(stamp)
                if held <= starts.keys() or time.monotonic() > deadline:
                    return any(s <= published.get(p, -1) for p in held for s in starts.get(p, []))
                time.sleep(0.1)

        return left_work_to_redo

    def kill9_leaving_work_to_redo(self, name: str, rng: random.Random, attempts: int = 5) -> int:
        """``kill -9`` ``name`` at a random moment after it has learned, restart it and settle,
        until a kill leaves work to redo (:meth:`kill9_noting`). Returns the kills it took, 0
        when none of ``attempts`` did."""
        for attempt in range(1, attempts + 1):
            wait_until(self.live[name].learned, 30, f"{name} to process records")
            time.sleep(rng.uniform(0.2, 1.2))  # deliberate fault timing: a random moment
            redo = self.kill9_noting(name)
            self.start(name)
            self.settle()
            if redo():
                return attempt
        return 0

    def terminate(self, name: str, timeout_s: float = 30) -> int | None:
        """SIGTERM ``name`` and wait for its exit; its exit code."""
        member = self.live.pop(name)
        member.proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = member.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = reap(member.proc)
            self.unexpected.append(f"{name} still running {timeout_s:g} s after SIGTERM")
        self.exits.append((name, "SIGTERM", code))
        if code != 0:
            self.unexpected.append(f"{name} exited {code} on SIGTERM: {tail(member.log)}")
        return code

    def pause(self, name: str) -> None:
        self.live[name].proc.send_signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self.live[name].proc.send_signal(signal.SIGCONT)

    def members(self) -> tuple[str, frozenset[str]]:
        try:
            return group_members(self._admin, self.group_id)
        except Exception as exc:  # the coordinator busy: no answer this time
            return f"unknown ({type(exc).__name__})", frozenset()

    def _drop_exited(self) -> None:
        for name, member in list(self.live.items()):
            if member.proc.poll() is not None:
                del self.live[name]
                self.exits.append((name, "exited by itself", member.proc.returncode))
                self.unexpected.append(f"{name} exited {member.proc.returncode}: {tail(member.log)}")
                self._before = None  # no new member to wait for: it is gone

    def settle(self, expect: int | None = None, timeout_s: float = 40) -> float:
        """Wait until the group is ``Stable`` with ``expect`` members (default: the live
        workers), any worker started since the last settle among them; the seconds it took."""
        started = time.monotonic()
        while True:
            self._drop_exited()
            state, members = self.members()
            fresh = self._before is None or bool(members - self._before)
            want = len(self.live) if expect is None else expect
            settled = (state == "Empty" and not members) if want == 0 else (
                state == "Stable" and len(members) == want and fresh)
            if settled:
                self._before = None
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(
                    f"the group did not settle in {timeout_s:g} s: {state}, {len(members)} members,"
                    f" {sorted(self.live)} live; unexpected exits: {self.unexpected}")
            time.sleep(0.1)

    def close(self) -> None:
        """Kill every worker process this group started that still runs."""
        for proc in self.started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
            reap(proc)
        self.live.clear()
        self._admin.close()


@contextmanager
def watching(group: Group, watch: CommitWatch) -> Iterator[None]:
    """``watch`` polling the group's commits for the block; then every worker of ``group`` still
    running is killed, whatever happened."""
    watch.start()
    try:
        yield
    finally:
        watch.stop()
        group.close()


def tail(log: Path, lines: int = 3) -> str:
    """The last ``lines`` lines of a worker's log but its settings, each cut to 300 characters."""
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return " | ".join([ln[:300] for ln in text if "effective settings" not in ln][-lines:])


# -- the input -------------------------------------------------------------------------------------

class PacedProducer(threading.Thread):
    """Sends ``values[i]`` with key ``str(i)`` (the default partitioner spreads the keys over the
    partitions) at ``rate`` records/s, until :meth:`finish` once at least ``least`` are sent, or
    all of them are."""

    def __init__(self, kafka: KafkaSettings, topic: str, values: list[bytes], rate: float,
                 least: int) -> None:
        super().__init__(daemon=True, name="paced-producer")
        self.kafka, self.topic, self.values, self.rate, self.least = kafka, topic, values, rate, least
        self.sent = 0
        self.error: BaseException | None = None
        self._finish = threading.Event()

    def run(self) -> None:
        try:
            producer = KafkaProducer(**client_config(self.kafka), acks="all", linger_ms=5)
            try:
                started = time.monotonic()
                for i, value in enumerate(self.values):
                    if self._finish.is_set() and i >= self.least:
                        break
                    producer.send(self.topic, key=str(i).encode(), value=value)
                    self.sent = i + 1
                    ahead = (i + 1) / self.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                producer.flush()
            finally:
                producer.close()
        except BaseException as exc:
            self.error = exc

    def finish(self, timeout_s: float = 60) -> int:
        """Stop at the next record past ``least``; the records sent."""
        self._finish.set()
        self.join(timeout_s)
        assert not self.is_alive() and self.error is None, self.error
        return self.sent


# -- the end state, against the reference --------------------------------------------------------

def read_input(kafka: KafkaSettings, topic: str) -> dict[int, list[tuple[list[float], int]]]:
    """Each partition's (x, label) in offset order; label 0 for an unlabeled record."""
    out: dict[int, list[tuple[list[float], int]]] = {}
    for partition, offset, _, rec in read_topic(kafka, topic):
        rows = out.setdefault(partition, [])
        assert offset == len(rows), f"input {topic}[{partition}] has a gap at {offset}"
        rows.append((rec["x"], rec["y"] or 0))
    return out


def read_raw(kafka: KafkaSettings, topic: str, timeout_s: float = 60,
             isolation_level: str = "read_uncommitted") -> list[bytes]:
    """The values of a one-partition topic, from its beginning to its high-water mark (to the
    last stable offset, ``read_committed``)."""
    consumer = KafkaConsumer(**consumer_config(kafka), enable_auto_commit=False, group_id=None,
                             isolation_level=isolation_level)
    tp = TopicPartition(topic, 0)
    values: list[bytes] = []
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout_s
        while True:
            for recs in consumer.poll(timeout_ms=200, max_records=5000).values():
                values += [r.value for r in recs]
            hw = consumer.highwater(tp)
            if isolation_level == "read_committed":  # aborted records and markers are skipped
                hw = consumer.end_offsets([tp])[tp]
            if hw is not None and consumer.position(tp) >= hw:
                return values
            assert time.monotonic() < deadline, f"{topic}: {len(values)} read, high-water {hw}"
    finally:
        consumer.close()


@dataclass
class Outcome:
    """What a run left behind, measured against the seeds' perceptron over each partition."""

    records: dict[int, int]  # per partition
    labeled: int = 0
    predictions: int = 0
    missing: int = 0  # input offsets without a prediction
    reemitted: int = 0  # predictions after the first for their offset
    reemitted_offsets: int = 0
    differing: int = 0  # re-emitted predictions not byte-identical to the first
    first_differing: tuple[bytes, bytes] | None = None  # the first such pair: (first, again)
    flipped: int = 0  # ... of which the prediction itself (+1/-1) changed
    unlike_reference: int = 0  # first predictions whose score or mistake is not the reference's
    strays: int = 0  # predictions for offsets that are not in the input
    models: dict[int, str] = field(default_factory=dict)  # "exact", or what differs
    learned: int = 0  # examples the final states have seen, over all partitions
    commit_decreases: list[tuple[int, int, int]] = field(default_factory=list)
    committed: dict[int, int | None] = field(default_factory=dict)  # the group's final commits

    def problems(self) -> list[str]:
        out = []
        total = sum(self.records.values())
        for what, n in (("offsets without a prediction", self.missing),
                        ("re-emitted predictions that differ from the first", self.differing),
                        ("first predictions unlike the reference", self.unlike_reference),
                        ("predictions for offsets not in the input", self.strays)):
            if n:
                out.append(f"{n} {what}")
        if self.first_differing is not None:  # which fields: what the next look at a failure needs
            out.append(f"first copy {self.first_differing[0]!r}, again {self.first_differing[1]!r}")
        out += [f"partition {p}: {why}" for p, why in sorted(self.models.items()) if why != "exact"]
        if self.learned != total:
            out.append(f"the final states learned {self.learned} examples from {total} inputs")
        if self.commit_decreases:
            out.append(f"committed offsets decreased: {self.commit_decreases}")
        if self.committed != self.records:
            out.append(f"final commits {self.committed}, partition ends {self.records}")
        return out

    def summary(self) -> str:
        exact = sum(why == "exact" for why in self.models.values())
        return (f"{sum(self.records.values())} records {self.records} ({self.labeled} labeled); "
                f"{self.predictions} predictions, {self.missing} offsets missing, "
                f"{self.reemitted} re-emitted for {self.reemitted_offsets} offsets, "
                f"{self.differing} of them different ({self.flipped} flipped), "
                f"{self.unlike_reference} first predictions unlike the reference; "
                f"{exact} of {len(self.records)} partition models exact, {self.learned} examples "
                f"learned; {len(self.commit_decreases)} commit decreases; final commits {self.committed}")


def check(kafka: KafkaSettings, topics: dict[str, str], settings: Settings, watch: CommitWatch,
          committed: dict[int, int | None], isolation_level: str = "read_uncommitted") -> Outcome:
    """Measure the run: predictions (raw bytes) against the input and the reference, each
    partition's final state against the seeds' perceptron over its own records in offset order,
    and the group's commits."""
    rows = read_input(kafka, topics["input"])
    out = Outcome(records={p: len(r) for p, r in sorted(rows.items())},
                  labeled=sum(y != 0 for r in rows.values() for _, y in r),
                  commit_decreases=watch.decreases(), committed=committed)
    refs = {p: core_reference(r, [y for _, y in r]) for p, r in rows.items()}

    copies: dict[tuple[int, int], list[bytes]] = {}
    for value in read_raw(kafka, topics["predictions"], isolation_level=isolation_level):
        rec = orjson.loads(value)
        copies.setdefault((rec["partition"], rec["offset"]), []).append(value)
    out.predictions = sum(len(c) for c in copies.values())
    out.strays = sum(1 for p, o in copies if o >= out.records.get(p, 0))
    for p, n in out.records.items():
        _, ref = refs[p]
        for o in range(n):
            got = copies.get((p, o))
            if not got:
                out.missing += 1
                continue
            first = orjson.loads(got[0])
            if first["score"] != ref.scores[o] or first["mistake"] != (bool(ref.mistakes[o])
                                                                      if rows[p][o][1] else None):
                out.unlike_reference += 1
            out.reemitted += len(got) - 1
            out.reemitted_offsets += len(got) > 1
            for again in got[1:]:
                if again != got[0]:
                    out.differing += 1
                    out.first_differing = out.first_differing or (got[0], again)
                    out.flipped += orjson.loads(again)["prediction"] != first["prediction"]

    for p, (model, _) in refs.items():
        try:
            state = final_state(settings, topics["input"], p)
        except Exception as exc:
            out.models[p] = f"state not readable: {type(exc).__name__}: {exc}"
            continue
        if state is None:
            out.models[p] = "no stored state"
            continue
        out.learned += state.stats.get("seen", 0)
        out.models[p] = model_difference(state, model, topics["input"], p, out.records[p], rows[p])
    return out


def model_difference(state: StoredState, model: Any, topic: str, partition: int, n: int,
                     rows: list[tuple[list[float], int]]) -> str:
    """"exact" when the stored state is the reference's model after all ``n`` records, else what
    differs."""
    diffs = []
    if state.offsets != {topic: {partition: n}}:
        diffs.append(f"offsets {state.offsets}, not {{{topic!r}: {{{partition}: {n}}}}}")
    if state.model.get("weights") != model.weights.tolist():
        diffs.append("weights")
    if state.model.get("intercept") != model.intercept:
        diffs.append(f"intercept {state.model.get('intercept')} != {model.intercept}")
    if state.model.get("mistakes") != model.mistakes:
        diffs.append(f"mistakes {state.model.get('mistakes')} != {model.mistakes}")
    labeled = sum(y != 0 for _, y in rows)
    if (state.stats.get("seen"), state.stats.get("labeled")) != (n, labeled):
        diffs.append(f"seen/labeled {state.stats.get('seen')}/{state.stats.get('labeled')}"
                     f" != {n}/{labeled}")
    return "exact" if not diffs else "; ".join(diffs)
