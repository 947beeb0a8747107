"""Figure conventions of `isolab.plots.style` that a reader sees."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from isolab.plots.style import n_colorbar, n_norm, tidy


@pytest.mark.parametrize("ns", [[2, 4], [4, 8], [100, 128], [2, 128]])
def test_an_n_colour_bar_labels_each_tick_once(ns: list[int]) -> None:
    """A colour bar over less than a decade of n read 2,2,2,3,3,3,4,4,4: matplotlib fell back
    to ticks at 2.25, 2.5, … and the labels rounded them to whole numbers."""
    fig, ax = plt.subplots()
    n_colorbar(ax, n_norm(ns))
    tidy(fig)
    fig.canvas.draw()
    bar = fig.axes[-1]
    lo, hi = bar.get_ylim()
    shown = [
        (t.get_text(), y)
        for t, y in zip(bar.get_yticklabels(), bar.get_yticks(), strict=True)
        if lo * 0.999 <= y <= hi * 1.001 and t.get_text()
    ]
    labels = [text for text, _ in shown]
    assert len(labels) >= 2, shown
    assert len(set(labels)) == len(labels), shown
    for text, y in shown:
        assert float(text.replace(",", "")) == pytest.approx(y), shown
    plt.close(fig)
