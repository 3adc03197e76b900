"""A sweep's plot: success rate against latency (control steps), one line per execution horizon, each with its 95%
Wilson band, drawn from the record alone with matplotlib's Agg backend.

The output is deterministic: the SVG's ids are salted with a constant (`svg.hashsalt`), its text is drawn as paths
and its metadata carries no date, and the PNG carries no software tag; the same record gives the same bytes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

MARKERS = ("o", "s", "^", "D", "v", "P")
LINESTYLES = ("-", "--", "-.", ":")
"""Each horizon's line is told apart by its marker and dash as well as its colour (equal rates overlap)."""
SVG_METADATA = {"Date": None, "Creator": "hylo sweep"}
PNG_METADATA = {"Software": None}


def horizon_label(execution_steps: int | None) -> str:
    """A line's name: `s = 4`, or the agent's own horizon."""
    return "s = agent's own" if execution_steps is None else f"s = {execution_steps}"


def _figure(record: dict[str, Any]) -> Figure:
    figure = Figure(figsize=(6.4, 4.2), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    lines: dict[int | None, list[dict[str, Any]]] = {}
    for point in record["points"]:
        lines.setdefault(point["execution_steps"], []).append(point)
    for i, (execution_steps, points) in enumerate(lines.items()):
        drawn = sorted((p for p in points if p["success_rate"] is not None), key=lambda p: p["latency_steps"])
        if not drawn:
            continue
        xs = [p["latency_steps"] for p in drawn]
        (line,) = axes.plot(
            xs,
            [p["success_rate"] for p in drawn],
            marker=MARKERS[i % len(MARKERS)],
            linestyle=LINESTYLES[i % len(LINESTYLES)],
            label=horizon_label(execution_steps),
        )
        lows = [p["success_ci"][0] for p in drawn]
        highs = [p["success_ci"][1] for p in drawn]
        axes.fill_between(xs, lows, highs, color=line.get_color(), alpha=0.18, linewidth=0)
    latencies = sorted({p["latency_steps"] for p in record["points"]})
    axes.set_xticks(latencies)
    axes.set_ylim(-0.02, 1.02)
    axes.set_xlabel("latency d (control steps)")
    axes.set_ylabel("success rate (95% Wilson interval)")
    chunk = f", H = {record['chunk_size']}" if record.get("chunk_size") is not None else ""
    strategy = (record.get("timing_options") or {}).get("strategy", "naive")
    title = f"{record['agent']} on {record['benchmark']}{chunk}, {strategy} · {record['sweep_id']}"
    axes.set_title(title, fontsize=10)
    axes.grid(True, alpha=0.3)
    if lines:
        axes.legend(loc="best", fontsize=9)
    figure.tight_layout()
    return figure


def write_plots(record: dict[str, Any], png: Path, svg: Path) -> None:
    """Draw `record`'s plot to `png` and `svg` (each written whole, then moved into place)."""
    # the same bytes on every machine with the same matplotlib: fixed ids, text as paths, the font matplotlib ships
    with rc_context({"svg.hashsalt": "hylo-sweep", "svg.fonttype": "path", "font.family": "DejaVu Sans"}):
        figure = _figure(record)
        for path, kind, metadata in ((svg, "svg", SVG_METADATA), (png, "png", PNG_METADATA)):
            partial = path.with_name(f"{path.name}.partial")
            figure.savefig(partial, format=kind, metadata=metadata)
            os.replace(partial, path)
