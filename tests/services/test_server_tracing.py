"""Session and span references that front ends hand to access records (DESIGN.md §3.3)."""

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from nooa_mcp.services import provenance as tracing

pytestmark = pytest.mark.anyio


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


async def test_accesses_carry_the_span_and_session_they_happened_in(tmp_path) -> None:
    """With a tracer active, each access record's trace_ref is the current span id."""
    from nooa_mcp import Memory
    from nooa_mcp.embeddings import HashEmbedder

    span = NonRecordingSpan(SpanContext(trace_id=0xABC, span_id=0x77, is_remote=False))
    async with Memory.open(tmp_path / "t.sqlite", owner="a", embedder=HashEmbedder()) as mem:
        with trace.use_span(span), tracing.session("sess-9"):
            written = (await mem.author("traced memory")).id
            await mem.recall("traced memory")
        await mem.recall("traced memory")
        log = [record for _, record in await mem.access_log(written)]
    assert [(r.channel.value, r.session_ref, r.trace_ref) for r in log] == [
        ("recalled", None, None),
        ("recalled", "sess-9", "0000000000000077"),
        ("created", "sess-9", "0000000000000077"),
    ]
