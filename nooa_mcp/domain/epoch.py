"""Stored times (epoch seconds) read back as datetimes.

Standard library only: the hook's fast path (`storage.quick`, `domain.injection`) reads stored
times too, and imports no pydantic.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["from_epoch"]


def from_epoch(value: float) -> datetime:
    """A stored time (epoch seconds) as an aware UTC datetime. One past what a datetime holds
    (9999-12-31T23:59:59.999999Z rounds to year 10000 as a float; releases before
    `domain.schema.LATEST` took it) reads as the nearest it holds: one such row made every
    read of its store fail."""
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, ValueError, OSError):
        return datetime.max.replace(tzinfo=UTC) if value > 0 else datetime.min.replace(tzinfo=UTC)
