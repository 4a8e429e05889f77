"""An exact repeat and a merge keep what folding case and collapsing whitespace hide.

The content hash folds case and collapses whitespace (DESIGN.md §4.2), so "The API token is
aB3xY9" and "... Ab3Xy9" hashed alike: the second write answered `exists` and the new token
was never stored; after a forget it was refused, and `revive` brought the old token back. A
snippet with a line moved into a block was "the same" too, and reflection merged such pairs,
fading the newer. Identifiers keep their case and indented lines their indentation
(`facts.same_as_written`); ordinary words' case and runs of spaces still fold. On SQLite and
PostgreSQL.
"""

from __future__ import annotations

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.facts import cased_apart, differs_in, indentation, same_as_written, written_key
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import InvalidInput

pytestmark = pytest.mark.anyio

OWNER = "alice"
TOKEN = ("The API token is aB3xY9", "The API token is Ab3Xy9")
DEPLOY = ("The deploy token is aB3xY9Qz", "The deploy token is AB3XY9QZ!")
SCRIPT = ("Run ./Build.sh before the release", "Run ./build.sh before the release")
CODE = (
    "for attempt in range(3):\n    try:\n        call()\n    except Error:\n        pass\n"
    "    sleep(1)",
    "for attempt in range(3):\n    try:\n        call()\n    except Error:\n        pass\n"
    "        sleep(1)",
)
ORDINARY = ("The deploy token is kept in the vault", "the deploy  token is kept in the VAULT")


def test_identifiers_keep_their_case_and_indented_lines_their_indentation():
    for a, b in (TOKEN, DEPLOY, SCRIPT, CODE, ("Buy an iPhone", "buy an iphone")):
        assert not same_as_written(a, b), (a, b)
    for a, b in (ORDINARY, ("URGENT: call Bob", "urgent: call bob"), ("e.g. this", "E.g. this")):
        assert same_as_written(a, b), (a, b)
    # A digit alone makes no word case-bearing: one product, one ticket.
    assert cased_apart("Use ./Build.sh, then tag v2.1.", "use ./build.sh, then tag V2.1") == [
        "./Build.sh"
    ]
    assert same_as_written("Store it in 1Password (JIRA-5678)", "store it in 1password (jira-5678)")
    assert not same_as_written("MAX_SIZE is 10", "max_size is 10")
    assert cased_apart("Meet at 5pm", "Meet at 5 p.m.") == []  # not the same words: not case
    assert written_key("Use ./Build.sh!") == (("./Build.sh",), ())
    assert written_key("Buy an iPhone") != written_key("buy an iphone")
    assert indentation("one\ntwo") == ()
    # One line's leading spaces, or a block indented as a whole, are not a shape.
    assert indentation("  the deploy token") == ()
    assert indentation("    a:\n      b") == ("", "  ")
    assert same_as_written("  The deploy token is X ", "the deploy token is X")
    assert indentation("a:\n  b\n\n  c") == ("", "  ", "  ")
    assert differs_in(*TOKEN) == ["identifier"]
    assert differs_in(*CODE) == ["indentation"]


async def _open(store_target) -> Memory:
    return Memory.open(settings=Settings(store=store_target, owner=OWNER), embedder=HashEmbedder())


@pytest.mark.parametrize(
    "pair", [TOKEN, DEPLOY, SCRIPT, CODE], ids=["token", "deploy", "script", "code"]
)
async def test_a_text_differing_only_in_case_or_indentation_is_stored_as_written(
    store_target, pair
):
    async with await _open(store_target) as mem:
        first = await mem.author(pair[0])
        second = await mem.author(pair[1])
        assert first.status == "created"
        assert (second.status, second.id != first.id) == ("created", True)
        assert (await mem.get(second.id)).content == pair[1]
        assert (await mem.get(first.id)).content == pair[0]
        assert (await mem.get(first.id)).reinforcement_count == 0


async def test_a_changed_token_after_a_sentence_start_capital_differs_in_identifier_only(
    store_target,
):
    """The reply named "identifier, name" when the text's first word lost its capital beside
    the changed token: the capital is the same word, so only the token is named."""
    async with await _open(store_target) as mem:
        await mem.author("Rotate the deploy key aB3xY9 every month")
        again = await mem.author("rotate the deploy key Ab3Xy9 every month")
        assert again.status == "created" and again.similar_to is not None
        assert again.similar_to.differs_in == ["identifier"]


async def test_ordinary_words_case_and_spacing_are_still_one_memory(store_target):
    async with await _open(store_target) as mem:
        first = await mem.author(ORDINARY[0])
        again = await mem.author(ORDINARY[1])
        assert (again.status, again.id) == ("exists", first.id)
        assert (await mem.get(first.id)).reinforcement_count == 1


async def test_one_call_of_two_texts_differing_in_an_identifiers_case_stores_both(store_target):
    async with await _open(store_target) as mem:
        results = await mem.author_many([{"content": TOKEN[0]}, {"content": TOKEN[1]}])
        assert [r.status for r in results] == ["created", "created"]
        assert len({r.id for r in results}) == 2


@pytest.mark.parametrize("pair", [TOKEN, CODE], ids=["token", "code"])
async def test_after_a_forget_the_changed_text_is_stored_and_the_same_text_still_blocked(
    store_target, pair
):
    async with await _open(store_target) as mem:
        old = await mem.author(pair[0])
        await mem.forget(old.id, reason="replaced")
        new = await mem.author(pair[1])
        assert new.status == "created"
        assert (await mem.get(new.id)).content == pair[1]
        assert not (await mem.get(new.id)).archived
        assert (await mem.get(old.id)).archived
        again = await mem.author(pair[0])
        assert (again.status, again.id) == ("blocked-by-tombstone", old.id)


async def test_reflection_keeps_apart_what_differs_as_written_and_merges_the_rest(store_target):
    async with await _open(store_target) as mem:
        kept = {}
        for name, (a, b) in {"deploy": DEPLOY, "code": CODE}.items():
            kept[name] = ((await mem.author(a)).id, (await mem.author(b)).id)
        anchor = (await mem.author("The billing cluster rotates its deploy key monthly.")).id
        dup = (await mem.author("the billing cluster rotates its deploy key monthly!")).id
        merge = (await mem.reflect(["merge"])).steps[0]
        assert merge.details == [f"{dup[:8]} → {anchor[:8]}"]
        for a, b in kept.values():
            assert not (await mem.get(a)).archived
            assert not (await mem.get(b)).archived


async def test_an_import_line_whose_id_holds_its_text_in_other_case_is_refused(store_target):
    """An id is taken as the stored memory again only with its text as written: a line that
    carries a stored id with the token in other case was that memory, and the file's token
    was dropped without a word."""
    ident = "ab" * 16
    async with await _open(store_target) as mem:
        await mem.import_records([(1, {"id": ident, "content": TOKEN[0]})])
        with pytest.raises(InvalidInput, match=ident[:8]):
            await mem.import_records([(1, {"id": ident, "content": TOKEN[1]})])
        again = await mem.import_records([(1, {"id": ident, "content": TOKEN[0]})])
        assert again.counts.get("exists") == 1, again
        assert (await mem.get(ident)).content == TOKEN[0]
        assert (await mem.stats()).total == 1
