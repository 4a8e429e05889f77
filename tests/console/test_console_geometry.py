"""Chart geometry without a browser: bars, time axes, the retention curve, columns, layout."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from nooa_mcp.console import pages, svg
from nooa_mcp.services import views

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WEIGHTS = {"rel": 1.0, "rec": 0.5, "imp": 0.5, "spread": 1.0}


def test_segments_stack_left_to_right_each_weight_times_value_long():
    segs = svg.score_segments({"rel": 0.8, "rec": 0.4, "imp": 0.6, "spread": 0.1}, WEIGHTS, 100)
    assert [s.part for s in segs] == ["rel", "rec", "imp", "spread"]
    assert [s.width for s in segs] == [80.0, 20.0, 30.0, 10.0]
    assert [s.x for s in segs] == [0.0, 80.0, 100.0, 130.0]
    assert [s.value for s in segs] == [0.8, 0.4, 0.6, 0.1]


def test_the_longest_row_fills_the_width_and_the_others_share_its_scale():
    rows = [{"rel": 1.0, "rec": 0.2, "imp": 0.2, "spread": 0.0}, {"rel": 0.3, "rec": 0.2}]
    scale = svg.bar_scale(rows, WEIGHTS, 240)
    assert scale == pytest.approx(200)  # 1.0 + 0.1 + 0.1 = 1.2 units across 240 px
    first = svg.score_segments(rows[0], WEIGHTS, scale)
    assert first[-1].x + first[-1].width == pytest.approx(240)


def test_a_part_never_computed_or_negative_draws_nothing_but_keeps_its_value():
    segs = svg.score_segments({"rel": None, "rec": -0.2, "imp": 0.5, "spread": 0.0}, WEIGHTS, 10)
    assert [(s.value, s.width) for s in segs] == [(0.0, 0.0), (-0.2, 0.0), (0.5, 2.5), (0.0, 0.0)]
    assert svg.bar_scale([{"rel": 0.0}], WEIGHTS, 100) == 0.0


def test_an_axis_maps_its_ends_to_its_pixels_and_clamps_outside_times():
    axis = svg.Axis(T0, T0 + timedelta(hours=10), 100, 600)
    assert axis.x(T0) == 100 and axis.x(T0 + timedelta(hours=10)) == 600
    assert axis.x(T0 + timedelta(hours=4)) == 300
    assert axis.x(T0 - timedelta(days=1)) == 100 and axis.x(T0 + timedelta(days=9)) == 600
    assert [x for _, x in axis.ticks(4)] == [100, 225, 350, 475, 600]


def test_a_single_instant_gets_an_hour_either_side():
    axis = svg.padded_axis([T0], 0, 100)
    assert (axis.start, axis.end) == (T0 - timedelta(hours=1), T0 + timedelta(hours=1))
    assert axis.x(T0) == 50


def test_timeline_marks_sit_in_their_channels_lane_at_their_time():
    axis = svg.Axis(T0, T0 + timedelta(hours=2), 0, 200)
    marks = svg.timeline_marks(
        [(T0, "created"), (T0 + timedelta(hours=1), "recalled")],
        axis,
        ["created", "recalled"],
        top=10,
        lane_height=20,
    )
    assert [(m.index, m.x, m.y, m.channel) for m in marks] == [
        (0, 0.0, 20.0, "created"),
        (1, 100.0, 40.0, "recalled"),
    ]


def test_the_retention_curve_starts_at_one_and_crosses_the_threshold_at_the_eta():
    stability = 336.0
    eta = T0 + timedelta(hours=stability * math.log(1 / 0.02))
    now = T0 + timedelta(days=10)
    curve = svg.retention_curve(T0, stability, now, eta, 0.02, (0, 0, 500, 100), samples=500)
    first = curve.path[1:].split(" L")[0].split(",")
    assert (float(first[0]), float(first[1])) == (0.0, 0.0)  # R = 1 at the top
    assert curve.today_r == pytest.approx(math.exp(-240 / stability))
    assert curve.eta_x == curve.axis.x(eta) and curve.today_x == curve.axis.x(now)
    assert curve.threshold_y == pytest.approx(98.0)
    # The sampled point nearest the ETA lies on the threshold line.
    points = [tuple(map(float, p.split(","))) for p in curve.path[1:].split(" L")]
    nearest = min(points, key=lambda p: abs(p[0] - curve.eta_x))
    assert nearest[1] == pytest.approx(curve.threshold_y, abs=0.3)
    assert curve.axis.end > eta  # the ETA is inside the picture


def test_without_a_prune_eta_the_curve_still_runs_past_today():
    now = T0 + timedelta(days=3)
    curve = svg.retention_curve(T0, 100.0, now, None, 0.02, (0, 0, 100, 100))
    assert curve.eta_x is None and curve.axis.end > now


def test_columns_stack_steps_bottom_up_on_one_scale():
    passes = [(T0, {"merge": 2, "link": 2}), (T0 + timedelta(days=1), {"prune": 1})]
    cols = svg.stacked_columns(passes, ["merge", "link", "prune"], (0, 0, 200, 100))
    assert [c.total for c in cols] == [4, 1]
    merge, link, prune = cols[0].blocks
    assert (merge.y, merge.height, link.y, link.height) == (50.0, 50.0, 0.0, 50.0)
    assert prune.height == 0.0
    assert cols[1].blocks[2].height == 25.0
    assert cols[0].x < cols[1].x
    assert svg.stacked_columns([], ["merge"], (0, 0, 1, 1)) == []


def test_radial_layout_puts_hop_one_on_the_inner_ring_and_hop_two_beside_its_parent():
    pos = svg.radial_layout("c", [[("a", "c"), ("b", "c")], [("a1", "a")]], 400)
    assert pos["c"] == (200.0, 200.0)
    r1 = math.dist(pos["a"], pos["c"])
    r2 = math.dist(pos["a1"], pos["c"])
    assert r1 == pytest.approx(80.0, abs=0.1) and r2 == pytest.approx(160.0, abs=0.1)
    assert math.dist(pos["a1"], pos["a"]) < math.dist(pos["a1"], pos["b"])


def test_share_lines_put_zero_on_the_bottom_edge_and_one_on_the_top_edge():
    snapshots = [
        (T0, {"never": 1.0, "reflective": 0.0}),
        (T0 + timedelta(hours=1), {"never": 0.5}),  # logged before "reflective" existed
        (T0 + timedelta(hours=2), {"never": 0.25, "reflective": 1.5}),
    ]
    chart = svg.share_lines(snapshots, ["never", "reflective"], (40, 10, 240, 110))
    never, reflective = chart.lines
    assert [(p.y, p.value) for p in never.points] == [(10.0, 1.0), (60.0, 0.5), (85.0, 0.25)]
    # A value outside [0, 1] stays on the chart's edge but keeps its value.
    assert [(p.y, p.value) for p in reflective.points] == [(110.0, 0.0), (10.0, 1.5)]
    xs = [p.x for p in never.points]
    assert 40 < xs[0] < xs[1] < xs[2] < 240 and xs[1] == pytest.approx((xs[0] + xs[2]) / 2)
    assert xs[1] == chart.axis.x(T0 + timedelta(hours=1))
    assert never.polyline == " ".join(f"{p.x},{p.y}" for p in never.points)
    assert chart.grid == [(0.0, 110.0), (0.25, 85.0), (0.5, 60.0), (0.75, 35.0), (1.0, 10.0)]
    assert svg.share_lines([], ["never"], (0, 0, 1, 1)) is None


def test_the_stats_page_reads_only_the_kpis_a_pass_logged():
    assert set(pages.KPI_LINES) == set(views.KPI_SHARES)  # a line for every logged share
    assert pages.logged_kpis({"status": "completed", "steps": []}) is None
    assert pages.logged_kpis({"kpis": {"never_fetched_share": 0.5, "active": 4, "x": "y"}}) == {
        "never_fetched_share": 0.5,
        "active": 4.0,
    }


def test_every_access_channel_has_a_row_on_the_timeline():
    from nooa_mcp.domain.kinds import Channel

    # A weak hit is logged `shown`; a memory with one answered 500 before it had a row.
    assert set(pages.LANES) == {c.value for c in Channel}


def test_count_ticks_are_round_and_reach_the_busiest_pass():
    assert svg.count_ticks(0) == [0, 1]
    assert svg.count_ticks(3) == [0, 1, 2, 3]
    assert svg.count_ticks(7) == [0, 2, 4, 6, 8]
    assert svg.count_ticks(23) == [0, 5, 10, 15, 20, 25]
    assert svg.count_ticks(300) == [0, 100, 200, 300]
    cols = svg.stacked_columns([(T0, {"link": 2})], ["link"], (0, 0, 10, 100), scale_max=8)
    assert cols[0].blocks[0].height == 25.0  # 2 of the axis's 8 on a 100 px box


def test_labels_wrap_between_words_into_two_lines_and_say_when_text_was_left_out():
    assert svg.wrap_label("The production cluster runs on twelve nodes in two zones") == (
        "The production cluster runs",
        "on twelve nodes in two zones",
    )
    assert svg.wrap_label("The production cluster's autoscaler caps at twenty nodes") == (
        "The production cluster's",
        "autoscaler caps at twenty…",
    )
    assert svg.wrap_label("short") == ("short",)


def test_the_force_layout_spreads_a_neighbourhood_over_the_box_the_same_way_each_time():
    rings = [[("a", "c"), ("b", "c"), ("d", "c"), ("e", "c")], [("a1", "a"), ("b1", "b")]]
    edges = [("c", "a"), ("c", "b"), ("d", "c"), ("e", "c"), ("a", "a1"), ("b1", "b")]
    labels = {n: f"memory {n} " * 4 for n in ["c", "a", "b", "d", "e", "a1", "b1"]}
    first = svg.force_layout("c", rings, edges, labels, 1100, 420)
    assert first == svg.force_layout("c", rings, edges, labels, 1100, 420)
    assert set(first) == set(labels)
    xs = [n.x for n in first.values()]
    ys = [n.y for n in first.values()]
    assert min(xs) > 0 and max(xs) < 1100 and min(ys) > 0 and max(ys) < 420
    assert max(xs) - min(xs) > 500 and max(ys) - min(ys) > 150  # two dimensions, not a column
    assert all(len(n.lines) <= 2 for n in first.values())
    # Linked memories sit closer than unlinked ones, on average.
    dist = {(a, b): math.dist((first[a].x, first[a].y), (first[b].x, first[b].y)) for a, b in edges}
    far = math.dist((first["a1"].x, first["a1"].y), (first["b1"].x, first["b1"].y))
    assert sum(dist.values()) / len(dist) < far


def test_marker_labels_run_away_from_the_edges():
    assert svg.marker_label(64, 64, 700, 20, 150) == svg.Label(68, 20, "start")
    assert svg.marker_label(650, 64, 700, 20, 150) == svg.Label(646, 20, "end")
    assert [svg.tick_anchor(i, 4) for i in range(4)] == ["start", "middle", "middle", "end"]
    assert svg.tick_anchor(0, 1) == "middle"


def test_graph_labels_take_three_lines_and_alike_ones_get_their_ids():
    long = "Deploys to production need two approvals in the release channel before the code freeze"
    other = "Deploys to production need two approvals in the release channel before the code review"
    labels = {"c" * 32: long, "a" * 32: other, "b" * 32: "The staging cluster"}
    rings = [[("a" * 32, "c" * 32), ("b" * 32, "c" * 32)]]
    edges = [("a" * 32, "c" * 32), ("b" * 32, "c" * 32)]
    placed = svg.force_layout("c" * 32, rings, edges, labels, 1100, 300)
    assert placed["b" * 32].lines == ("The staging cluster",)
    assert placed["c" * 32].lines == (
        "Deploys to production need",
        "two approvals in the release",
        "(cccccccc)",
    )
    assert placed["a" * 32].lines[-1] == "(aaaaaaaa)"
    # Different within three lines: no ids.
    labels["a" * 32] = "Deploys to production need two approvals in the release chat"
    placed = svg.force_layout("c" * 32, rings, edges, labels, 1100, 300)
    assert placed["a" * 32].lines[-1] == "chat"
