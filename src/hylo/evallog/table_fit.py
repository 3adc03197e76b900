"""Tables that fit the console they print on.

A table that does not fit, rich squeezes: a number is cut to `…` and a column can vanish. So each report offers
layouts, widest first (full headers; short headers with a legend; the columns split over two tables; a few lines per
row), and prints the first that fits: a layout fits when its numbers keep their whole width and its names (tasks,
runs, episodes), which may wrap, keep at least `FOLD_MIN` columns.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.box import Box
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table

COMPACT = Box("    \n    \n ── \n    \n ── \n ── \n    \n    \n")
"""No vertical rules: a rule under the header and above a section's end (the overall row), two spaces between
columns. A vertical rule costs three columns per column, which an 80-column terminal cannot spare."""

FOLD_MIN = 12
"""A name column (task, run, episode) may wrap, down to this width and no narrower."""

_UNBOUNDED = 10_000


def compact_table(title: str | None = None) -> Table:
    return Table(title=title, box=COMPACT, padding=(0, 1), collapse_padding=True, show_edge=False, pad_edge=False)


def add_number_column(table: Table, header: str) -> None:
    """A column of figures: right-aligned, never wrapped (so never cut when its layout is chosen by `fitting`)."""
    table.add_column(header, justify="right", no_wrap=True)


def add_name_column(table: Table, header: str, *, wrap: bool = True, min_width: int | None = None) -> None:
    """A column of names, left-aligned; one that wraps folds a long name over lines rather than cut it, down to
    `FOLD_MIN` or `min_width`, whichever is wider."""
    table.add_column(header, no_wrap=not wrap, overflow="fold", min_width=min_width)


def needed_width(console: Console, table: Table) -> int:
    """The width `table` needs with its wrapping columns folded to `FOLD_MIN` (or their own `min_width`):
    narrower, rich would cut its figures."""
    wide = console.options.update_width(_UNBOUNDED)
    width = Measurement.get(console, wide, table).maximum
    for column in table.columns:
        if column.no_wrap:
            continue
        widest = max(Measurement.get(console, wide, cell).maximum for cell in (column.header, *column.cells))
        width -= max(0, widest - max(FOLD_MIN, column.min_width or 0))
    return width


def fits(console: Console, layout: Sequence[RenderableType]) -> bool:
    """Whether every table of `layout` fits `console` (text wraps, and always fits)."""
    return all(needed_width(console, part) <= console.width for part in layout if isinstance(part, Table))


def fitting(console: Console, layouts: Sequence[Sequence[RenderableType]]) -> Sequence[RenderableType]:
    """The first of `layouts` that fits `console`, else the last (which should be text that wraps at any width)."""
    for layout in layouts:
        if fits(console, layout):
            return layout
    return layouts[-1]


def print_fitting(console: Console, layouts: Sequence[Sequence[RenderableType]]) -> None:
    for part in fitting(console, layouts):
        console.print(part)
