"""Small charts as inline SVG text, for the HTML report: rows of horizontal bars and a log-log
scatter. No library and nothing fetched: the report is one file that opens anywhere.

Bars run sideways so that every row carries its label in words (a model and its version, not a
number to look up) and a chart is as tall as it has rows: one task makes a short strip, not a
frame of empty space. Every mark carries a ``<title>``, which a browser shows as its tooltip.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

CHART_WIDTH = 1350
"""The page's column at a 1400 px window; charts scale down with a narrower one."""

LABEL_WIDTH, LABEL_CHARS = 270, 38
ROW, HEAD, FOOT, GAP, NOTE = 26, 44, 22, 28, 58
"""Row height, the band for panel titles and legends above, the tick band below, the space
between panels and the room a panel keeps right of its longest bar for the row's note."""

SCATTER_WIDTH, SCATTER_HEIGHT = 660, 420
LEFT, RIGHT, TOP, BOTTOM = 64, 28, 24, 44


@dataclass(frozen=True)
class Series:
    """One named row of values, drawn in one colour; None where a row has no value."""

    name: str
    values: Sequence[float | None]
    colour: str


@dataclass(frozen=True)
class Panel:
    """One column of a row chart: its title, its series (stacked into one bar, or side by side)
    and a short note written after each row's bar (a total, a speed-up)."""

    title: str
    series: Sequence[Series]
    stacked: bool
    unit: str = ""
    notes: Sequence[str] | None = None


def bar_rows(labels: Sequence[str], panels: Sequence[Panel], *, tips: Sequence[str] | None = None,
             width: int = CHART_WIDTH) -> str:
    """A chart of one row per label and one column per panel, each panel on its own scale.

    A row is one ``<g class="row">`` holding its label (cut to fit; ``tips`` are the full
    names shown as tooltips) and its bars in every panel, so a bar is never without its label.
    """
    rows = len(labels)
    height = HEAD + rows * ROW + FOOT
    panel_width = (width - LABEL_WIDTH - GAP * len(panels)) / max(len(panels), 1)
    names = list(tips) if tips else list(labels)
    lefts = [LABEL_WIDTH + GAP + p * (panel_width + GAP) for p in range(len(panels))]
    plots = [panel_width - (NOTE if panel.notes else 8) for panel in panels]
    tops = [_nice(max((_extent(panel, i) for i in range(rows)), default=0.0)) for panel in panels]
    parts = []
    for panel, left, plot, top in zip(panels, lefts, plots, tops, strict=True):
        parts.append(f'<text class="title" x="{left:.1f}" y="14">{escape(panel.title)}</text>')
        parts.append(_legend(panel.series, left, 24) if len(panel.series) > 1 else "")
        for k in range(3):
            x = left + plot * k / 2
            parts.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{HEAD - 4}" '
                         f'y2="{HEAD + rows * ROW}"/><text class="tick" x="{x:.1f}" '
                         f'y="{HEAD + rows * ROW + 15}" text-anchor="middle">{_fmt(top * k / 2)}</text>')
    for i, label in enumerate(labels):
        y = HEAD + i * ROW
        parts.append('<g class="row">')
        if i % 2:
            parts.append(f'<rect class="band" x="0" y="{y}" width="{width}" height="{ROW}"/>')
        parts.append(f'<text class="label" x="{LABEL_WIDTH - 8}" y="{y + ROW / 2 + 4:.1f}" '
                     f'text-anchor="end">{escape(_short(label, LABEL_CHARS))}'
                     f'<title>{escape(names[i])}</title></text>')
        for panel, left, plot, top in zip(panels, lefts, plots, tops, strict=True):
            parts.extend(_row_bars(panel, i, names[i], left, y, plot / top))
        parts.append("</g>")
    return _svg(parts, width, height, "rows")


def _extent(panel: Panel, row: int) -> float:
    values = [s.values[row] or 0.0 for s in panel.series]
    return sum(values) if panel.stacked else max(values, default=0.0)


def _row_bars(panel: Panel, row: int, name: str, left: float, y: float, scale: float) -> list[str]:
    side_by_side = 1 if panel.stacked else max(len(panel.series), 1)
    thick = (ROW - 8) / side_by_side
    out, base = [], 0.0
    for j, s in enumerate(panel.series):
        value = s.values[row]
        if value is None or value <= 0:
            continue
        x = left + (base * scale if panel.stacked else 0.0)
        top = y + 4 + (0.0 if panel.stacked else j * thick)
        out.append(f'<rect class="mark" x="{x:.1f}" y="{top:.1f}" width="{max(value * scale, 0.5):.1f}" '
                   f'height="{thick - (0 if panel.stacked else 1):.1f}" fill="{s.colour}"><title>'
                   f'{escape(name)}: {escape(s.name)} {_fmt(value)}{escape(panel.unit)}</title></rect>')
        if panel.stacked:
            base += value
    if panel.notes and panel.notes[row]:
        x = left + _extent(panel, row) * scale + 5
        out.append(f'<text class="note" x="{x:.1f}" y="{y + ROW / 2 + 4:.1f}">'
                   f"{escape(panel.notes[row])}</text>")
    return out


def scatter_loglog(points: Sequence[tuple[float, float, str]], *, x_label: str, y_label: str) -> str:
    """A log-log scatter of (x, y, label) points with the line y = x: a point below the line
    is a key whose best is faster than its default."""
    positive = [(x, y, t) for x, y, t in points if x > 0 and y > 0]
    values = [v for x, y, _ in positive for v in (x, y)] or [1.0, 10.0]
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    high = max(high, low + 1)
    width, height = SCATTER_WIDTH, SCATTER_HEIGHT
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM

    def px(v: float) -> float:
        return LEFT + plot_w * (math.log10(v) - low) / (high - low)

    def py(v: float) -> float:
        return TOP + plot_h * (1 - (math.log10(v) - low) / (high - low))

    middle = (TOP + height - BOTTOM) / 2
    parts = [f'<line class="frame" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{height - BOTTOM}"/>'
             f'<line class="frame" x1="{LEFT}" y1="{height - BOTTOM}" x2="{width - RIGHT}" '
             f'y2="{height - BOTTOM}"/><text class="axis" x="14" y="{middle:.0f}" text-anchor="middle" '
             f'transform="rotate(-90 14 {middle:.0f})">{escape(y_label)}</text>']
    for e in range(low, high + 1):
        v = 10.0 ** e
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{width - RIGHT}" y1="{py(v):.1f}" '
                     f'y2="{py(v):.1f}"/><text class="tick" x="{LEFT - 6}" y="{py(v) + 4:.1f}" '
                     f'text-anchor="end">{_fmt(v)}</text>'
                     f'<text class="tick" x="{px(v):.1f}" y="{height - BOTTOM + 16}" '
                     f'text-anchor="middle">{_fmt(v)}</text>')
    parts.append(f'<line class="diagonal" x1="{px(10.0 ** low):.1f}" y1="{py(10.0 ** low):.1f}" '
                 f'x2="{px(10.0 ** high):.1f}" y2="{py(10.0 ** high):.1f}"><title>best = default'
                 '</title></line>')
    for x, y, label in positive:
        parts.append(f'<circle class="mark" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5">'
                     f'<title>{escape(label)}: default {_fmt(x)} us, best {_fmt(y)} us</title></circle>')
    parts.append(f'<text class="axis" x="{LEFT + plot_w / 2:.0f}" y="{height - BOTTOM + 36}" '
                 f'text-anchor="middle">{escape(x_label)}</text>')
    return _svg(parts, width, height, "scatter")


def _svg(parts: list[str], width: int, height: int, kind: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {kind}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img">' + "".join(parts) + "</svg>")


def _legend(series: Sequence[Series], x: float, y: int) -> str:
    out = []
    for s in series:
        out.append(f'<rect x="{x:.1f}" y="{y}" width="10" height="10" fill="{s.colour}"/>'
                   f'<text class="tick" x="{x + 14:.1f}" y="{y + 9}">{escape(s.name)}</text>')
        x += 24 + 6.5 * len(s.name)
    return "".join(out)


def _nice(value: float) -> float:
    """The round number at or above ``value`` the axis ends at (1, 2 or 5 times a power of 10)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value)


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _short(label: str, width: int) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"
