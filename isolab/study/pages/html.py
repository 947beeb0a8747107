"""The pieces of a self-contained HTML page: figures as embedded PNGs, polars tables, sections.

Everything a page shows travels inside its one file: figures are base64 `data:` URIs, the
style sheet is inline, and no element points at a network address or a local file, so that
the page reads the same offline, attached to an e-mail or as an MLflow artifact. All text is
escaped (`html.escape`): a run name or an experiment never becomes markup.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Iterable

import polars as pl
from matplotlib.figure import Figure

#: Resolution of embedded figures: sharp on a laptop screen, ≈ 50–100 kB per figure.
DPI = 100
#: Tables longer than this are folded (<details>): a 120-row n*(C) table is there to look up.
FOLD_ROWS = 15

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 1250px; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc;
     margin-top: 2em; } h3 { margin-bottom: 0.3em; }
.meta { color: #555; font-size: 0.92em; }
nav a { margin-right: 1em; }
.row { display: flex; flex-wrap: wrap; gap: 1em; } .row figure { flex: 1 1 480px; }
figure { margin: 0.8em 0; } figure img { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td.text, th.text { text-align: left; max-width: 32em; }
tr:nth-child(even) td { background: #fafafa; }
.agrees { color: #176b17; font-weight: bold; } .disagrees { color: #a31515; font-weight: bold; }
.inconclusive { color: #7a5b00; font-weight: bold; }
ul.summary li { margin: 0.25em 0; }
details summary { cursor: pointer; color: #333; }
""".strip()


def esc(text: object) -> str:
    """`text` as HTML text (quotes escaped too: safe inside attributes)."""
    return html.escape(str(text), quote=True)


def figure_png(fig: Figure, *, dpi: int = DPI) -> bytes:
    """The PNG bytes of `fig`, without the software tag matplotlib writes (a web address).
    Figures are laid out by their own layout engine (`figure_row`: constrained), so no
    `bbox_inches="tight"`, which draws every figure twice."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


def figure(fig: Figure, caption: str = "", alt: str = "") -> str:
    """`<figure>` holding `fig` as an embedded PNG, with an optional caption."""
    data = base64.b64encode(figure_png(fig)).decode("ascii")
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{esc(alt or caption)}" src="data:image/png;base64,{data}">{cap}</figure>'


def cell(value: object) -> str:
    """One table cell's text: NaN and None as a dash, large and small numbers in scientific
    notation, lists joined by commas."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
            return f"{value:.3g}"
        return f"{value:.3f}" if not value.is_integer() else f"{value:.0f}"
    if isinstance(value, list | tuple):
        return ", ".join(cell(v) for v in value)
    return str(value)


def table(
    df: pl.DataFrame, title: str = "", *, fold: int = FOLD_ROWS, styled: str | None = None
) -> str:
    """`df` as an HTML table (text columns left-aligned); folded under `title` when it has
    more than `fold` rows. Cells of column `styled` take their value as CSS class (a
    verdict's call: `agrees`, `disagrees`, `inconclusive`)."""
    text_cols = {c for c, t in df.schema.items() if t == pl.String or t == pl.Categorical}
    klass = {c: "text" if c in text_cols else "" for c in df.columns}

    def td(col: str, value: object) -> str:
        names = " ".join(k for k in (klass[col], esc(value) if col == styled else "") if k)
        attr = f' class="{names}"' if names else ""
        return f"<td{attr}>{esc(cell(value))}</td>"

    head = "".join(
        (f'<th class="text">{esc(c)}</th>' if klass[c] else f"<th>{esc(c)}</th>")
        for c in df.columns
    )
    rows = "".join(
        "<tr>" + "".join(td(c, v) for c, v in zip(df.columns, row, strict=True)) + "</tr>"
        for row in df.iter_rows()
    )
    body = f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    if df.height > fold:
        return f"<details><summary>{esc(title or 'table')} ({df.height} rows)</summary>{body}</details>"
    return (f"<h4>{esc(title)}</h4>" if title else "") + body


def bullets(lines: Iterable[str]) -> str:
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return f'<ul class="summary">{items}</ul>' if items else ""


def paragraph(text: str, klass: str = "") -> str:
    attr = f' class="{klass}"' if klass else ""
    return f"<p{attr}>{esc(text)}</p>"


def section(anchor: str, title: str, *parts: str) -> str:
    """`<section>` with an `<h2>` that the page's table of contents links to (`#anchor`)."""
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{"".join(parts)}</section>'


def page(title: str, meta: Iterable[str], sections: list[tuple[str, str, str]]) -> str:
    """The whole document: title, meta lines, a table of contents of `sections` ((anchor,
    title, html) each) and the sections themselves."""
    nav = " ".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t, _ in sections)
    metas = "".join(f'<p class="meta">{esc(m)}</p>' for m in meta)
    body = "".join(section(a, t, h) for a, t, h in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{esc(title)}</h1>{metas}<nav>{nav}</nav>{body}</body></html>\n"
    )
