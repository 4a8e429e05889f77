"""Repeats, near-duplicates and tombstones on write (DESIGN.md §4.2-4.4), value by value.

A write must keep what it is told: an exact repeat is folded into the memory it repeats, a
near-duplicate is stored and linked, and a forgotten value is not silently re-made. These
tests pin the values that tell two facts apart, the repeat rule and the content hash (stored
in every store, so it must never change), and what a write reports.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.facts import VALUE_KINDS, differs_in, normalise, normalised_hash, values
from nooa_mcp.domain.schema import now as utc_now
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import InvalidInput, NotFound

# --------------------------------------------------------------------------- exact repeats


def test_a_repeat_is_equal_after_nfkc_case_folding_and_whitespace_collapsing():
    assert normalise("  Stra\u00dfe\u00a0\tIS\n\ufb01ne  ") == "strasse is fine"


def test_the_content_hash_is_the_sha256_of_the_normalised_text():
    # Stored in every memory row: changing it would make old rows miss their repeats.
    expected = hashlib.sha256(b"the rate limit is 100").hexdigest()
    assert normalised_hash("The  rate LIMIT is 100 ") == expected
    assert normalised_hash("the rate limit is 500") != expected


# --------------------------------------------------------------------------- values of a fact


def test_dates_and_times_are_lowercased_without_spaces_and_months_count_as_dates():
    got = values("Deploy at 3 PM on 2026-03-01, or Monday 10:30 in March")
    assert got.date == frozenset({"3pm", "2026-03-01", "10:30", "monday", "march"})
    assert got.number == frozenset()  # a date's digits are no numbers of their own


def test_identifiers_are_taken_whole_and_lowercased_before_numbers():
    got = values("JIRA-5678 broke web-02 at 10.0.0.12 on v2.3.1 in us-east-1")
    assert got.identifier == frozenset({"jira-5678", "web-02", "10.0.0.12", "v2.3.1", "us-east-1"})
    assert got.number == frozenset()


def test_a_date_is_taken_out_before_identifiers_are_looked_for():
    got = values("build a1-02:00 shipped")
    assert (got.identifier, got.date) == (frozenset({"a1"}), frozenset({"02:00"}))


def test_numbers_lose_their_thousands_commas_and_keep_sign_and_decimals():
    assert values("limits: 1,000 then -5, +3 and 2.5").number == frozenset(
        {"1000", "-5", "+3", "2.5"}
    )


def test_names_are_capitalised_words_that_are_not_function_words():
    assert values("The team asked Alice and McDonald").name == frozenset({"Alice", "McDonald"})


def test_negations_are_counted_and_only_their_parity_tells_facts_apart():
    assert values("we did not go and can't and isn't").negation == 3
    assert differs_in("the cache is on", "the cache is not on") == ["negation"]
    assert differs_in("it is not untrue", "it is not not not untrue") == []
    assert differs_in("it is not not true", "it is true") == []


@pytest.mark.parametrize(
    ("old", "new", "kinds"),
    [
        ("the rate limit is 100", "the rate limit is 500", ["number"]),
        ("the deploy is at 02:00", "the deploy is at 03:00", ["date"]),
        ("the bug is JIRA-5678", "the bug is JIRA-5679", ["identifier"]),
        ("the owner is Alice", "the owner is Bob", ["name"]),
        ("the rate limit is 100", "the rate limit is 100", []),
        ("the cluster has three worker nodes", "the cluster has four worker nodes", ["number"]),
        ("backups run once a day", "backups run twice a day", ["number"]),
        ("the cluster has 3 nodes", "the cluster has three nodes", ["number"]),
        ("use the new one", "use the new version", []),  # "one" is mostly a pronoun
        # A capital that starts a sentence, or a name written small, is no other name: it
        # was reported as "name" beside what really changed.
        ("Rotate the key aB3xY9", "rotate the key Ab3Xy9", ["identifier"]),
        ("Deploy web-02 first", "deploy web-03 first", ["identifier"]),
        ("Ask Alice for the key", "ask alice for the key", []),
        ("Ask Alice for the key", "ask Carol for the key", ["name"]),
        (
            "Alice sets the limit 100 on web-01 at 02:00",
            "Bob does not set the limit 200 on web-02 at 03:00",
            list(VALUE_KINDS),
        ),
    ],
)
def test_two_texts_differ_in_the_kinds_of_value_they_state_differently(old, new, kinds):
    assert differs_in(old, new) == kinds
    assert differs_in(new, old) == kinds


# --------------------------------------------------------------------------- through the facade

FACT = "The staging database password rotates on the first Monday of each month"
#: The same statement restated (no article, a full stop): another hash, hash-embedder cosine
#: 0.9623 with FACT, so a tombstone match found by closeness, reported below 1.
REWORDED = "Staging database password rotates on the first Monday of each month."


def cosine(a: str, b: str) -> float:
    va, vb = HashEmbedder().embed([a, b])
    return float(va @ vb)


def edge_targets(view) -> list[tuple[str, str, float]]:
    return sorted((e["target"], e["type"], e["weight"]) for e in view.edges)


@pytest.mark.anyio
async def test_an_exact_repeat_reinforces_once_per_repeat_and_keeps_what_it_adds(mem):
    first = await mem.author("The build cache lives in /var/cache/ci", tags=["ci"], entities=["CI"])
    other = await mem.author("Lunch is at noon in the small kitchen")
    again = await mem.author(
        "the build cache  lives in /var/cache/ci",
        tags=["ci", "cache"],
        entities=["Runner"],
        links=[
            {"target": other.id, "relation": "related"},
            {"target": first.id, "relation": "supports"},  # itself: no edge
        ],
    )
    assert (again.status, again.id, again.similarity) == ("exists", first.id, 1.0)
    view = await mem.get(first.id)
    assert view.reinforcement_count == 1
    assert view.tags == ["ci", "cache"]
    assert view.entities == ["CI", "Runner"]
    assert edge_targets(view) == [(other.id, "related", 1.0)]
    await mem.author("The build cache lives in /var/cache/ci")
    assert (await mem.get(first.id)).reinforcement_count == 2


@pytest.mark.anyio
async def test_a_repeat_or_revive_that_names_no_score_keeps_the_ones_its_user_gave(mem):
    """A write that leaves importance, salience and confidence out says nothing of them: the
    defaults (MEDIUM, 0.3, 0.75) a new memory takes must not raise a memory rated lower, on
    a repeat of a live memory or on the revive of a forgotten one. A score it does give, and
    higher, is kept."""
    text = "The office plant gets water on Mondays"
    first = await mem.author(text, importance="TRIVIAL", salience=0.1, confidence=0.4)
    assert (await mem.author(text)).status == "exists"
    view = await mem.get(first.id)
    assert (view.importance, view.salience, view.confidence) == (1.0, 0.1, 0.4)
    await mem.forget(first.id)
    assert (await mem.author(text, revive=True)).status == "revived"
    view = await mem.get(first.id)
    assert (view.importance, view.salience, view.confidence) == (1.0, 0.1, 0.4)
    await mem.author(text, importance="HIGH", confidence=0.9)
    view = await mem.get(first.id)
    assert (view.importance, view.salience, view.confidence) == (8.0, 0.1, 0.9)
    # A new memory that names none takes the defaults.
    other = await mem.get((await mem.author("Lunch is at noon in the small kitchen")).id)
    assert (other.importance, other.salience, other.confidence) == (5.0, 0.3, 0.75)


@pytest.mark.anyio
async def test_a_repeat_that_would_pass_50_labels_is_refused_naming_the_field(mem):
    first = await mem.author(FACT, tags=[f"t{i}" for i in range(30)])
    await mem.author(FACT, entities=[f"e{i}" for i in range(30)])
    for field in ("tags", "entities"):
        with pytest.raises(InvalidInput) as exc:
            await mem.author(FACT, **{field: [f"n{i}" for i in range(30)]})
        assert str(exc.value) == (
            f"{field}: memory {first.id[:8]} says this already and has 30 {field}; with the 30 "
            f"new ones given it would have 60, and a memory has at most 50. Pass at most 20 "
            f"new {field}."
        )
    assert (await mem.get(first.id)).reinforcement_count == 1
    # Counted in words: one more fits, or none.
    await mem.author(FACT, tags=[f"n{i}" for i in range(19)])
    with pytest.raises(InvalidInput) as exc:
        await mem.author(FACT, tags=["x1", "x2"])
    assert str(exc.value).endswith(
        "has 49 tags; with the 2 new ones given it would have 51, and a memory has at most 50. "
        "Pass at most 1 new tag."
    )
    await mem.author(FACT, tags=["x1"])
    with pytest.raises(InvalidInput) as exc:
        await mem.author(FACT, tags=["x2"])
    assert str(exc.value).endswith(
        "has 50 tags; with the 1 new one given it would have 51, and a memory has at most 50. "
        "Pass no new tags."
    )


@pytest.mark.anyio
async def test_a_repeat_or_restore_past_20_references_is_refused_not_cut(store_target):
    """A repeat that adds references to a memory holding 18 was answered `exists` and the
    references past the 20th were dropped without a word; a faded memory written again was
    restored the same way. Now the write is refused, naming the field, and nothing changes."""
    settings = Settings(store=store_target, owner="coder@laptop")
    held = [f"url:https://wiki.example/a{i}" for i in range(18)]
    more = [f"url:https://wiki.example/b{i}" for i in range(5)]
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        first = await mem.author(FACT, references=held)
        with pytest.raises(InvalidInput) as exc:
            await mem.author(FACT, references=more)
        assert str(exc.value) == (
            f"references: memory {first.id[:8]} says this already and has 18 references; with "
            "the 5 new ones given it would have 23, and a memory has at most 20. Pass at most 2 "
            "new references."
        )
        view = await mem.get(first.id)
        assert ([r.uri for r in view.references], view.reinforcement_count) == (held, 0)
        # Two fit: kept, every one.
        assert (await mem.author(FACT, references=more[:2])).status == "exists"
        assert [r.uri for r in (await mem.get(first.id)).references] == held + more[:2]
        # A faded memory written again: refused too, still faded.
        await mem.reflect(["prune"], now=utc_now() + timedelta(days=3650))
        assert (await mem.get(first.id)).archived
        with pytest.raises(InvalidInput, match=r"^references: "):
            await mem.author(FACT, references=more[2:])
        view = await mem.get(first.id)
        assert (view.archived, len(view.references)) == (True, 20)


@pytest.mark.anyio
async def test_a_blocked_rewording_reports_its_cosine_to_four_places(mem):
    first = await mem.author(FACT)
    await mem.forget(first.id, reason="rotated away")
    blocked = await mem.author(REWORDED)
    expected = round(cosine(FACT, REWORDED), 4)
    assert 0.95 <= expected < 1.0
    assert blocked.status == "blocked-by-tombstone"
    assert (blocked.id, blocked.similarity) == (first.id, expected)
    assert (blocked.tombstone.memory_id, blocked.tombstone.similarity) == (first.id, expected)
    assert blocked.tombstone.reason == "rotated away"


@pytest.mark.anyio
async def test_a_number_in_words_changed_is_a_new_fact_not_a_forgotten_rewording(mem):
    """Forgotten: "... three worker nodes". Written next: "... four worker nodes", which the
    hash embedder puts within the tombstone's line: a changed number, in words, is another
    fact, written and reported as differing in a number, never refused as the forgotten one."""
    old = (
        "The staging cluster in the Frankfurt region has three worker nodes behind the shared "
        "load balancer and a database replica"
    )
    new = old.replace("three", "four")
    assert cosine(old, new) >= 0.95
    first = await mem.author(old)
    await mem.forget(first.id, reason="scaled up")
    written = await mem.author(new)
    assert written.status == "created" and written.id != first.id
    assert (await mem.get(written.id)).content == new


@pytest.mark.anyio
async def test_reviving_by_a_rewording_reports_the_tombstone_and_logs_a_revive(mem):
    first = await mem.author(FACT)
    await mem.forget(first.id, reason="rotated away")
    revived = await mem.author(REWORDED, revive=True)
    expected = round(cosine(FACT, REWORDED), 4)
    assert (revived.status, revived.id, revived.similarity) == ("revived", first.id, expected)
    assert revived.tombstone is not None
    assert (revived.tombstone.reason, revived.tombstone.similarity) == ("rotated away", expected)
    (_, newest), *_ = await mem.access_log(first.id)
    assert (newest.channel.value, newest.query) == ("reinforced", "revive")
    view = await mem.get(first.id)
    assert not view.archived
    assert view.content == FACT  # the original comes back, not the rewording


@pytest.mark.anyio
async def test_importing_edges_adds_those_whose_ends_exist_and_skips_the_rest(mem):
    a = await mem.author("alpha: the release train leaves on Fridays")
    b = await mem.author("beta: the changelog is written on Thursdays")
    added = await mem.import_edges(
        [
            (a.id, {"target": "0" * 32, "type": "related"}),  # no such memory
            (a.id, {"target": b.id, "type": "nonsense"}),  # no such relation
            (a.id, {"target": b.id, "type": "related", "weight": 7}),  # weight out of range
            (a.id, {"target": "not hex", "type": "related"}),
            (b.id, {"target": b.id, "type": "related"}),  # to itself
            (a.id, {"target": b.id, "type": "causes", "weight": 0.5}),
            (a.id, {"target": f" {b.id[:8].upper()} ", "type": "supports"}),  # a prefix, no weight
            (b.id, {"target": a.id, "type": "precedes", "weight": "WEAK"}),
        ]
    )
    assert added == 3
    assert edge_targets(await mem.get(a.id)) == [(b.id, "causes", 0.5), (b.id, "supports", 1.0)]
    assert edge_targets(await mem.get(b.id)) == [(a.id, "precedes", 0.3)]
    assert await mem.import_edges([]) == 0


# --------------------------------------------------------------------------- near-duplicates

SECOND = FACT.replace("first", "second")  # cosine 0.9469 with FACT: a near-duplicate
NOON = FACT + " at noon on weekdays"  # cosine 0.9045: below the 0.92 line


@pytest.mark.anyio
async def test_a_near_duplicate_reports_its_cosine_and_is_linked_with_it_as_weight(mem):
    first = await mem.author(FACT)
    near = await mem.author(SECOND)
    expected = round(cosine(FACT, SECOND), 4)
    assert 0.92 <= expected < 1.0
    assert near.status == "created"
    assert (near.similar_to.id, near.similar_to.similarity) == (first.id, expected)
    assert near.similar_to.differs_in == differs_in(FACT, SECOND)
    assert edge_targets(await mem.get(near.id)) == [(first.id, "related", expected)]
    apart = await mem.author(NOON)
    assert cosine(FACT, NOON) < 0.92 and cosine(SECOND, NOON) < 0.92
    assert apart.similar_to is None
    assert edge_targets(await mem.get(apart.id)) == []


@pytest.mark.anyio
async def test_a_link_the_author_gave_to_the_twin_is_kept_instead_of_a_related_edge(mem):
    first = await mem.author(FACT)
    near = await mem.author(SECOND, links=[{"target": first.id, "relation": "supports"}])
    assert (near.similar_to.id, near.similar_to.relation) == (first.id, "supports")
    assert edge_targets(await mem.get(near.id)) == [(first.id, "supports", 1.0)]
    relink = "write it with --link {id}:refines"
    assert "linked supports. If it replaces" in near.notes(relink=relink, revive="")[0]


@pytest.mark.anyio
async def test_a_write_that_refines_its_twin_is_not_told_to_link_it_again(mem):
    first = await mem.author(FACT)
    third = FACT.replace("first", "third")
    near = await mem.author(third, links=[{"target": first.id, "relation": "refines"}])
    assert (near.similar_to.id, near.similar_to.relation) == (first.id, "refines")
    assert edge_targets(await mem.get(near.id)) == [(first.id, "refines", 1.0)]
    (note,) = near.notes(relink="write it with --link {id}:refines", revive="")
    assert note.endswith("both kept; this one refines it, as the write said.")
    assert "linked related" not in note and "--link" not in note
    plain = await mem.author(FACT.replace("first", "fourth"))
    assert plain.similar_to.relation == "related"
    assert "linked related. If it replaces" in plain.notes(relink="x", revive="")[0]


@pytest.mark.anyio
async def test_near_duplicates_are_looked_for_in_the_same_type_and_role_only(tmp_path):
    path = tmp_path / "roles.sqlite"
    async with Memory.open(path, owner="", embedder=HashEmbedder()) as shared:
        common = await shared.author(FACT)
        assert (await shared.author(SECOND)).similar_to.id == common.id  # shared with shared
    async with Memory.open(path, owner="coder@a", embedder=HashEmbedder()) as coder:
        todo = await coder.author(FACT, type="todo")
        # Neither the shared rows (another owner's) nor the todo (another type) count.
        assert (await coder.author(SECOND, type="info")).similar_to is None
        assert (await coder.author(SECOND, type="todo")).similar_to.id == todo.id


@pytest.mark.anyio
async def test_a_batch_item_is_compared_with_the_stored_rows_and_the_batch_before_it(mem):
    stored = await mem.author(FACT)
    twice = FACT + " again"
    thrice = FACT + " again ok"
    assert cosine(thrice, twice) > cosine(thrice, FACT) >= 0.92
    results = await mem.author_many([{"content": twice}, {"content": thrice}])
    assert results[0].similar_to.id == stored.id
    assert results[1].similar_to.id == results[0].id


WORDS = "amber basil cedar delta ember fjord garnet harbor iris juniper kelp lotus".split()  # noqa: SIM905


@pytest.mark.anyio
async def test_every_item_of_a_batch_over_64_finds_its_stored_twin(mem):
    stored = await mem.author(FACT)
    filler = [
        f"{WORDS[i % 12]} {WORDS[(i * 5 + 1) % 12]} {WORDS[(i * 7 + 3) % 12]} item{i}"
        for i in range(69)
    ]
    batch = [{"content": text} for text in filler]
    batch.insert(66, {"content": SECOND})
    results = await mem.author_many(batch)
    assert results[66].similar_to is not None
    assert results[66].similar_to.id == stored.id
    assert len({r.id for r in results}) == 70


@pytest.mark.anyio
async def test_a_repeat_keeps_the_authors_importance_for_the_next_rescore(mem):
    """Rescoring starts from what the author said, not from the last rescore: 5 with salience
    0.8 is 6.0 after a pass; after one repeat (at a lower importance) the next pass gives
    5 + 2·0.5 + 2·ln 2 / ln 17 = 6.5, where starting from 6.0 would give 7."""
    text = "The billing cron job runs at five every morning"
    first = await mem.author(text, importance=5, salience=0.8)
    await mem.reflect(["rescore"])
    assert (await mem.get(first.id)).importance == 6.0
    await mem.author(text, importance=2)
    assert (await mem.get(first.id)).importance == 6.0
    await mem.reflect(["rescore"])
    assert (await mem.get(first.id)).importance == 6.5


@pytest.mark.anyio
async def test_forget_stamps_when_it_archived_on_disk_and_revive_clears_it(tmp_path) -> None:
    """The archived flag and its time are on the row itself, not only in the tombstone."""
    import sqlite3
    import time

    path = tmp_path / "memory.sqlite"
    async with Memory.open(path, owner="coder", embedder=HashEmbedder()) as mem:
        kept = (await mem.author("The relay sits in bay 4.")).id
        gone = (await mem.author("The crane moved to pier 9.")).id
        before = time.time()
        forgot = await mem.forget(gone)
        assert forgot.archived and forgot.changed == ["archived"]

        def row(memory_id: str) -> tuple[int, float | None]:
            with sqlite3.connect(path) as conn:
                return conn.execute(
                    "SELECT archived, archived_at FROM memories WHERE id = ?", (memory_id,)
                ).fetchone()

        archived, at = row(gone)
        assert archived == 1 and at is not None and before - 1 <= at <= time.time() + 1
        assert row(kept) == (0, None)
        await mem.revive(gone)
        assert row(gone) == (0, None)


@pytest.mark.anyio
async def test_links_that_are_no_list_or_name_no_memory_are_refused_naming_the_field(mem):
    with pytest.raises(InvalidInput) as exc:
        await mem.author("The relay sits in bay 4.", links="related")
    assert str(exc.value) == "links: 'related' is not a list. Pass a list of links."
    with pytest.raises(NotFound) as missing:
        await mem.author(
            "The relay sits in bay 4.", links=[{"target": "ffffffff", "relation": "related"}]
        )
    assert str(missing.value).startswith("links.target: ")
    target = (await mem.author("The crane moved to pier 9.")).id
    with pytest.raises(InvalidInput) as weight:
        await mem.author(
            "The relay sits in bay 4.",
            links=[{"target": target, "relation": "related", "weight": "HEAVY"}],
        )
    assert str(weight.value).startswith("links.weight: ")
    listed = await mem.list_memories()
    assert [m.id for _, m in listed] == [target]  # nothing half-written


@pytest.mark.anyio
async def test_a_repeat_inside_one_batch_is_the_first_items_memory(mem):
    results = await mem.author_many(
        [{"content": "The relay sits in bay 4."}, {"content": "the relay  sits in bay 4."}]
    )
    assert [r.status for r in results] == ["created", "exists"]
    assert results[1].id == results[0].id


@pytest.mark.anyio
async def test_an_import_of_a_known_id_with_other_text_is_refused_and_keeps_the_stored_memory(
    mem,
):
    # Taking it as `exists` silently dropped what the second write said.
    ident = "ab" * 16
    first = await mem.author_many([{"id": ident, "content": "The relay sits in bay 4."}])
    with pytest.raises(InvalidInput) as refused:
        await mem.author_many([{"id": ident, "content": "The relay sits in bay 5."}])
    again = await mem.author_many([{"id": ident, "content": "The relay sits in bay 4."}])
    assert (first[0].status, first[0].id) == ("created", ident)
    assert refused.value.field == "id"
    assert (again[0].id, again[0].status, again[0].similarity) == (ident, "exists", 1.0)
    assert (await mem.get(ident)).content == "The relay sits in bay 4."


@pytest.mark.anyio
async def test_an_intent_never_fires_on_its_own_authoring_and_fires_on_a_later_one(mem):
    made = await mem.author(
        "Mention the freeze when deploy comes up.", type="intent", trigger={"cue": "deploy"}
    )
    assert made.reminders == []
    later = await mem.author("The deploy moved to Friday.")
    assert [r.intent_id for r in later.reminders] == [made.id]


@pytest.mark.anyio
async def test_a_title_is_part_of_what_is_embedded(mem):
    titled = await mem.author("Bay four holds it.", title="zebra relay")
    rows = {r.id: r for r in (await mem.explain("zebra", hops=0)).rows}
    assert rows[titled.id].cos is not None and rows[titled.id].cos > 0.2
