"""Intents that fire (DESIGN.md §9.2, §9.3): time and cue triggers evaluated on every call that
carries text, returned as reminders, logged, and marked fired or re-armed."""

from __future__ import annotations

from datetime import timedelta

import anyio
import pytest

from nooa_mcp.domain.schema import now
from nooa_mcp.errors import InvalidInput
from nooa_mcp.services import reminders

pytestmark = pytest.mark.anyio


@pytest.fixture
def clock(monkeypatch):
    """Move the facade's clock forward without sleeping."""

    class Clock:
        offset = timedelta(0)

        def advance(self, delta: timedelta) -> None:
            self.offset += delta

    c = Clock()
    monkeypatch.setattr(reminders, "utc_now", lambda: now() + c.offset)
    return c


async def test_a_cue_intent_fires_from_a_recall_query(mem):
    added = await mem.intent("add", content="Bump the version file first", cue="release build")
    await mem.author("Releases are cut from the main branch")
    result = await mem.recall("how do I make a release build?")
    assert [r.intent_id for r in result.reminders] == [added.id]
    assert result.reminders[0].reason == "cue"
    assert result.reminders[0].content == "Bump the version file first"
    # One-shot: it does not fire again.
    assert (await mem.recall("another release build question")).reminders == []
    (item,) = (await mem.intent("list")).intents
    assert (item.armed, item.fired_count) == (False, 1)


async def test_a_cue_intent_fires_from_authored_content_but_never_from_itself(mem):
    added = await mem.intent("add", content="Check the invoice total twice", cue="invoice")
    assert added.reminders == []
    written = await mem.author("The ACME invoice arrived today")
    assert [r.intent_id for r in written.reminders] == [added.id]


async def test_a_reminder_given_days_after_it_came_due_says_how_late(mem, clock):
    """A reminder due on a day nobody called came weeks later as "(fired on its time)"
    (newcomer helper): it names when it was due and how late it is, an hour or more late."""
    from nooa_mcp.mcp.rendering import render_reminders

    due_at = (now() + timedelta(hours=2)).replace(microsecond=0)
    added = await mem.intent("add", content="Send the invoice run", fire_at=due_at)
    soon = await mem.intent("add", content="Water the plants", fire_at=now() + timedelta(days=19))
    clock.advance(timedelta(days=19, hours=3))
    (late, on_time) = sorted((await mem.intent("check")).reminders, key=lambda r: r.content)
    assert (late.intent_id, late.due_at) == (added.id, due_at)
    assert late.lateness() == f", due {due_at:%Y-%m-%d %H:%M} UTC, 19 day(s) late"
    assert (
        on_time.intent_id == soon.id
        and on_time.lateness() == f", due {on_time.due_at:%Y-%m-%d %H:%M} UTC, 3 hour(s) late"
    )
    shown = render_reminders([late])[-1]
    assert shown.startswith(f"- [{added.id[:8]}] (time, due ") and "19 day(s) late) " in shown


async def test_an_intent_added_with_a_time_past_says_so(mem):
    """A fire_at already past (a mistyped year) was accepted as 'created', no word."""
    past = await mem.intent("add", content="File the taxes", fire_at="2025-04-01T09:00:00Z")
    assert past.outcome == (
        "created (fire_at 2025-04-01 09:00 UTC has passed: it fires at the next call;"
        " check the date if that was not meant)"
    )
    ahead = await mem.intent("add", content="Renew the lease", fire_at=now() + timedelta(days=3))
    assert ahead.outcome == "created"


@pytest.mark.parametrize("cue", ["the", "and then we", "it is"])
async def test_a_cue_of_only_common_words_is_refused_naming_it(mem, cue):
    """cue="the" was accepted, never fired, and was never pruned (newcomer helper)."""
    with pytest.raises(InvalidInput) as refused:
        await mem.intent("add", content="Mention the rollback script", cue=cue)
    assert refused.value.field == "cue" and "would never fire" in str(refused.value)
    assert (await mem.intent("list")).intents == []


@pytest.mark.parametrize("cue", ["the", "and then we"])
async def test_memory_author_refuses_a_cue_of_only_common_words_as_the_intent_tool_does(mem, cue):
    """memory_author took {"cue": "the"}: an intent that could never fire (auditor item)."""
    with pytest.raises(InvalidInput) as refused:
        await mem.author("Mention the rollback script", type="intent", trigger={"cue": cue})
    assert refused.value.field == "trigger.cue" and "would never fire" in str(refused.value)
    assert (await mem.intent("list")).intents == []


async def test_an_imported_intent_with_such_a_cue_is_restored_not_the_whole_file_refused(mem):
    """An earlier release accepted such a cue: its export must still import, line and all."""
    lines = [
        {"content": "Mention the rollback script", "type": "intent", "trigger": {"cue": "the"}},
        {"content": "Renew the domain", "type": "intent", "trigger": {"cue": "domain renewal"}},
    ]
    result = await mem.import_records(list(enumerate(lines, 1)))
    assert result.counts.get("created") == 2
    assert len((await mem.intent("list")).intents) == 2


async def test_a_time_intent_fires_once_due(mem, clock):
    added = await mem.intent("add", content="Renew the domain", fire_at=now() + timedelta(hours=2))
    assert (await mem.intent("check")).reminders == []
    assert (await mem.todo("list")).reminders == []
    clock.advance(timedelta(hours=3))
    due = await mem.todo("list")
    assert [(r.intent_id, r.reason) for r in due.reminders] == [(added.id, "time")]
    assert (await mem.intent("check")).reminders == []


async def test_a_recurring_time_intent_is_rearmed(mem, clock):
    added = await mem.intent(
        "add", content="Post the weekly status", fire_at=now() + timedelta(hours=1), every_hours=24
    )
    clock.advance(timedelta(hours=2))
    (first,) = (await mem.intent("check")).reminders
    assert first.rearmed and first.intent_id == added.id
    assert (await mem.intent("check")).reminders == []
    clock.advance(timedelta(hours=24))
    assert len((await mem.intent("check")).reminders) == 1
    (item,) = (await mem.intent("list")).intents
    assert item.fired_count == 2 and item.armed


async def test_check_with_text_fires_cues(mem):
    added = await mem.intent("add", content="Ask about the budget", cue="quarterly planning")
    fired = await mem.intent("check", text="starting quarterly planning now")
    assert [r.intent_id for r in fired.reminders] == [added.id]


async def test_firings_are_logged_and_counted(mem):
    await mem.intent("add", content="Water the plants", cue="office plants")
    await mem.recall("who waters the office plants")
    stats = await mem.stats()
    assert stats.extra["intents_fired"] == 1
    intent_id = (await mem.intent("list")).intents[0].id
    log = await mem.access_log(intent_id)
    assert log[0][1].channel.value == "injected"


async def test_cancel_archives_the_intent_and_it_never_fires(mem):
    added = await mem.intent("add", content="Send the reminder email", cue="newsletter")
    cancelled = await mem.intent("cancel", memory_id=added.id[:8])
    assert cancelled.outcome == "cancelled" and cancelled.intents == []
    assert (await mem.recall("the newsletter draft")).reminders == []


async def test_intent_errors_name_the_field(mem):
    with pytest.raises(InvalidInput) as exc:
        await mem.intent("snooze")
    assert exc.value.field == "action"
    with pytest.raises(InvalidInput) as exc:
        await mem.intent("add", content="no trigger at all")
    assert exc.value.field == "trigger"
    fact = await mem.author("plain fact about the office")
    with pytest.raises(InvalidInput) as exc:
        await mem.intent("cancel", memory_id=fact.id)
    assert exc.value.field == "memory_id"


async def test_two_facades_never_both_fire_a_one_shot_intent(settings, embedder, store_path):
    """The firing is decided again on the fresh row inside the write transaction."""
    from nooa_mcp import Memory

    async with (
        Memory.open(settings=settings, embedder=embedder) as a,
        Memory.open(settings=settings, embedder=embedder) as b,
    ):
        await a.intent("add", content="Tell the team about the outage", cue="outage report")
        fired_a = (await a.intent("check", text="writing the outage report")).reminders
        fired_b = (await b.intent("check", text="writing the outage report")).reminders
    assert len(fired_a) + len(fired_b) == 1


async def test_updated_content_is_a_cue_too(mem):
    added = await mem.intent("add", content="Tell finance before changing vendors", cue="vendor")
    note = await mem.author("we buy paper from the usual shop")
    updated = await mem.update(note.id, content="we switched paper vendor to PaperCo")
    assert [r.intent_id for r in updated.reminders] == [added.id]


async def test_intents_are_read_again_only_after_a_change(store_target) -> None:
    """Each recall checks the role's intents for a cue; they are kept between calls while no
    memory changed, and an intent another server adds, fires or cancels is seen at once."""
    from nooa_mcp import Memory
    from nooa_mcp.embeddings import HashEmbedder

    async with (
        Memory.open(store_target, owner="me", embedder=HashEmbedder()) as a,
        Memory.open(store_target, owner="me", embedder=HashEmbedder()) as b,
    ):
        await a.author("Releases are cut from the main branch")
        store = a.engine.store
        real = store.intents
        reads: list[str] = []

        async def counted(role):
            reads.append(role)
            return await real(role)

        store.intents = counted  # type: ignore[method-assign]
        await a.recall("how are releases cut?")
        await a.engine.flush()
        await a.recall("which branch do releases come from?")
        await a.engine.flush()
        before = len(reads)
        await a.recall("where do releases come from?")
        assert len(reads) == before  # nothing changed: kept
        # Writing other memories changes no intent: each write checks the intents for a cue
        # (and the recall after it) on the kept list, read back by the sync or not.
        await a.author("Hotfixes branch off the last release tag")
        await a.author("The changelog is written before the tag")
        await a.engine.flush()
        await a.recall("where do hotfixes branch from?")
        assert len(reads) == before
        added = await b.intent("add", content="Bump the version first", cue="release build")
        await b.engine.flush()
        if store.kind == "postgresql":
            await store.wait_listening()
            for _ in range(100):  # the other server's commit arrives over NOTIFY
                if await store.change_token() != a.engine.index._token:
                    break
                await anyio.sleep(0.05)
        fired = await a.recall("how do I make a release build?")
        assert [r.intent_id for r in fired.reminders] == [added.id]
        assert len(reads) > before


async def test_a_shared_intent_fires_for_a_role_and_is_listed_but_not_cancelled_by_it(
    store_target,
) -> None:
    """An intent set without an owner (the CLI's) is every role's to be reminded of, as shared
    todos are (DESIGN.md §9.2): a role's recall fires it and its list shows it; cancelling
    it is a write to the shared owner's memory, which a role may not make."""
    from nooa_mcp import Memory
    from nooa_mcp.embeddings import HashEmbedder
    from nooa_mcp.errors import OwnerForbidden

    async with Memory.open(store_target, owner="", embedder=HashEmbedder()) as shared:
        added = await shared.intent("add", content="Bump the version first", cue="release build")
    async with Memory.open(store_target, owner="coder@laptop", embedder=HashEmbedder()) as coder:
        assert [i.id for i in (await coder.intent("list")).intents] == [added.id]
        fired = await coder.recall("how do I make a release build?")
        assert [r.intent_id for r in fired.reminders] == [added.id]
        with pytest.raises(OwnerForbidden, match="shared memories are the user's"):
            await coder.intent("cancel", memory_id=added.id)
    async with Memory.open(store_target, owner="reviewer", embedder=HashEmbedder()) as other:
        # One-shot: spent by the first role it reminded.
        assert (await other.recall("another release build question")).reminders == []
        (item,) = (await other.intent("list")).intents
        assert (item.armed, item.fired_count) == (False, 1)


async def test_the_same_text_with_another_trigger_is_another_intent(mem, clock):
    """Adding an intent's text again with a cue answered `exists` and dropped the cue, which
    then never fired (re-test helper); a spent one-shot said again is asked for again."""
    when = now() + timedelta(hours=2)
    timed = await mem.intent("add", content="Run the payroll check", fire_at=when)
    same = await mem.intent("add", content="Run the payroll check", fire_at=when)
    assert (same.outcome, same.id) == ("exists", timed.id)  # the same intent said again
    cued = await mem.intent("add", content="Run the payroll check", cue="payroll")
    assert cued.outcome == "created" and cued.id != timed.id
    fired = await mem.recall("when does payroll run?")
    assert [r.intent_id for r in fired.reminders] == [cued.id]
    again = await mem.intent("add", content="Run the payroll check", cue="Payroll")
    assert again.outcome == "created" and again.id not in (timed.id, cued.id)
