"""Chart geometry for the console: pure functions from numbers to SVG coordinates.

The templates only draw what these return, so every bar width, dot position and curve point
can be checked without a browser. Each shape carries the number it stands for, and the
templates write it into a `data-*` attribute beside the geometry.
"""

from __future__ import annotations

import hashlib
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
class Label:
    """A text placed beside a marker line: where it starts and which way it runs."""

    x: float
    y: float
    anchor: str  # SVG text-anchor: start, middle or end


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
    #: "today" and "prune ETA …" sit in the band above the plot, each on the side of its line
    #: away from the box's edge, so neither runs over the y-axis, the ticks or the other.
    today_label: Label | None = None
    eta_label: Label | None = None
    #: (R, y) of the y-axis ticks, bottom to top.
    y_ticks: tuple[tuple[float, float], ...] = ()


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
    fades_at: datetime | None = None,
) -> Curve:
    """The forgetting curve from the last access to a little past the later of now and the ETA
    (or `fades_at`, when the curve reaches the threshold but no prune date is marked: a
    memory pruning never takes still shows how it fades).

    `box` is (left, top, right, bottom) in pixels.
    """
    left, top, right, bottom = box
    horizon = max(now, prune_eta or fades_at or now, last + timedelta(hours=1))
    axis = Axis(last, horizon + (horizon - last) * 0.08, left, right)

    def y(r: float) -> float:
        return round(bottom - r * (bottom - top), 2)

    step = (axis.end - axis.start) / samples
    points = []
    for i in range(samples + 1):
        when = axis.start + step * i
        points.append(f"{axis.x(when)},{y(retention_at(last, stability_hours, when))}")
    today_r = retention_at(last, stability_hours, now)
    today_x = axis.x(now)
    eta_x = None if prune_eta is None else axis.x(prune_eta)
    today_label = marker_label(today_x, left, right, top - 6, ETA_LABEL_WIDTH / 3)
    eta_label = None
    if eta_x is not None:
        # On a second row when the two lines are too close for both labels on one.
        crowded = abs(eta_x - today_x) < ETA_LABEL_WIDTH + 40
        eta_label = marker_label(eta_x, left, right, top - (20 if crowded else 6), ETA_LABEL_WIDTH)
    return Curve(
        path="M" + " L".join(points),
        axis=axis,
        today_x=today_x,
        today_r=today_r,
        eta_x=eta_x,
        threshold_y=y(threshold),
        y_of=(top, bottom),
        today_label=today_label,
        eta_label=eta_label,
        y_ticks=tuple((r, y(r)) for r in (0.0, 0.25, 0.5, 0.75, 1.0)),
    )


#: Pixels "prune ETA 2027-04-10 06:00" takes at the charts' 11 px font.
ETA_LABEL_WIDTH = 150.0


def marker_label(x: float, left: float, right: float, y: float, width: float) -> Label:
    """A label for a vertical line at `x`: to its right, or to its left when it would run
    past `right`; never starting left of `left` (the y-axis and its ticks are there)."""
    if x + 4 + width <= right:
        return Label(round(max(x + 4, left + 4), 2), y, "start")
    return Label(round(x - 4, 2), y, "end")


def tick_anchor(i: int, n: int) -> str:
    """text-anchor for the i-th of n time ticks: the first starts at its x and the last ends
    there, so neither spills past the axis ends (over the y-axis labels, out of the box)."""
    if n == 1:
        return "middle"
    return "start" if i == 0 else ("end" if i == n - 1 else "middle")


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


def count_ticks(most: int) -> list[int]:
    """Round counts from 0 to at least `most` for a y-axis, 2 to 6 of them (1-2-5 steps)."""
    if most <= 0:
        return [0, 1]
    step = 1
    while math.ceil(most / step) > 5:
        for factor in (2, 2.5, 2):
            step = int(step * factor)
            if math.ceil(most / step) <= 5:
                break
    return list(range(0, math.ceil(most / step) * step + 1, step))


def stacked_columns(
    passes: Sequence[tuple[datetime, Mapping[str, int]]],
    parts: Sequence[str],
    box: tuple[float, float, float, float],
    scale_max: int | None = None,
) -> list[Column]:
    """Columns for passes in time order, heights on one scale: the busiest pass fills the box,
    or `scale_max` does (the top of the y-axis, `count_ticks`)."""
    left, top, right, bottom = box
    if not passes:
        return []
    slot = (right - left) / len(passes)
    tallest = scale_max or max(sum(counts.get(p, 0) for p in parts) for _, counts in passes)
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


@dataclass(frozen=True)
class Node:
    """A memory placed on the link graph, with its label broken into lines."""

    x: float
    y: float
    lines: tuple[str, ...]


#: Characters per label line, and lines per label, on the graph (10 px font).
LABEL_CHARS = 28
LABEL_LINES = 3
#: Pixels a label character and a label line take at that font.
CHAR_WIDTH = 5.8
LINE_HEIGHT = 12.0


def wrap_label(text: str, width: int = LABEL_CHARS, lines: int = 2) -> tuple[str, ...]:
    """`text` in at most `lines` lines of at most `width` characters, broken between words;
    the last line ends in "…" when text was left out (the full text is in the node's title)."""
    words = " ".join(text.split()).split(" ")
    out: list[str] = []
    line = ""
    for i, word in enumerate(words):
        if len(word) > width:
            word = word[: width - 1] + "…"
        if not line:
            line = word
        elif len(line) + 1 + len(word) <= width:
            line += " " + word
        else:
            out.append(line)
            line = word
        if len(out) == lines:
            rest = " ".join([line, *words[i + 1 :]]).strip()
            last = out[-1]
            if rest:
                last = (last if len(last) < width else last[: width - 1]) + "…"
            out[-1] = last
            return tuple(out)
    if line:
        out.append(line)
    return tuple(out)


def force_layout(
    center: str,
    rings: Sequence[Sequence[tuple[str, str | None]]],
    edges: Sequence[tuple[str, str]],
    labels: Mapping[str, str],
    width: float,
    height: float,
    iterations: int = 250,
) -> dict[str, Node]:
    """Positions for a neighbourhood in two dimensions, computed here so the page needs no
    script: a Fruchterman–Reingold layout (linked memories pull together, every pair pushes
    apart) started from the rings of `radial_layout`, so the same graph always lands the same
    way, the centre pinned (each node starts a little off its ring, by its id, so the forces
    are not balanced on straight lines). The drawing is then scaled into the box with room
    for the labels, and labels that would overlap are pushed apart vertically.
    """
    seed = radial_layout(center, rings, 1.0)
    names = list(seed)
    n = len(names)
    lines = {name: wrap_label(labels.get(name, ""), lines=LABEL_LINES) for name in names}
    # Two memories whose labels still read alike (long texts that start the same) are told
    # apart by their ids.
    seen: dict[tuple[str, ...], list[str]] = {}
    for name, shown in lines.items():
        seen.setdefault(shown, []).append(name)
    for alike in (group for group in seen.values() if len(group) > 1):
        for name in alike:
            lines[name] = (*lines[name][: LABEL_LINES - 1], f"({name[:8]})")
    label_w = max((len(line) for ls in lines.values() for line in ls), default=0) * CHAR_WIDTH
    margin_x = max(label_w / 2, 20.0) + 8
    top, bottom = 24.0, 16 + LINE_HEIGHT * LABEL_LINES + 8
    room_w, room_h = width - 2 * margin_x, height - top - bottom
    # The forces act in a space of the box's shape, so the result fills a wide box without
    # being stretched. The rings put nodes on exact axes, and symmetric forces keep them there
    # (a cross of straight lines): each starts a little off its ring, by an amount its id sets.
    aspect = max(room_w / max(room_h, 1.0), 1.0)
    pos = {}
    for name in names:
        digest = hashlib.blake2b(name.encode(), digest_size=4).digest()
        jitter = ((digest[0] - 127.5) / 1275, (digest[1] - 127.5) / 1275)
        pos[name] = [(seed[name][0] - 0.5 + jitter[0]) * aspect, seed[name][1] - 0.5 + jitter[1]]
    pos[center] = [0.0, 0.0]
    if n > 1:
        k = 0.8 * math.sqrt(aspect / n)
        heat = aspect / 8
        pairs = [(a, b) for a, b in edges if a in pos and b in pos and a != b]
        for _ in range(iterations):
            move = {name: [0.0, 0.0] for name in names}
            for i, a in enumerate(names):
                for b in names[i + 1 :]:
                    dx, dy = pos[a][0] - pos[b][0], pos[a][1] - pos[b][1]
                    d = max(math.hypot(dx, dy), 1e-4)
                    push = k * k / d
                    move[a][0] += dx / d * push
                    move[a][1] += dy / d * push
                    move[b][0] -= dx / d * push
                    move[b][1] -= dy / d * push
            for a, b in pairs:
                dx, dy = pos[a][0] - pos[b][0], pos[a][1] - pos[b][1]
                d = max(math.hypot(dx, dy), 1e-4)
                pull = d * d / k
                move[a][0] -= dx / d * pull
                move[a][1] -= dy / d * pull
                move[b][0] += dx / d * pull
                move[b][1] += dy / d * pull
            for name in names:
                if name == center:
                    continue
                dx, dy = move[name]
                d = max(math.hypot(dx, dy), 1e-9)
                step = min(d, heat)
                pos[name][0] += dx / d * step
                pos[name][1] += dy / d * step
            heat = max(heat * 0.98, aspect / 500)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    # The drawing's extent fills the box on each axis: labels are wide, so a wide box is
    # used across, though never stretched more than 2.5 times one way than the other.
    span_x = (max(xs) - min(xs)) or 1.0
    span_y = (max(ys) - min(ys)) or 1.0
    scale_x, scale_y = room_w / span_x, room_h / span_y
    scale_x, scale_y = min(scale_x, 2.5 * scale_y), min(scale_y, 2.5 * scale_x)
    mid_x = width / 2 - (max(xs) + min(xs)) / 2 * scale_x
    mid_y = top + room_h / 2 - (max(ys) + min(ys)) / 2 * scale_y
    placed = {
        name: [mid_x + pos[name][0] * scale_x, mid_y + pos[name][1] * scale_y] for name in names
    }
    _separate_labels(placed, lines, top, height - bottom)
    return {
        name: Node(round(placed[name][0], 2), round(placed[name][1], 2), lines[name])
        for name in names
    }


def _separate_labels(
    placed: dict[str, list[float]],
    lines: Mapping[str, tuple[str, ...]],
    top: float,
    bottom: float,
    rounds: int = 60,
) -> None:
    """Push apart nodes whose label boxes (under each node) overlap, vertically, in place."""

    def box(name: str) -> tuple[float, float, float, float]:
        x, y = placed[name]
        w = max((len(line) for line in lines[name]), default=1) * CHAR_WIDTH / 2 + 4
        return x - w, y - 20, x + w, y + 20 + LINE_HEIGHT * len(lines[name])

    names = list(placed)
    for _ in range(rounds):
        moved = False
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                ax0, ay0, ax1, ay1 = box(a)
                bx0, by0, bx1, by1 = box(b)
                if ax0 >= bx1 or bx0 >= ax1 or ay0 >= by1 or by0 >= ay1:
                    continue
                shift = (min(ay1, by1) - max(ay0, by0)) / 2 + 0.5
                upper, lower = (a, b) if placed[a][1] <= placed[b][1] else (b, a)
                placed[upper][1] = max(top, placed[upper][1] - shift)
                placed[lower][1] = min(bottom, placed[lower][1] + shift)
                moved = True
        if not moved:
            return
