"""Session and span references that front ends hand to access records (SPEC §2 AccessRecord)."""

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from nooa_mcp import tracing


def test_trace_ref_is_none_without_an_active_span() -> None:
    assert tracing.current_trace_ref() is None


def test_trace_ref_is_the_current_span_id_in_hex() -> None:
    span = NonRecordingSpan(SpanContext(trace_id=0xABC, span_id=0x1F2E, is_remote=False))
    with trace.use_span(span):
        assert tracing.current_trace_ref() == "0000000000001f2e"


def test_session_ref_holds_inside_the_session_block_only() -> None:
    with tracing.session("sess-1"):
        inside = tracing.access_refs()
    assert (inside, tracing.access_refs()) == (("sess-1", None), (None, None))
