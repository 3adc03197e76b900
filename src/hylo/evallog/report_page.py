"""The page a report is written into: its style and its one small script, both inline, and the HTML pieces every
section is built of (tables, definition lists, sections), each escaped where it takes text.

Nothing here names a resource outside the page: no stylesheet, font, script or image is fetched, so the file reads
the same offline, from a mail attachment or a USB stick.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from html import escape

STYLE = """
:root { --ink: #1d232b; --dim: #5b6672; --line: #d6dbe1; --bg: #f6f7f9; --ok: #1f7a3d; --bad: #b3261e;
        --warn: #9a6700; --accent: #2f5fb3; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       background: var(--bg); }
main { max-width: 1320px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 18px; margin: 0 0 8px; word-break: break-all; }
h3 { font-size: 15px; margin: 18px 0 6px; }
section.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 14px 18px;
               margin: 16px 0; }
nav a { margin-right: 14px; }
a { color: var(--accent); }
.dim, .note { color: var(--dim); }
.note { font-size: 12.5px; margin: 4px 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 4px 0; }
th, td { padding: 3px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { font-weight: 600; background: #eef1f4; position: sticky; top: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.overall td { font-weight: 600; border-top: 2px solid var(--ink); }
td.id { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; word-break: break-all; }
dl.identity { display: grid; grid-template-columns: 170px 1fr; gap: 2px 12px; margin: 4px 0; }
dl.identity dt { color: var(--dim); }
dl.identity dd { margin: 0; word-break: break-word; }
pre { margin: 0; white-space: pre-wrap; font-size: 12.5px; }
.status-success { color: var(--ok); }
.status-failure, .status-safety_abort { color: var(--bad); }
.status-error, .status-infra_invalid { color: var(--warn); font-weight: 600; }
.counts span { display: inline-block; margin-right: 14px; }
.filters { margin: 6px 0; display: flex; gap: 16px; align-items: center; flex-wrap: wrap; }
.episodes { max-height: 520px; overflow: auto; border: 1px solid var(--line); }
.episodes table { width: 100%; margin: 0; }
tr:target td, figure:target { background: #fff4c2; }
.gallery { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; padding: 6px; border: 1px solid var(--line); border-radius: 4px; background: #fff;
         max-width: 100%; }
figure video { display: block; max-width: 320px; max-height: 240px; background: #000; }
figure img { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 12px; margin-top: 4px; max-width: 320px; word-break: break-all; }
svg.chart { width: 100%; max-width: 900px; height: auto; font-size: 12px; }
svg.chart text { fill: var(--ink); }
@media print {
  body { background: #fff; font-size: 11px; }
  main { max-width: none; padding: 0; }
  nav, .filters { display: none; }
  section.card { border: none; padding: 0; margin: 12px 0; }
  .episodes { max-height: none; overflow: visible; border: none; }
  tr[hidden] { display: table-row; }
  th { position: static; }
  table, figure, svg.chart { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""
"""The page's style: readable at 1400x900, and in print every episode row shown and nothing cut at a page's end."""

SCRIPT = """
document.querySelectorAll('.filters').forEach(function (box) {
  var table = document.getElementById(box.dataset.table);
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  var selects = box.querySelectorAll('select');
  var shown = box.querySelector('.shown');
  function apply() {
    var want = {};
    selects.forEach(function (s) { want[s.name] = s.value; });
    var count = 0;
    rows.forEach(function (row) {
      var keep = (!want.task || row.dataset.task === want.task) && (!want.status || row.dataset.status === want.status);
      row.hidden = !keep;
      if (keep) count += 1;
    });
    shown.textContent = count + ' of ' + rows.length + ' episodes shown';
  }
  selects.forEach(function (s) { s.addEventListener('change', apply); });
  apply();
});
"""
"""The episode lists' filters: a task and a status chosen, only the rows of both shown, with their count."""


def esc(text: object) -> str:
    """`text` as HTML text or an attribute's value."""
    return escape(str(text), quote=True)


def page(title: str, body: str) -> str:
    """A whole HTML document: `body` under `title`, the style and the script inline."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n"
        f"<body><main>\n{body}\n</main><script>{SCRIPT}</script></body></html>\n"
    )


def card(section_id: str, heading: str, *parts: str) -> str:
    """A section of the page under its heading (`heading` is HTML)."""
    return f'<section class="card" id="{esc(section_id)}">{heading}{"".join(parts)}</section>\n'


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def cell(text: object, *, num: bool = False, css: str | None = None, raw: bool = False) -> str:
    """One table cell: `text` escaped (or as HTML with `raw`), right-aligned for a number."""
    classes = " ".join(c for c in ("num" if num else None, css) if c)
    attrs = f' class="{classes}"' if classes else ""
    return f"<td{attrs}>{text if raw else esc(text)}</td>"


def table(
    headers: Sequence[str],
    rows: Iterable[str],
    *,
    numeric_from: int = 1,
    numeric: Collection[int] = (),
    table_id: str | None = None,
    css: str | None = None,
) -> str:
    """A table of `headers` (those from `numeric_from` on, and those at `numeric`, right-aligned) over `rows` (each
    a `<tr>`)."""
    head = "".join(
        f'<th class="num">{esc(h)}</th>' if i >= numeric_from or i in numeric else f"<th>{esc(h)}</th>"
        for i, h in enumerate(headers)
    )
    attrs = (f' id="{esc(table_id)}"' if table_id else "") + (f' class="{esc(css)}"' if css else "")
    return (
        f'<div class="scroll"><table{attrs}><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
    )


def row(cells: Iterable[str], *, css: str | None = None, attrs: str = "") -> str:
    """A `<tr>` of `cells` (each from `cell`)."""
    klass = f' class="{esc(css)}"' if css else ""
    return f"<tr{klass}{attrs}>{''.join(cells)}</tr>"


def definitions(items: Iterable[tuple[str, str]]) -> str:
    """A definition list of (term, HTML) pairs."""
    return '<dl class="identity">' + "".join(f"<dt>{esc(term)}</dt><dd>{value}</dd>" for term, value in items) + "</dl>"


def select(name: str, label: str, values: Sequence[str]) -> str:
    """A `<select>` of `values` with an "all" choice first."""
    options = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)
    return f'<label>{esc(label)} <select name="{esc(name)}"><option value="">all</option>{options}</select></label>'
