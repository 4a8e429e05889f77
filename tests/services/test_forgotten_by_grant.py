"""A read grant reaches a role's live and faded memories, never the ones it forgot (DESIGN.md
§10). `memory://memories/{id}` (`Memory.get` with scope "*"), a memory's access log and
explain by id showed a granted role's forgotten memory whole, its words and its role's
queries, where `memory://archived/{id}` said not found; `list --scope ROLE --state all`
listed it. Now each answers as for an id that never was, and the role itself still reads it.
"""

from __future__ import annotations

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import NotFound

pytestmark = pytest.mark.anyio

KEPT = "Bob's desk is by the north window"
FORGOTTEN = "Bob's therapist appointment is on Thursdays at four"
PREFIX = "deadbeef"


def _open(target, owner: str, **grants) -> Memory:
    return Memory.open(
        settings=Settings(store=target, owner=owner, **grants), embedder=HashEmbedder()
    )


def _said(exc: pytest.ExceptionInfo, ident: str) -> str:
    return str(exc.value).replace(ident, "<id>")


async def test_a_granted_reader_never_reaches_what_the_role_forgot(store_target):
    async with _open(store_target, "bob") as bob:
        kept_id, gone_id = PREFIX + "0" * 24, PREFIX + "f" * 24
        await bob.import_records(
            [(1, {"id": kept_id, "content": KEPT}), (2, {"id": gone_id, "content": FORGOTTEN})]
        )
        await bob.recall("therapist appointment")
        await bob.forget(gone_id, reason="private, never meant to be stored")
        # The role itself still reads it by id (it may revive it), and lists it.
        assert (await bob.get(gone_id)).content == FORGOTTEN
        assert gone_id in [v.id for _, v in await bob.list_memories(archived=True)]
    never = "ab" * 16
    async with _open(store_target, "carol", read=["bob"]) as carol:
        assert (await carol.get(kept_id, scope="*")).content == KEPT
        reads = (
            lambda i: carol.get(i, scope="*"),
            lambda i: carol.access_log(i, scope="*"),
            lambda i: carol.explain(memory_id=i, scope="bob"),
            lambda i: carol.explain("therapist", memory_id=i, scope="bob"),
            lambda i: carol.explain(memory_id=i),  # no "pass the scope 'bob'" either
        )
        for read in reads:
            with pytest.raises(NotFound) as gone:
                await read(gone_id)
            with pytest.raises(NotFound) as unknown:
                await read(never)
            assert _said(gone, gone_id) == _said(unknown, never)
        # A prefix both share names the one the grant reaches, not an ambiguity.
        assert (await carol.get(PREFIX, scope="*")).id == kept_id
        listed = [v.id for _, v in await carol.list_memories(archived=None, scope="bob")]
        assert kept_id in listed and gone_id not in listed
        assert await carol.list_memories(archived=True, scope="bob") == []


async def test_a_role_never_reaches_a_shared_memory_the_user_forgot(store_target):
    """Shared memories are every role's to read, but one the user forgot is the user's: a
    role read it whole by id, listed it in its archive (`memory://archived`) and exported it
    with `--include-archived` into another store. Now none of these shows it to a role;
    the user (the shared owner) still reads and lists it, and may revive it."""
    async with _open(store_target, "") as user:
        kept = (await user.author(KEPT)).id
        gone = (await user.author("The user's divorce lawyer is Ms Hale")).id
        await user.forget(gone, reason="should never have been shared")
        assert (await user.get(gone)).archived
        assert gone in [v.id for _, v in await user.list_memories(archived=True)]
        assert gone in [r["id"] async for r in user.export_records(include_archived=True)]
    async with _open(store_target, "bob") as bob:
        assert (await bob.get(kept)).content == KEPT
        for read in (lambda: bob.get(gone), lambda: bob.explain(memory_id=gone)):
            with pytest.raises(NotFound):
                await read()
        assert gone not in [v.id for _, v in await bob.list_memories(archived=None)]
        exported = [r["id"] async for r in bob.export_records(include_archived=True)]
        assert kept in exported and gone not in exported
