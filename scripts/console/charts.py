"""Server-rendered SVG line charts: no JavaScript and nothing fetched at runtime."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape


@dataclass(frozen=True)
class Series:
    """One line: a name, a CSS colour, and (time, value) points."""

    name: str
    colour: str
    points: Sequence[tuple[datetime, float]]


def line_chart(series: Sequence[Series], width: int = 640, height: int = 200, title: str = "") -> str:
    """Draw an SVG chart of step lines over a shared time axis, with a legend; a note when there is too little data."""
    points = [p for s in series for p in s.points]
    if len({t for t, _ in points}) < 2:
        return (f'<svg class="chart" role="img" width="{width}" height="60" aria-label="{escape(title)}">'
                f'<text x="8" y="30">collecting history: points appear as the console reads the pool</text></svg>')
    left, right, top, bottom = 40, width - 10, 10, height - 40
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    vmax = max(1.0, max(v for _, v in points))
    span = (t1 - t0).total_seconds() or 1.0

    def x(t: datetime) -> float:
        return left + (right - left) * (t - t0).total_seconds() / span

    def y(v: float) -> float:
        return bottom - (bottom - top) * v / vmax

    parts = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'aria-label="{escape(title)}">',
             f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#888"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#888"/>',
             f'<text x="{left - 6}" y="{y(vmax) + 4:.1f}" text-anchor="end">{vmax:g}</text>',
             f'<text x="{left - 6}" y="{bottom + 4}" text-anchor="end">0</text>',
             f'<text x="{left}" y="{bottom + 16}">{t0.astimezone(timezone.utc):%H:%M}</text>',
             f'<text x="{right}" y="{bottom + 16}" text-anchor="end">{t1.astimezone(timezone.utc):%H:%M} UTC</text>']
    for index, s in enumerate(series):
        if not s.points:
            continue
        path, last = [], None
        for t, v in sorted(s.points):
            if last is not None:
                path.append(f"L{x(t):.1f},{y(last):.1f}")  # step: a value holds until the next read
            path.append(f"{'M' if last is None else 'L'}{x(t):.1f},{y(v):.1f}")
            last = v
        parts.append(f'<path d="{" ".join(path)}" fill="none" stroke="{s.colour}" stroke-width="2" '
                     f'data-series="{escape(s.name)}"><title>{escape(s.name)}</title></path>')
        lx = left + index * 130
        parts.append(f'<rect x="{lx}" y="{height - 14}" width="10" height="10" fill="{s.colour}"/>'
                     f'<text x="{lx + 14}" y="{height - 5}">{escape(s.name)}</text>')
    parts.append("</svg>")
    return "".join(parts)
