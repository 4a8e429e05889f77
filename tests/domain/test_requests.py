"""Typed requests: a verb's arguments travel from the front end to the service as one object."""

import inspect

import pytest

from nooa_mcp import InvalidInput
from nooa_mcp.domain.requests import (
    AuthorRequest,
    IntentRequest,
    RecallRequest,
    TodoRequest,
    UpdateRequest,
    request_of,
)
from nooa_mcp.mcp.tools import MemoryTools

pytestmark = pytest.mark.anyio


def test_a_request_from_a_mapping_refuses_a_field_it_does_not_have() -> None:
    with pytest.raises(InvalidInput) as refused:
        request_of(AuthorRequest, {"content": "x", "importanse": "HIGH"})
    assert str(refused.value).startswith("importanse: is not a field of author.")
    assert "importance" in str(refused.value)
    with pytest.raises(InvalidInput, match=r"^request: 'x' is not an object"):
        request_of(AuthorRequest, "x")


def test_fields_are_laid_over_a_request() -> None:
    base = RecallRequest(query="deploy", k=3)
    assert request_of(RecallRequest, base, hops=0) == RecallRequest(query="deploy", k=3, hops=0)
    assert request_of(RecallRequest, base) == base


async def test_the_facade_takes_a_request_or_its_fields_alike(mem) -> None:
    made = await mem.author(AuthorRequest(content="The build runs on Tuesdays", tags=["ci"]))
    again = await mem.author("The build runs on Tuesdays", tags=["ci"])
    assert (made.status, again.status, again.id) == ("created", "exists", made.id)
    with pytest.raises(InvalidInput, match=r"^tittle: is not a field of author"):
        await mem.author("A typo in a field name is refused", tittle="x")
    updated = await mem.update(UpdateRequest(memory_id=made.id, title="builds"))
    assert updated.changed == ["title"]
    assert (await mem.recall(RecallRequest(query="build day", k=1))).hits[0].id == made.id
    todo = await mem.todo(TodoRequest(action="add", content="Fix the flaky build"))
    assert todo.outcome == "created"
    listed = await mem.intent(IntentRequest())
    assert listed.action == "list"


def test_each_tool_hands_its_arguments_to_a_request_of_the_same_names() -> None:
    """A tool argument the request lacks would be dropped on the way to the service."""
    pairs = {
        "memory_author": AuthorRequest,
        "memory_recall": RecallRequest,
        "memory_update": UpdateRequest,
        "todo": TodoRequest,
        "intent": IntentRequest,
    }
    for tool, request in pairs.items():
        arguments = set(inspect.signature(getattr(MemoryTools, tool)).parameters) - {"self", "ctx"}
        fields = set(inspect.signature(request).parameters)
        assert arguments <= fields, f"{tool}: {arguments - fields} has no request field"
