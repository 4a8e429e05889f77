"""The collector paused for a server's start-up (`nooa_mcp.startup_gc`) comes back frozen, and
only if nooa-mcp paused it: a program that turned it off itself keeps it off."""

from __future__ import annotations

import gc

import pytest

from nooa_mcp import startup_gc

pytestmark = pytest.mark.usefixtures("collector_restored")


def test_pause_stops_collection_and_resume_restarts_it_with_the_survivors_frozen() -> None:
    gc.enable()
    gc.unfreeze()
    startup_gc.pause()
    assert not gc.isenabled()
    assert startup_gc.paused()
    startup_gc.resume()
    assert gc.isenabled()
    assert not startup_gc.paused()
    assert gc.get_freeze_count() > 0


def test_a_collector_turned_off_elsewhere_is_left_off() -> None:
    gc.disable()
    startup_gc.pause()
    assert not startup_gc.paused()
    startup_gc.resume()
    assert not gc.isenabled()
