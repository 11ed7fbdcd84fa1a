"""Small charts as inline SVG text, for the HTML report: bars (stacked or side by side) and a
log-log scatter. No library and nothing fetched: the report is one file that opens anywhere.

Every mark carries a ``<title>``, which a browser shows as its tooltip.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 760, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 28, 36, 44


@dataclass(frozen=True)
class Series:
    """One named row of values, drawn in one colour."""

    name: str
    values: Sequence[float]
    colour: str


def bars(labels: Sequence[str], series: Sequence[Series], *, stacked: bool, y_label: str,
         unit: str = "", names: Sequence[str] | None = None, notes: Sequence[str] | None = None) -> str:
    """A bar chart: one group per label (short, under the axis; ``names`` are the tooltips'),
    the series stacked or side by side, ``notes`` written above the groups."""
    n = max(len(labels), 1)
    totals = [sum(s.values[i] for s in series) if stacked else max((s.values[i] for s in series), default=0)
              for i in range(len(labels))]
    top = _nice(max(totals, default=0.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = min(plot_w / n, 90.0)  # a few groups stay bars, not slabs
    bar_w = slot * 0.7 / (1 if stacked else max(len(series), 1))
    parts = [_frame(y_label), *_y_ticks(top, lambda v: TOP + plot_h * (1 - v / top))]
    for i, label in enumerate(labels):
        x0, base = LEFT + slot * i + slot * 0.15, 0.0
        for j, s in enumerate(series):
            value = s.values[i]
            if value <= 0:
                continue
            low = base if stacked else 0.0
            y1 = TOP + plot_h * (1 - (low + value) / top)
            y2 = TOP + plot_h * (1 - low / top)
            x = x0 if stacked else x0 + j * bar_w
            name = names[i] if names else label
            parts.append(f'<rect class="mark" x="{x:.1f}" y="{y1:.1f}" width="{bar_w:.1f}" '
                         f'height="{max(y2 - y1, 0.5):.1f}" fill="{s.colour}"><title>{escape(name)}: '
                         f'{escape(s.name)} {_fmt(value)}{unit}</title></rect>')
            if stacked:
                base += value
        tx = LEFT + slot * (i + 0.5)
        parts.append(f'<text class="tick" x="{tx:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                     f'text-anchor="middle">{escape(_short(label, 8))}</text>')
        if notes and notes[i]:
            ty = TOP + plot_h * (1 - totals[i] / top) - 5
            parts.append(f'<text class="note" x="{tx:.1f}" y="{ty:.1f}" '
                         f'text-anchor="middle">{escape(notes[i])}</text>')
    parts.append(_legend(series))
    return _svg(parts)


def scatter_loglog(points: Sequence[tuple[float, float, str]], *, x_label: str, y_label: str) -> str:
    """A log-log scatter of (x, y, label) points with the line y = x: a point below the line
    is a key whose best is faster than its default."""
    positive = [(x, y, t) for x, y, t in points if x > 0 and y > 0]
    values = [v for x, y, _ in positive for v in (x, y)] or [1.0, 10.0]
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    high = max(high, low + 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(v: float) -> float:
        return LEFT + plot_w * (math.log10(v) - low) / (high - low)

    def py(v: float) -> float:
        return TOP + plot_h * (1 - (math.log10(v) - low) / (high - low))

    parts = [_frame(y_label)]
    for e in range(low, high + 1):
        v = 10.0 ** e
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{py(v):.1f}" '
                     f'y2="{py(v):.1f}"/><text class="tick" x="{LEFT - 6}" y="{py(v) + 4:.1f}" '
                     f'text-anchor="end">{_fmt(v)}</text>'
                     f'<text class="tick" x="{px(v):.1f}" y="{HEIGHT - BOTTOM + 16}" '
                     f'text-anchor="middle">{_fmt(v)}</text>')
    parts.append(f'<line class="diagonal" x1="{px(10.0 ** low):.1f}" y1="{py(10.0 ** low):.1f}" '
                 f'x2="{px(10.0 ** high):.1f}" y2="{py(10.0 ** high):.1f}"><title>best = default'
                 '</title></line>')
    for x, y, label in positive:
        parts.append(f'<circle class="mark" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5">'
                     f'<title>{escape(label)}: default {_fmt(x)} us, best {_fmt(y)} us</title></circle>')
    parts.append(f'<text class="axis" x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - BOTTOM + 36}" '
                 f'text-anchor="middle">{escape(x_label)}</text>')
    return _svg(parts)


def _svg(parts: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'width="{WIDTH}" height="{HEIGHT}" role="img">' + "".join(parts) + "</svg>")


def _frame(y_label: str) -> str:
    return (f'<line class="frame" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}"/>'
            f'<line class="frame" x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" '
            f'y2="{HEIGHT - BOTTOM}"/>'
            f'<text class="axis" x="14" y="{(TOP + HEIGHT - BOTTOM) / 2:.0f}" text-anchor="middle" '
            f'transform="rotate(-90 14 {(TOP + HEIGHT - BOTTOM) / 2:.0f})">{escape(y_label)}</text>')


def _y_ticks(top: float, place: Callable[[float], float]) -> list[str]:
    out = []
    for k in range(5):
        v = top * k / 4
        at = place(v)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{at:.1f}" y2="{at:.1f}"/>'
                   f'<text class="tick" x="{LEFT - 6}" y="{at + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    return out


def _legend(series: Sequence[Series]) -> str:
    out, x = [], LEFT
    for s in series:
        out.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{s.colour}"/>'
                   f'<text class="tick" x="{x + 14}" y="15">{escape(s.name)}</text>')
        x += 24 + 7 * len(s.name)
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


def _short(label: str, width: int = 22) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"
