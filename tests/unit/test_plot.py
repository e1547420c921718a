"""``plot_stats``: always a PNG, at the path given; a path it cannot write is one clear error."""

from __future__ import annotations

import pytest
from PIL import Image

from stream_perceptron.errors import OutputError
from stream_perceptron.plot import plot_stats

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
