"""The plots: always a PNG, at the path given; a path they cannot write is one clear error; the group's
curve sums the partitions' newest records; a long history is thinned evenly within a shared bound."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from stream_perceptron.codec.outputs import decode, encode
from stream_perceptron.commands.plot import PLOTTED, Thinned, group_curve, plot_partitions, plot_stats
from stream_perceptron.commands.series import group_figures, is_stats_record
from stream_perceptron.commands.watch import _History
from stream_perceptron.errors import OutputError
from stream_perceptron.model.learner import Learner
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.model.stats import RunningStats
from stream_perceptron.sources import open_source

ROWS = [{"seen": i, "labeled": i, "mistake_rate": 1 / i, "window_mistake_rate": 1 / i,
         "ewma_mistake_rate": 1 / i, "margin_min": 0.1 * i} for i in range(1, 6)]


@pytest.mark.parametrize("name", ["history.png", "history.xyz", "history"])
def test_the_plot_is_a_png_at_exactly_the_path_given(tmp_path, name):
    path = plot_stats(ROWS, tmp_path / "deeper" / name, size=(600, 400))
    assert path == tmp_path / "deeper" / name and path.exists()
    with Image.open(path) as img:
        assert img.format == "PNG" and img.size == (600, 400)


def test_a_path_under_a_file_is_an_output_error(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(OutputError, match=r"^cannot write the plot to .*a-file/x\.png: "):
        plot_stats(ROWS, tmp_path / "a-file" / "x.png")


def test_plot_keeps_of_a_statistics_record_only_the_fields_it_draws():
    # a statistics record as a worker publishes it (held whole, a week of them took gigabytes: D41)
    stream = list(open_source("separable:d=20,gamma=0.05,n=2000,seed=1,noise=0.02"))
    learner = Learner(Perceptron(), RunningStats(window=1000, ewma_alpha=0.01))
    learner.step(np.array([x for x, _ in stream]), np.array([y for _, y in stream], dtype=np.int8))
    record = decode(encode({**learner.stats.snapshot(), "updates": learner.model.mistakes, "ts": 1.0,
                            "offsets": {"examples": {"0": 2000}}, "client_id": "worker-1"}))
    assert is_stats_record(record)
    history = _History(Thinned(10))
    history.add(record)
    (kept,) = history.labeled.kept()
    assert set(kept) == set(PLOTTED) < set(record) and kept["seen"] == 2000
    assert history.records == 1 and history.latest_ts == 1.0


def _items(n: int) -> list[dict[str, int]]:
    return [{"seen": i} for i in range(n)]


@pytest.mark.parametrize("limit, n", [(1, 1), (1, 7), (4, 4), (4, 5), (4, 100), (10, 1_000), (7, 10_001)])
def test_thinned_keeps_at_most_limit_evenly_spaced_items_and_the_last(limit, n):
    thinned = Thinned(limit)
    for item in _items(n):
        thinned.add(item)
    seen = [item["seen"] for item in thinned.items]
    # items 0, s, 2s, ... of the n seen: s the least power of two leaving at most `limit` of them
    stride = 1
    while len(range(0, n, stride)) > limit:
        stride *= 2
    assert thinned.stride == stride and seen == list(range(0, n, stride))
    assert len(thinned.items) <= limit and thinned.seen == n
    kept = [item["seen"] for item in thinned.kept()]
    assert kept[-1] == n - 1 and kept[:len(seen)] == seen and len(kept) <= limit + 1


def test_thinned_holds_nothing_extra_when_nothing_is_dropped():
    thinned = Thinned(5)
    for item in _items(3):
        thinned.add(item)
    assert thinned.kept() == _items(3) and thinned.stride == 1
    assert Thinned(5).kept() == []
    with pytest.raises(ValueError, match="limit must be at least 1"):
        Thinned(0)


@pytest.mark.parametrize("size", [(1200, 700), (600, 400)])
def test_the_legend_names_the_four_curves_and_covers_none_of_them(tmp_path, monkeypatch, size):
    import stream_perceptron.commands.plot as plot

    closed = []
    close = plot.pyplot().close
    monkeypatch.setattr(plot.pyplot(), "close", lambda fig: (closed.append(fig), close(fig)))
    plot_stats(ROWS, tmp_path / "history.png", size=size)
    (fig,) = closed
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "cumulative mistake rate (E_n)", "windowed mistake rate", "EWMA mistake rate",
        "window min margin"]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # closing the figure took its canvas; draw it again as saved
    canvas.draw()
    renderer = canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    assert 0 <= box.x0 < box.x1 <= size[0] and 0 <= box.y0 < box.y1 <= size[1]  # within the image
    for axes in fig.axes:  # the first axes and their twin, which draws the margin
        assert not box.overlaps(axes.get_window_extent(renderer)), axes


def test_shrink_keeps_the_even_spacing_and_bounds_what_follows():
    thinned = Thinned(100)
    for item in _items(90):
        thinned.add(item)
    thinned.shrink(20)  # 90 kept, then 45, 23, 12
    assert thinned.stride == 8 and [i["seen"] for i in thinned.items] == list(range(0, 90, 8))
    for item in _items(1000)[90:]:
        thinned.add(item)
    assert [i["seen"] for i in thinned.items] == list(range(0, 1000, 64)) and len(thinned.items) <= 20
    thinned.shrink(500)  # never more than before
    assert thinned.limit == 20
    with pytest.raises(ValueError, match="limit must be at least 1"):
        thinned.shrink(0)


def _partition_history(part: int, n: int) -> list[dict]:
    """Records of one partition: every 100 examples, published at ts part/10 + i."""
    out = []
    for i in range(1, n + 1):
        seen, mistakes = 100 * i, (7 + part) * i + part
        out.append({"seen": seen, "labeled": seen, "mistakes": mistakes, "mistake_rate": mistakes / seen,
                    "window_labeled": 100, "window_mistakes": 7 + part, "ts": part / 10 + i})
    return out


def test_the_group_curve_is_the_sum_of_the_newest_records_at_each_moment():
    histories = {("in", p): _partition_history(p, 20) for p in range(3)}
    curve = group_curve(histories)
    merged = sorted(((r["ts"], p, r) for (_, p), rs in histories.items() for r in rs), key=lambda x: x[0])
    assert len(curve) == len(merged)
    newest: dict[int, dict] = {}
    for point, (_, part, record) in zip(curve, merged, strict=True):
        newest[part] = record
        expected = group_figures(newest.values())
        assert expected is not None
        assert (point["seen"], point["labeled"], point["mistakes"]) == (
            expected.seen, expected.labeled, expected.mistakes)
        assert point["mistake_rate"] == expected.mistakes / expected.labeled
        assert point["window_mistake_rate"] == expected.window_mistake_rate
    last = curve[-1]
    assert (last["seen"], last["mistakes"]) == (6000, sum((7 + p) * 20 + p for p in range(3)))
    assert len(group_curve(histories, points=10)) <= 11  # thinned, the last kept
    assert group_curve(histories, points=10)[-1] == last


def test_the_partitions_plot_draws_each_partition_and_the_group(tmp_path, monkeypatch):
    import stream_perceptron.commands.plot as plot

    closed = []
    close = plot.pyplot().close
    monkeypatch.setattr(plot.pyplot(), "close", lambda fig: (closed.append(fig), close(fig)))
    histories = {("in", p): _partition_history(p, 10) for p in range(3)}
    curve = group_curve(histories)
    path = plot_partitions({str(p): rs for (_, p), rs in histories.items()}, curve,
                           tmp_path / "partitions.png", size=(800, 500))
    with Image.open(path) as img:
        assert img.format == "PNG" and img.size == (800, 500)
    fig = closed[0]
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "partition 0 (E_n)", "partition 1 (E_n)", "partition 2 (E_n)", "group E_n (3 partitions)",
        "group windowed rate (pooled)"]
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    p1 = lines["partition 1 (E_n)"]
    assert list(p1.get_xdata()) == [r["seen"] for r in histories[("in", 1)]]
    assert list(p1.get_ydata()) == [r["mistake_rate"] for r in histories[("in", 1)]]
    group = lines["group E_n (3 partitions)"]
    assert list(group.get_xdata()) == [p["seen"] for p in curve] and group.get_xdata()[-1] == 3000
    assert group.get_ydata()[-1] == pytest.approx(sum((7 + p) * 10 + p for p in range(3)) / 3000)
    assert p1.get_marker() == "o"  # a short history is drawn point by point
    long = {("in", 0): _partition_history(0, 60), ("in", 1): _partition_history(1, 1)}
    plot_partitions({str(p): rs for (_, p), rs in long.items()}, group_curve(long), tmp_path / "l.png")
    lines = {line.get_label(): line for line in closed[-1].axes[0].get_lines()}
    assert lines["partition 0 (E_n)"].get_marker() == "None"  # a long one as a line
    assert lines["partition 1 (E_n)"].get_marker() == "o"  # one record: one point, visible
    with pytest.raises(OutputError):
        (tmp_path / "f").write_text("")
        plot_partitions({"0": histories[("in", 0)]}, curve, tmp_path / "f" / "x.png")


def _red_pixels(path) -> int:
    import numpy as np

    with Image.open(path) as img:
        rgb = np.asarray(img.convert("RGB")).astype(int)
    # matplotlib's tab:red is (214, 39, 40); a thin dotted line is drawn blended with white
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return int(((r > 150) & (r - g > 60) & (abs(g - b) < 25)).sum())  # orange has g well above b


def test_drift_events_are_marked_where_they_were_raised(tmp_path):
    plain = plot_stats(ROWS, tmp_path / "plain.png", size=(600, 400))
    marked = plot_stats(ROWS, tmp_path / "marked.png", size=(600, 400),
                        drifts=[{"labeled": 2.5, "offset": 2}, {"offset": 3}])  # the second: nowhere
    assert _red_pixels(plain) == 0 and _red_pixels(marked) > 100
    parts = {"0": ROWS, "1": ROWS}
    group = group_curve({("in", 0): ROWS})
    without = plot_partitions(parts, group, tmp_path / "p0.png", size=(600, 400))
    with_ = plot_partitions(parts, group, tmp_path / "p1.png", size=(600, 400),
                            drifts={"1": [{"labeled": 3}]})
    with Image.open(without) as a, Image.open(with_) as b:
        assert a.tobytes() != b.tobytes()


def test_events_among_the_records_are_left_out_of_the_curves(tmp_path):
    # what a statistics topic holds once an alarm was raised: a drift event has `labeled` but no
    # `seen`; the demo once passed the topic's records as they came and failed on it
    event = {"event": "drift", "topic": "in", "partition": 0, "offset": 3, "labeled": 3,
             "rate_before": 0.1, "rate_after": 0.5}
    mixed = plot_stats([*ROWS, event], tmp_path / "mixed.png", size=(600, 400))
    plain = plot_stats(ROWS, tmp_path / "plain.png", size=(600, 400))
    with Image.open(mixed) as a, Image.open(plain) as b:
        assert a.tobytes() == b.tobytes()


def _class_history(names: list, n: int) -> list[dict]:
    """K-class statistics records (README, "Statistics"), one every 100 examples: class i has
    10·(i + 1) labeled examples of each 100·(i + 1)... in record j, j·(i + 1)·10 labeled examples of
    class i, of which j·(i + 1) mistakes once j > i (none before)."""
    out = []
    for j in range(1, n + 1):
        per_class = [{"class": name, "labeled": 10 * j * (i + 1), "mistakes": j * (i + 1) if j > i else 0,
                      "predicted": 10 * j * (i + 1)} for i, name in enumerate(names)]
        labeled = sum(c["labeled"] for c in per_class)
        mistakes = sum(c["mistakes"] for c in per_class)
        out.append({"seen": labeled, "labeled": labeled, "mistakes": mistakes,
                    "mistake_rate": mistakes / labeled, "window_mistake_rate": mistakes / labeled,
                    "ewma_mistake_rate": mistakes / labeled, "margin_min": 0.01, "ts": float(j),
                    "classes": names, "per_class": per_class, "intercept": None,
                    "intercepts": [0.0] * len(names), "confusion": [[0] * len(names)] * len(names)})
    return out


def _closed_figures(monkeypatch) -> list:
    import stream_perceptron.commands.plot as plot

    closed: list = []
    close = plot.pyplot().close
    monkeypatch.setattr(plot.pyplot(), "close", lambda fig: (closed.append(fig), close(fig)))
    return closed


def test_a_k_class_history_adds_a_panel_of_each_most_labeled_class_mistake_rate(tmp_path, monkeypatch):
    closed = _closed_figures(monkeypatch)
    names = [f"c{i}" for i in range(12)]
    records = _class_history(names, 15)
    history = _History(Thinned(100))  # as watch --plot holds them: cut to what is drawn
    for record in records:
        history.add(decode(encode(record)))
    kept = history.labeled.kept()
    assert all(set(k) == {*PLOTTED, "class_counts"} for k in kept)
    assert list(kept[-1]["class_counts"]) == names[2:]  # the ten most labeled, in row order
    path = plot_stats(kept, tmp_path / "k.png", size=(900, 600))
    with Image.open(path) as img:
        assert img.format == "PNG" and img.size == (900, 600)
    fig = closed[-1]
    rates, classes = fig.axes[0], fig.axes[1]
    assert len(fig.axes) == 3 and classes.get_ylabel() == "mistake rate of the class"
    (legend,) = fig.legends  # the rates' legend, below; the classes' beside their panel
    assert [t.get_text() for t in legend.get_texts()][0] == "cumulative mistake rate (E_n)"
    lines = {line.get_label(): line for line in classes.get_lines()}
    assert list(lines) == [f"class c{i}" for i in range(2, 12)]
    c4 = lines["class c4"]
    assert list(c4.get_xdata()) == [r["seen"] for r in records]
    # mistakes / labeled of c4: none in records 1 to 4, then j·5 / (10·j·5)
    assert list(c4.get_ydata()) == [0.0] * 4 + [0.1] * 11
    assert rates.get_shared_x_axes().joined(rates, classes)
    # a whole record (as demo passes them) draws the same
    assert plot_stats(records, tmp_path / "whole.png", size=(900, 600)).exists()
    assert [line.get_label() for line in closed[-1].axes[1].get_lines()] == list(lines)
    with Image.open(path) as a, Image.open(tmp_path / "whole.png") as b:
        assert a.tobytes() == b.tobytes()


def test_a_binary_history_draws_no_class_panel(tmp_path, monkeypatch):
    closed = _closed_figures(monkeypatch)
    plot_stats(ROWS, tmp_path / "b.png", size=(600, 400))
    assert len(closed[-1].axes) == 2  # the rates and the margin's twin


def test_class_names_in_the_legend_are_cleaned_bounded_and_never_mathematics(tmp_path, monkeypatch):
    closed = _closed_figures(monkeypatch)
    names = ["cat\x1b]0;pwned\x07\x1b[2J", "$\\frac{1}{0}$", "x" * 10_000, 7, True, ""]
    path = plot_stats(_class_history(names, 3), tmp_path / "h.png", size=(600, 400))
    assert path.exists()
    labels = [line.get_label() for line in closed[-1].axes[1].get_lines()]
    # True is not a class name; a name is cut to 30 characters in the legend
    assert labels == ["class cat", r"class \$\frac{1}{0}\$", "class " + "x" * 30 + "…", "class 7", 'class ""']
