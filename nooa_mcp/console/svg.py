"""Chart geometry for the console: pure functions from numbers to SVG coordinates.

The templates only draw what these return, so every bar width, dot position and curve point
can be checked without a browser. Each shape carries the number it stands for, and the
templates write it into a `data-*` attribute beside the geometry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

PARTS = ("rel", "rec", "imp", "spread")


# --------------------------------------------------------------------------- score bars


@dataclass(frozen=True)
class Segment:
    """One part of a score bar: `value` as explain reports it, drawn `weight × value` long."""

    part: str
    value: float
    weight: float
    x: float
    width: float


def bar_scale(
    rows: Sequence[Mapping[str, float | None]], weights: Mapping[str, float], width: float
) -> float:
    """Pixels per score unit, shared by all rows so that their bars compare."""
    longest = max((_weighted_total(r, weights) for r in rows), default=0.0)
    return width / longest if longest > 0 else 0.0


def score_segments(
    values: Mapping[str, float | None], weights: Mapping[str, float], scale: float
) -> list[Segment]:
    """Stacked segments rel | rec | imp | spread, left to right, each `weight × value` long.

    A missing part (None: never computed) or a negative one draws nothing but keeps its value.
    """
    out, x = [], 0.0
    for part in PARTS:
        raw = values.get(part)
        value = 0.0 if raw is None else float(raw)
        width = max(value, 0.0) * weights.get(part, 1.0) * scale
        out.append(Segment(part, value, weights.get(part, 1.0), round(x, 2), round(width, 2)))
        x += width
    return out


def _weighted_total(values: Mapping[str, float | None], weights: Mapping[str, float]) -> float:
    return sum(max(values.get(p) or 0.0, 0.0) * weights.get(p, 1.0) for p in PARTS)


# --------------------------------------------------------------------------- time axes


@dataclass(frozen=True)
class Axis:
    """A time interval mapped onto [left, right] pixels."""

    start: datetime
    end: datetime
    left: float
    right: float

    def x(self, when: datetime) -> float:
        span = (self.end - self.start).total_seconds()
        if span <= 0:
            return round((self.left + self.right) / 2, 2)
        frac = (when - self.start).total_seconds() / span
        return round(self.left + min(max(frac, 0.0), 1.0) * (self.right - self.left), 2)

    def ticks(self, n: int = 4) -> list[tuple[datetime, float]]:
        """n + 1 evenly spaced instants with their x, both ends included."""
        step = (self.end - self.start) / n
        return [(self.start + step * i, self.x(self.start + step * i)) for i in range(n + 1)]


def padded_axis(times: Sequence[datetime], left: float, right: float) -> Axis:
    """An axis covering `times` with a little room at both ends (an hour for a single instant)."""
    start, end = min(times), max(times)
    pad = (end - start) * 0.04 if end > start else timedelta(hours=1)
    return Axis(start - pad, end + pad, left, right)


# --------------------------------------------------------------------------- access timeline


@dataclass(frozen=True)
class Mark:
    """One access on the timeline: its lane is its channel."""

    index: int
    x: float
    y: float
    channel: str


def timeline_marks(
    accesses: Sequence[tuple[datetime, str]],
    axis: Axis,
    lanes: Sequence[str],
    top: float,
    lane_height: float,
) -> list[Mark]:
    """A dot per access at (time, lane of its channel); `index` points back into `accesses`."""
    lane_of = {name: i for i, name in enumerate(lanes)}
    return [
        Mark(i, axis.x(ts), round(top + (lane_of[channel] + 0.5) * lane_height, 2), channel)
        for i, (ts, channel) in enumerate(accesses)
    ]


# --------------------------------------------------------------------------- retention curve


@dataclass(frozen=True)
class Curve:
    """R(t) = exp(−Δt/S) from the last access, with today and the prune date marked."""

    path: str
    axis: Axis
    today_x: float
    today_r: float
    eta_x: float | None
    threshold_y: float
    y_of: tuple[float, float]  # (top, bottom): R = 1 at top, R = 0 at bottom


def retention_at(last: datetime, stability_hours: float, when: datetime) -> float:
    hours = max((when - last).total_seconds(), 0.0) / 3600.0
    return math.exp(-hours / stability_hours) if stability_hours > 0 else 0.0


def retention_curve(
    last: datetime,
    stability_hours: float,
    now: datetime,
    prune_eta: datetime | None,
    threshold: float,
    box: tuple[float, float, float, float],
    samples: int = 60,
) -> Curve:
    """The forgetting curve from the last access to a little past the later of now and the ETA.

    `box` is (left, top, right, bottom) in pixels.
    """
    left, top, right, bottom = box
    horizon = max(now, prune_eta or now, last + timedelta(hours=1))
    axis = Axis(last, horizon + (horizon - last) * 0.08, left, right)

    def y(r: float) -> float:
        return round(bottom - r * (bottom - top), 2)

    step = (axis.end - axis.start) / samples
    points = []
    for i in range(samples + 1):
        when = axis.start + step * i
        points.append(f"{axis.x(when)},{y(retention_at(last, stability_hours, when))}")
    today_r = retention_at(last, stability_hours, now)
    return Curve(
        path="M" + " L".join(points),
        axis=axis,
        today_x=axis.x(now),
        today_r=today_r,
        eta_x=None if prune_eta is None else axis.x(prune_eta),
        threshold_y=y(threshold),
        y_of=(top, bottom),
    )


# --------------------------------------------------------------------------- maintenance chart


@dataclass(frozen=True)
class Block:
    part: str
    value: int
    y: float
    height: float


@dataclass(frozen=True)
class Column:
    """One reflection pass: its changes per step, stacked bottom-up."""

    x: float
    width: float
    when: datetime
    blocks: list[Block]
    total: int


def stacked_columns(
    passes: Sequence[tuple[datetime, Mapping[str, int]]],
    parts: Sequence[str],
    box: tuple[float, float, float, float],
) -> list[Column]:
    """Columns for passes in time order, heights on one scale (the busiest pass fills the box)."""
    left, top, right, bottom = box
    if not passes:
        return []
    slot = (right - left) / len(passes)
    tallest = max(sum(counts.get(p, 0) for p in parts) for _, counts in passes)
    unit = (bottom - top) / tallest if tallest else 0.0
    columns = []
    for i, (when, counts) in enumerate(passes):
        y, blocks = bottom, []
        for part in parts:
            value = int(counts.get(part, 0))
            height = value * unit
            y -= height
            blocks.append(Block(part, value, round(y, 2), round(height, 2)))
        total = sum(b.value for b in blocks)
        columns.append(
            Column(
                round(left + i * slot + slot * 0.15, 2), round(slot * 0.7, 2), when, blocks, total
            )
        )
    return columns


# --------------------------------------------------------------------------- KPI lines


@dataclass(frozen=True)
class Point:
    """One logged value of a share: 0 on the box's bottom edge, 1 on its top edge."""

    x: float
    y: float
    when: datetime
    value: float


@dataclass(frozen=True)
class Line:
    """One KPI over the passes that logged it, oldest first."""

    key: str
    points: list[Point]

    @property
    def polyline(self) -> str:
        """The `points` attribute of an SVG polyline through every point."""
        return " ".join(f"{p.x},{p.y}" for p in self.points)


@dataclass(frozen=True)
class ShareChart:
    """Shares over time in one box: a time axis, a line per KPI, gridlines at even shares."""

    axis: Axis
    lines: list[Line]
    #: (share, y) for 0, 1/n, …, 1, bottom to top.
    grid: list[tuple[float, float]]


def share_lines(
    snapshots: Sequence[tuple[datetime, Mapping[str, float]]],
    keys: Sequence[str],
    box: tuple[float, float, float, float],
    grid: int = 4,
) -> ShareChart | None:
    """Lines for shares in [0, 1] logged at instants, all on one 0–100 % scale.

    Shares compare only on a fixed scale, so the box is never fitted to the data: 0 is the
    bottom, 1 the top, and a value outside [0, 1] is drawn at the edge but keeps its value.
    A snapshot without a key leaves that line without a point there. None when nothing was
    logged. `box` is (left, top, right, bottom) in pixels.
    """
    if not snapshots:
        return None
    left, top, right, bottom = box
    axis = padded_axis([when for when, _ in snapshots], left, right)

    def y(share: float) -> float:
        return round(bottom - min(max(share, 0.0), 1.0) * (bottom - top), 2)

    lines = [
        Line(
            key,
            [
                Point(axis.x(when), y(float(values[key])), when, float(values[key]))
                for when, values in snapshots
                if key in values
            ],
        )
        for key in keys
    ]
    return ShareChart(axis, lines, [(i / grid, y(i / grid)) for i in range(grid + 1)])


# --------------------------------------------------------------------------- link graph


def radial_layout(
    center: str, rings: Sequence[Sequence[tuple[str, str | None]]], size: float
) -> dict[str, tuple[float, float]]:
    """Positions for a neighbourhood: the centre in the middle, hop h on ring h.

    `rings[h]` lists (node, parent) pairs; a node of the outer ring sits in its parent's
    sector so that edges do not cross the picture.
    """
    mid = size / 2
    pos = {center: (round(mid, 2), round(mid, 2))}
    angle = {center: 0.0}
    depth = sum(1 for ring in rings if ring)
    radius_step = (size / 2 - 40) / max(depth, 1)
    for h, ring in enumerate(rings, 1):
        if not ring:
            continue
        if h == 1:
            angles = [2 * math.pi * i / len(ring) - math.pi / 2 for i in range(len(ring))]
        else:
            angles = _sector_angles(ring, angle, 2 * math.pi / max(len(rings[0]), 1))
        for (node, _), a in zip(ring, angles, strict=True):
            angle[node] = a
            r = radius_step * h
            pos[node] = (round(mid + r * math.cos(a), 2), round(mid + r * math.sin(a), 2))
    return pos


def _sector_angles(
    ring: Sequence[tuple[str, str | None]], parent_angle: Mapping[str, float], sector: float
) -> list[float]:
    children: dict[str | None, list[int]] = {}
    for i, (_, parent) in enumerate(ring):
        children.setdefault(parent, []).append(i)
    out = [0.0] * len(ring)
    for parent, items in children.items():
        base = parent_angle.get(parent or "", 0.0)
        for j, i in enumerate(items):
            out[i] = base + sector * ((j + 1) / (len(items) + 1) - 0.5)
    return out
