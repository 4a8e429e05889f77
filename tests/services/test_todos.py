"""Todos (DESIGN.md §9.1): add, list, done, drop and reopen through the facade; open ones are
protected."""

from __future__ import annotations

from datetime import timedelta

import pytest

from nooa_mcp import Memory
from nooa_mcp.domain.replies import UpdateResult
from nooa_mcp.domain.schema import now
from nooa_mcp.errors import InvalidInput

pytestmark = pytest.mark.anyio


async def test_add_then_list_orders_open_first_then_importance_then_age(mem):
    low = await mem.todo("add", content="tidy the README", importance="LOW")
    high_old = await mem.todo("add", content="rotate the leaked token", importance="HIGH")
    high_new = await mem.todo("add", content="patch the login bug", importance="HIGH")
    await mem.todo("done", memory_id=low.id)
    listed = await mem.todo("list", status="all")
    assert [t.id for t in listed.todos] == [high_old.id, high_new.id, low.id]
    assert [t.status for t in listed.todos] == ["open", "open", "done"]
    assert listed.open_count == 2


async def test_done_drop_and_reopen_move_the_status(mem):
    added = await mem.todo("add", content="renew the TLS certificate")
    assert added.status == "open" and added.open_count == 1
    done = await mem.todo("done", memory_id=added.id[:8])
    assert (done.status, done.outcome, done.open_count) == ("done", "done", 0)
    again = await mem.todo("done", memory_id=added.id)
    assert again.outcome == "already done"
    reopened = await mem.todo("reopen", memory_id=added.id)
    assert reopened.status == "open" and reopened.open_count == 1
    dropped = await mem.todo("drop", memory_id=added.id)
    assert dropped.status == "dropped"
    assert [t.id for t in (await mem.todo("list", status="dropped")).todos] == [added.id]


async def test_list_defaults_to_open_todos(mem):
    a = await mem.todo("add", content="answer the auditor")
    b = await mem.todo("add", content="book the venue")
    await mem.todo("drop", memory_id=b.id)
    assert [t.id for t in (await mem.todo("list")).todos] == [a.id]


async def test_bad_actions_and_ids_name_the_field(mem):
    with pytest.raises(InvalidInput) as exc:
        await mem.todo("finish")
    assert exc.value.field == "action"
    with pytest.raises(InvalidInput) as exc:
        await mem.todo("add", content="  ")
    assert exc.value.field == "content"
    with pytest.raises(InvalidInput) as exc:
        await mem.todo("done")
    assert exc.value.field == "memory_id"
    fact = await mem.author("the build runs on Jenkins")
    with pytest.raises(InvalidInput) as exc:
        await mem.todo("done", memory_id=fact.id)
    assert exc.value.field == "memory_id"
    with pytest.raises(InvalidInput) as exc:
        await mem.todo("list", status="later")
    assert exc.value.field == "status"


async def test_open_todos_survive_a_prune_and_closed_ones_do_not(mem):
    """DESIGN.md §7.2, §9.1: an open todo is protected; once done it ages out like anything else."""
    keep = await mem.todo("add", content="migrate the billing cron")
    close = await mem.todo("add", content="order new laptops", importance="LOW")
    await mem.todo("done", memory_id=close.id)
    report = await mem.reflect(["prune"], now=now() + timedelta(days=400))
    assert report.steps[0].applied == 1
    assert not (await mem.get(keep.id)).archived
    assert (await mem.get(close.id)).archived


async def test_open_todos_lead_the_session_context(mem):
    await mem.author("an important fact", importance="CRITICAL")
    todo = await mem.todo("add", content="call the bank back", importance="LOW")
    block = await mem.context()
    lines = block.splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("Open todos"))
    assert lines[at + 1].startswith(f"- [{todo.id[:8]} ")
    assert [line for line in lines if "an important fact" in line] and block.index(
        "call the bank back"
    ) < block.index("an important fact")


async def test_update_refuses_a_status_that_is_not_a_todo_status(mem: Memory) -> None:
    """Catches: todo status not validated in `Memory.update` (`status="finished"` was stored)."""
    added = await mem.todo("add", content="Rotate the API keys.")
    assert added.id is not None
    with pytest.raises(InvalidInput) as refused:
        await mem.update(added.id, status="finished")
    assert refused.value.field == "status"
    assert "open" in str(refused.value) and "done" in str(refused.value)
    assert (await mem.get(added.id)).status == "open"
    closed: UpdateResult = await mem.update(added.id, status="done")
    assert closed.changed == ["status"] and (await mem.get(added.id)).status == "done"
