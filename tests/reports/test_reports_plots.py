"""Plots that read at a glance (issue 25, item 4): legends beside the data, never over it."""

from __future__ import annotations

from orthotune.reports._plots import _legend, _panels


def test_a_legend_lies_outside_its_axes():
    figure, (ax,) = _panels(1, "title")
    for n in range(4):
        ax.plot([1, 2, 3, 4, 5, 6], [n, n + 1, n + 3, n + 2, n + 5, n + 4], label=f"backbone {n}, depth {2 ** n}")
    _legend(ax)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)
    legend = ax.get_legend().get_window_extent(renderer)
    data = ax.get_window_extent(renderer)
    assert legend.x0 >= data.x1  # right of the plotting area
    assert legend.x1 <= figure.bbox.x1 + 1  # and still inside the figure
