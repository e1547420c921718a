"""``plot_stats``: always a PNG, at the path given; a path it cannot write is one clear error."""

from __future__ import annotations

import pytest
from PIL import Image

from stream_perceptron.commands.plot import Thinned, plot_stats
from stream_perceptron.errors import OutputError

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
    close = plot.plt.close
    monkeypatch.setattr(plot.plt, "close", lambda fig: (closed.append(fig), close(fig)))
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
