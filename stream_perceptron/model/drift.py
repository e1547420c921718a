r"""Drift alarms on a partition's 0/1 mistake stream (pure: no I/O).

A detector of :mod:`river.drift` watches the stream :math:`z_1, z_2, \ldots` of mistake flags
(1 = the model scored the labeled example wrong, before its update), so a change of the online
error rate :math:`E` shows as a change of the stream's mean.

**What counts as an alarm: a rise.** Each detector finds, when it signals a change, a *change
point* :math:`c` in its run (the flags since its last reset, :math:`z_1 \ldots z_n`):

* ``adwin``: of the splits of ADWIN's window into an older part :math:`W_0` and a newer
  :math:`W_1` (Bifet & Gavaldà 2007), the one whose means differ by the most beyond the test's
  bound :math:`\epsilon_{cut}` when the change is signalled;
* ``page-hinkley``: the example at which the cumulative sum
  :math:`m_t = \sum_{i \le t} \alpha^{t-i}(z_i - \bar z_i - \delta)` was last at its minimum;
* ``ddm``: the example at which :math:`p + s` was last at its minimum :math:`p_{min} + s_{min}`;
* ``hddm-a``: HDDM's cut point (the prefix whose mean plus its Hoeffding bound was smallest).

The rate before is :math:`\frac1c\sum_{i \le c} z_i` and the rate after
:math:`\frac1{n-c}\sum_{i > c} z_i`; the change is an **alarm only when the rate after is higher**
(``rate_after > rate_before``). A fall (the model got better, or the stream easier) is never one;
the detector still restarts after it, as river's detectors do after any change.
``page-hinkley`` runs in river's ``mode="up"`` and ``ddm`` and ``hddm-a`` test one side only, so
they signal rises only; ADWIN is two-sided and the rule above filters its falls.

**Exact state.** A replay from a checkpoint must raise the same alarms at the same offsets, so
each detector's state is plain data (JSON numbers, lists, strings): never a pickle, since states
come back from a Kafka topic. ``page-hinkley``, ``ddm`` and ``hddm-a`` are river's own objects,
whose few attributes (floats and :class:`river.stats.Mean`) are read and written back as they
are. river's ``ADWIN`` keeps its window inside a compiled helper that exposes no state (it cannot
be pickled or read), so ``adwin`` is :class:`Adwin`, this module's implementation of the same
algorithm with the same arithmetic in the same order (ADWIN2's exponential buckets, river's
defaults ``delta=0.002``, ``clock=32``, ``max_buckets=5``, ``min_window_length=5``,
``grace_period=10``), shown by the tests to signal at the same examples and hold the same width,
total and variance bit for bit as ``river.drift.ADWIN`` on random streams.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

try:  # the compiled part (native/): the same loop, the same floats
    from stream_perceptron_native import adwin_update as _compiled_update
except ImportError:  # not built here: the loop below serves
    _compiled_update = None

if TYPE_CHECKING:
    from river import stats as river_stats

#: The detectors ``SP_DRIFT__DETECTOR`` names ("none": no detector).
DETECTORS = ("adwin", "page-hinkley", "ddm", "hddm-a", "none")
#: The streams watched: the learning model's mistakes, and the served (averaged) model's errors.
STREAMS = ("mistakes", "served")


def _ints(zs: Sequence[int] | npt.NDArray[Any]) -> list[int]:
    """Flags as Python ints 0/1 (river's counts and the state stored stay ints)."""
    return np.asarray(zs, dtype=np.int64).tolist() if isinstance(zs, np.ndarray) else list(zs)


class Alarm(NamedTuple):
    """A significant rise of a stream's error rate, raised by the row ``row`` of a batch;
    ``labeled`` counts the labeled examples up to that row (filled by the learner, which knows
    the count before the batch)."""

    row: int
    stream: str
    rate_before: float
    rate_after: float
    labeled: int = 0


class Adwin:
    r"""ADWIN (ADaptive WINdowing) over a stream of numbers, with a state that is plain data.

    The window is held in ADWIN2's buckets: level :math:`i` keeps up to ``max_buckets`` summaries
    (total, variance) of :math:`2^i` values each, and merges its two oldest into level
    :math:`i+1` when it overflows. Every ``clock`` values, once the window is longer than
    ``grace_period``, each split of the window into an older part :math:`W_0` (:math:`n_0`
    values, mean :math:`\hat\mu_0`) and a newer :math:`W_1` is tested; a change is signalled
    when, for parts of at least ``min_window_length`` values,

    .. math::
        |\hat\mu_0 - \hat\mu_1| > \sqrt{2 m \sigma^2_W \delta'} + \tfrac23 \delta' m,\quad
        m = \tfrac1{n_0 - l + 1} + \tfrac1{n_1 - l + 1},\quad \delta' = \ln(2 \ln|W| / \delta),

    and the oldest bucket is dropped until no split passes. As river's ``ADWIN`` does, the whole
    window starts afresh at the value after a signalled change.

    >>> adwin = Adwin()
    >>> flags = [0] * 600 + [1, 1, 1, 0] * 200
    >>> [i for i, z in enumerate(flags) if adwin.update(z)][:1]
    [639]
    >>> adwin.split  # (n0, total0, n1, total1) of the signalled change
    (600.0, 0.0, 40.0, 30.0)
    """

    def __init__(self, delta: float = 0.002, clock: int = 32, max_buckets: int = 5,
                 min_window_length: int = 5, grace_period: int = 10) -> None:
        self.delta = delta
        self.clock = clock
        self.max_buckets = max_buckets
        self.min_window_length = min_window_length
        self.grace_period = grace_period
        self.drift_detected = False
        self.split: tuple[float, float, float, float] | None = None
        self._fresh()

    def _fresh(self) -> None:
        self.total = 0.0
        self.variance = 0.0
        self.width = 0.0
        self._tick = 0
        # level i: [totals], [variances] of its summaries of 2**i values, oldest first
        self._levels: list[tuple[list[float], list[float]]] = [([], [])]

    def update(self, x: float) -> bool:
        """Add ``x``; returns whether a change is signalled at it (then :attr:`split` holds the
        window's parts at the split that passed the test by the most, as (n0, total0, n1,
        total1))."""
        return bool(self.update_many([float(x)]))

    def update_many(self, xs: list[float]) -> list[tuple[int, tuple[float, float, float, float]]]:
        """Add the values ``xs`` in order; returns the position in ``xs`` of each value at which
        a change is signalled, with its :attr:`split`. The same arithmetic as
        :meth:`update` one value at a time, in one loop over local variables (the insert is
        all a value costs between two of the ``clock``'s tests). Where the compiled part is
        installed, its twin of this loop runs instead, with the same floating-point operations
        in the same order (the logarithm from the C library, as :func:`math.log` takes it)."""
        if _compiled_update is not None:
            found: list[tuple[int, tuple[float, float, float, float]]] = _compiled_update(self, xs)
            return found
        out: list[tuple[int, tuple[float, float, float, float]]] = []
        full, clock, grace = self.max_buckets + 1, self.clock, self.grace_period
        totals, variances = self._levels[0]
        total, variance, width, tick = self.total, self.variance, self.width, self._tick
        i, n = 0, len(xs)
        while i < n:
            if self.drift_detected:  # river's ADWIN starts afresh at the value after a change
                self._fresh()
                self.drift_detected = False
                totals, variances = self._levels[0]
                total, variance, width, tick = 0.0, 0.0, 0.0, 0
            stop = min(n, i + clock - tick % clock)  # up to the clock's next test
            for value in xs[i:stop]:
                totals.append(value)
                variances.append(0.0)
                before = width  # = width - 1.0 after the increment, exactly (a count)
                width = before + 1.0
                if before > 0.0:
                    d = value - total / before
                    variance += before * d * d / width
                else:
                    variance += 0.0
                total += value
                if len(totals) == full:  # merge level 0's oldest two (2**0 values each: mu = t)
                    a, b, va, vb = totals[0], totals[1], variances[0], variances[1]
                    del totals[:2], variances[:2]
                    if len(self._levels) == 1:
                        self._levels.append(([], []))
                    up = self._levels[1]
                    up[0].append(a + b)
                    up[1].append(va + vb + 1.0 * 0.5 * (a - b) * (a - b))
                    if len(up[0]) == full:
                        self._merge(1)
            tick += stop - i
            i = stop
            if tick % clock == 0 and width > grace:
                self.total, self.variance, self.width, self._tick = total, variance, width, tick
                if self._detect():
                    self.drift_detected = True
                    out.append((stop - 1, self.split or (0.0, 0.0, 0.0, 0.0)))
                totals, variances = self._levels[0]
                total, variance, width = self.total, self.variance, self.width
        self.total, self.variance, self.width, self._tick = total, variance, width, tick
        return out

    def _merge(self, level: int) -> None:
        """Merge the oldest two summaries of each full level, from ``level`` up, into the next."""
        while len(self._levels[level][0]) == self.max_buckets + 1:
            totals, variances = self._levels[level]
            n = float(1 << level)
            mu1, mu2 = totals[0] / n, totals[1] / n
            total12 = totals[0] + totals[1]
            variance12 = variances[0] + variances[1] + n * 0.5 * (mu1 - mu2) * (mu1 - mu2)
            del totals[:2], variances[:2]
            if level + 1 == len(self._levels):
                self._levels.append(([], []))
            self._levels[level + 1][0].append(total12)
            self._levels[level + 1][1].append(variance12)
            level += 1

    def _drop_oldest(self) -> None:
        last = len(self._levels) - 1
        totals, variances = self._levels[last]
        n = float(1 << last)
        u, v = totals.pop(0), variances.pop(0)
        mu = u / n
        self.width -= n
        self.total -= u
        mu_window = self.total / self.width
        self.variance -= v + n * self.width * (mu - mu_window) * (mu - mu_window) / (n + self.width)
        if not totals:
            self._levels.pop()

    def _detect(self) -> bool:
        """Test every split (the clock's turn has come); drop the oldest bucket while one passes.
        The bound's terms that do not depend on the split are computed once per pass, with the
        operations in :meth:`_cut`'s order, so every comparison is the same to the last bit."""
        changed, again = False, True
        lmin = float(self.min_window_length)
        while again:
            again = False
            width = self.width
            delta_prime = math.log(2.0 * math.log(width) / self.delta)
            spread = self.variance / width
            linear = 2.0 / 3.0 * delta_prime
            n0, n1, u0, u1 = 0.0, width, 0.0, self.total
            sqrt = math.sqrt
            for level in range(len(self._levels) - 1, -1, -1):  # oldest summaries first
                size, totals = float(1 << level), self._levels[level][0]
                for t in totals if level else totals[:-1]:  # the newest value is never split off
                    n0 += size
                    n1 -= size
                    u0 += t
                    u1 -= t
                    if n1 >= lmin and n0 >= lmin:
                        m = 1.0 / (n0 - lmin + 1.0) + 1.0 / (n1 - lmin + 1.0)
                        if abs(u0 / n0 - u1 / n1) > sqrt(2.0 * m * spread * delta_prime) + linear * m:
                            if not changed:
                                self.split = self._best_split()
                            changed = again = True
                            if self.width > 0.0:
                                self._drop_oldest()
                            break
                if again:
                    break
        return changed

    def _best_split(self) -> tuple[float, float, float, float]:
        """The split of the window (before any bucket is dropped) that passes the test by the
        most: (n0, total0, n1, total1)."""
        lmin, best, out = float(self.min_window_length), -math.inf, (0.0, 0.0, 0.0, 0.0)
        n0, n1, u0, u1 = 0.0, self.width, 0.0, self.total
        for level in range(len(self._levels) - 1, -1, -1):
            size = float(1 << level)
            for t in self._levels[level][0]:
                n0, n1, u0, u1 = n0 + size, n1 - size, u0 + t, u1 - t
                if n1 >= lmin and n0 >= lmin and (excess := self._cut(n0, n1, u0 / n0 - u1 / n1)) > best:
                    best, out = excess, (n0, u0, n1, u1)
        return out

    def _cut(self, n0: float, n1: float, delta_mean: float) -> float:
        """By how much ``|delta_mean|`` passes the bound ε of a split into ``n0`` and ``n1``
        values (a change where positive)."""
        lmin = float(self.min_window_length)
        delta_prime = math.log(2.0 * math.log(self.width) / self.delta)
        m_recip = 1.0 / (n0 - lmin + 1.0) + 1.0 / (n1 - lmin + 1.0)
        epsilon = math.sqrt(2.0 * m_recip * (self.variance / self.width) * delta_prime) \
            + 2.0 / 3.0 * delta_prime * m_recip
        return abs(delta_mean) - epsilon

    def get_state(self) -> dict[str, Any]:
        """The window and counters as plain data (every float finite)."""
        return {
            "total": self.total, "variance": self.variance, "width": self.width, "tick": self._tick,
            "detected": self.drift_detected, "split": None if self.split is None else list(self.split),
            "levels": [[list(t), list(v)] for t, v in self._levels],
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""
        self.total, self.variance = float(state["total"]), float(state["variance"])
        self.width, self._tick = float(state["width"]), int(state["tick"])
        self.drift_detected = bool(state["detected"])
        split = state["split"]
        self.split = None if split is None else (float(split[0]), float(split[1]),
                                                 float(split[2]), float(split[3]))
        self._levels = [([float(x) for x in t], [float(x) for x in v]) for t, v in state["levels"]]
        if not self._levels:
            raise ValueError("an ADWIN state has at least one level")


# --------------------------------------------------------------------------- river's detectors
def _number(v: Any) -> Any:
    """A float as JSON holds it: ±inf as a string (strict JSON has no infinities)."""
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _from_number(v: Any) -> Any:
    return float(v) if v in ("inf", "-inf") else v


def _mean_state(m: river_stats.Mean) -> list[float]:
    return [float(m.n), float(m._mean)]


def _mean_from(state: list[float]) -> river_stats.Mean:
    from river import stats as river_stats

    m = river_stats.Mean()
    m.n, m._mean = float(state[0]), float(state[1])
    return m


def _page_hinkley() -> Any:
    from river import drift as river_drift  # loaded only when chosen: river takes ~1.5 s to import

    return river_drift.PageHinkley(mode="up")


def _ddm() -> Any:
    from river.drift import binary

    return binary.DDM()


def _hddm_a() -> Any:
    from river.drift import binary

    return binary.HDDMA()  # type: ignore[no-untyped-call]


# Per river detector: its constructor, its plain attributes, its river.stats.Mean attributes.
_RIVER: dict[str, tuple[Callable[[], Any], tuple[str, ...], tuple[str, ...]]] = {
    "page-hinkley": (_page_hinkley,
                     ("_sum_increase", "_sum_decrease", "_min_increase", "_max_decrease",
                      "_drift_detected"), ("_x_mean",)),
    "ddm": (_ddm, ("_p_min", "_s_min", "_ps_min", "_warning_detected", "_drift_detected"), ("_p",)),
    "hddm-a": (_hddm_a, ("_warning_detected", "_drift_detected"), ("_x_min", "_x_max", "_z")),
}


class RiseDetector:
    """One detector over one 0/1 stream, raising alarms on rises (see the module's docstring).

    >>> det = RiseDetector("ddm")
    >>> flags = [0, 0, 0, 1] * 100 + [1, 1, 0, 1] * 50
    >>> alarms = [(i, rates) for i, z in enumerate(flags) if (rates := det.update(z))]
    >>> [(i, round(before, 3), round(after, 3)) for i, (before, after) in alarms]
    [(435, 0.248, 0.757)]
    """

    def __init__(self, name: str) -> None:
        if name not in DETECTORS or name == "none":
            raise ValueError(f"unknown drift detector {name!r}: one of {', '.join(DETECTORS[:-1])}")
        self.name = name
        self._adwin: Adwin | None = Adwin() if name == "adwin" else None
        self._river: Any = None if name == "adwin" else _RIVER[name][0]()
        # the run since the detector's last reset: its length and ones; and the change point's
        self._n = self._k = self._cut_n = self._cut_k = 0

    def update(self, z: int | bool) -> tuple[float, float] | None:
        """Feed one flag; returns (rate_before, rate_after) when it raises an alarm (a rise)."""
        alarms = self.update_many([1 if z else 0])
        return (alarms[0][1], alarms[0][2]) if alarms else None

    def update_many(self, zs: Sequence[int] | npt.NDArray[Any]) -> list[tuple[int, float, float]]:
        """Feed the flags ``zs`` (0/1, or an array of flags) in order; returns (position,
        rate_before, rate_after) of each that raises an alarm."""
        if self._adwin is not None:
            out = []
            for i, (n0, u0, n1, u1) in self._adwin.update_many(np.asarray(zs, dtype=np.float64).tolist()):
                before, after = (u0 / n0 if n0 else 0.0), (u1 / n1 if n1 else 0.0)
                if after > before:
                    out.append((i, before, after))
            return out
        return [(i, *rates) for i, z in enumerate(_ints(zs)) if (rates := self._river_update(z)) is not None]

    def _river_update(self, x: int) -> tuple[float, float] | None:
        det = self._river
        if det.drift_detected:  # river restarts the detector at this flag
            self._n = self._k = self._cut_n = self._cut_k = 0
        ps_min = det._ps_min if self.name == "ddm" else None
        det.update(x)
        self._n += 1
        self._k += x
        if self._moved_cut(det, ps_min):
            self._cut_n, self._cut_k = self._n, self._k
        if not det.drift_detected:
            return None
        before = self._cut_k / self._cut_n if self._cut_n else 0.0
        rest = self._n - self._cut_n
        after = (self._k - self._cut_k) / rest if rest else before
        return (before, after) if after > before else None

    def _moved_cut(self, det: Any, ps_min: float | None) -> bool:
        """The change point moved to the flag just fed."""
        if self.name == "page-hinkley":
            return bool(det._min_increase == det._sum_increase)
        if self.name == "ddm":
            return bool(det._ps_min != ps_min)
        return bool(det._x_min.n == det._z.n)  # hddm-a: the cut point is the whole run

    def get_state(self) -> dict[str, Any]:
        """The detector's state as plain data."""
        run = [self._n, self._k, self._cut_n, self._cut_k]
        if self._adwin is not None:
            return {"detector": self.name, "adwin": self._adwin.get_state(), "run": run}
        _, plain, means = _RIVER[self.name]
        det = self._river
        return {"detector": self.name, "run": run,
                "river": {**{a: _number(getattr(det, a)) for a in plain},
                          **{a: _mean_state(getattr(det, a)) for a in means}}}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`get_state` returned (of a detector of the same name)."""
        if state["detector"] != self.name:
            raise ValueError(f"a {state['detector']} state, not {self.name}'s")
        self._n, self._k, self._cut_n, self._cut_k = (int(v) for v in state["run"])
        if self._adwin is not None:
            self._adwin.set_state(state["adwin"])
            return
        _, plain, means = _RIVER[self.name]
        fresh, saved = _RIVER[self.name][0](), state["river"]
        for a in plain:
            setattr(fresh, a, _from_number(saved[a]))
        for a in means:
            setattr(fresh, a, _mean_from(saved[a]))
        self._river = fresh


class DriftWatch:
    """The detectors of one partition: on the learning model's mistakes, and with ``served`` on
    the served (averaged) model's errors too; the alarms counted.

    ``last_offset`` is the input offset of the latest alarm, set by the caller that knows offsets
    (None before the first); it is kept with the state.

    >>> import numpy as np
    >>> watch = DriftWatch("adwin")
    >>> flags = np.array([False] * 600 + [True, True, True, False] * 100)
    >>> alarms = watch.update_many(np.ones(1000, dtype=np.int8), flags, flags)
    >>> [(a.row, a.stream, a.rate_before, a.rate_after) for a in alarms], watch.drifts
    ([(639, 'mistakes', 0.0, 0.75)], 1)
    """

    def __init__(self, detector: str = "adwin", *, served: bool = False) -> None:
        self.detector = detector
        self.streams = {s: RiseDetector(detector) for s in (STREAMS if served else STREAMS[:1])}
        self.drifts = 0
        self.last_offset: int | None = None

    def update_many(
        self, labels: npt.NDArray[np.int8], mistakes: npt.NDArray[np.bool_],
        served_mistakes: npt.NDArray[np.bool_] | None = None, *, first_only: bool = False,
    ) -> list[Alarm]:
        """Feed the labeled rows' flags (``labels`` != 0), in row order; returns the alarms, each
        with its row's index. With ``first_only``, stops after the first row that raises one (the
        rows after it are not fed)."""
        flags = {"mistakes": mistakes, "served": mistakes if served_mistakes is None else served_mistakes}
        rows = np.flatnonzero(labels != 0)
        every = len(rows) == len(labels)  # all labeled (the common case): the columns as they are
        columns = [(s, det, flags[s] if every else flags[s][rows]) for s, det in self.streams.items()]
        alarms: list[Alarm] = []
        if not first_only or len(columns) == 1:
            for stream, det, zs in columns:
                if first_only:  # one stream: feed it up to its first alarm
                    found = next(((k, *r) for k, z in enumerate(_ints(zs)) if (r := det.update(z))), None)
                    raised = [] if found is None else [found]
                else:
                    raised = det.update_many(zs)
                alarms += [Alarm(int(rows[k]), stream, before, after) for k, before, after in raised]
            alarms.sort(key=lambda a: (a.row, STREAMS.index(a.stream)))
        else:  # both streams, row by row, up to the first row that raises an alarm
            lists = [(stream, det, _ints(zs)) for stream, det, zs in columns]
            for k in range(len(rows)):
                for stream, det, ints in lists:
                    rates = det.update(ints[k])
                    if rates is not None:
                        alarms.append(Alarm(int(rows[k]), stream, rates[0], rates[1]))
                if alarms:
                    break
        self.drifts += len(alarms)
        return alarms

    def get_state(self) -> dict[str, Any]:
        """Counters and each stream's detector state, as plain data."""
        return {"detector": self.detector, "drifts": self.drifts, "last_offset": self.last_offset,
                "streams": {s: det.get_state() for s, det in self.streams.items()}}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`get_state` returned. A state of another detector (the setting
        changed) keeps the counters and starts the detectors afresh; so does a stream missing
        from it (averaging turned on since)."""
        self.drifts = int(state.get("drifts", 0))
        last = state.get("last_offset")
        self.last_offset = None if last is None else int(last)
        if state.get("detector") != self.detector:
            return
        saved = state.get("streams") or {}
        for s, det in self.streams.items():
            if s in saved:
                det.set_state(saved[s])
