"""Where an access came from: the MCP session and the OpenTelemetry span (DESIGN.md §3.3).

Front ends set the session reference for the request they handle; `access_refs()` gives the
pair an AccessRecord carries. The span id comes from OpenTelemetry when a tracer records
(the MCP SDK opens a span per message); without an OTel SDK installed it is None and free.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

try:
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - opentelemetry-api comes with mcp
    _trace = None  # type: ignore[assignment]

_session_ref: ContextVar[str | None] = ContextVar("nooa_session_ref", default=None)


def current_trace_ref() -> str | None:
    """The active span id as 16 hex digits, or None when no valid span is current."""
    if _trace is None:
        return None
    context = _trace.get_current_span().get_span_context()
    return format(context.span_id, "016x") if context.is_valid else None


def current_session_ref() -> str | None:
    return _session_ref.get()


@contextmanager
def session(ref: str | None) -> Iterator[None]:
    """Mark everything inside as belonging to the client session `ref` (a hook's session id
    comes from its input: a NUL, which no PostgreSQL text column holds, is dropped)."""
    if ref is not None:
        ref = ref.replace("\x00", "") or None
    token = _session_ref.set(ref)
    try:
        yield
    finally:
        _session_ref.reset(token)


def access_refs() -> tuple[str | None, str | None]:
    """(session_ref, trace_ref) for an AccessRecord made now."""
    return current_session_ref(), current_trace_ref()
