"""Pure types and validators: the data of DESIGN.md §2 and the owners and scopes of §10."""

import pytest

from nooa_mcp.domain.schema import (
    CONFIDENCE,
    EDGE_WEIGHT,
    IMPORTANCE,
    SALIENCE,
    TYPE_WEIGHT,
    EdgeType,
    Memory,
    MemoryType,
    clean_labels,
    content_hash,
    cue_set,
    parse_link,
    sizes,
)
from nooa_mcp.domain.scope import owner_from_client_name, parse_owner
from nooa_mcp.errors import InvalidInput


def test_there_are_seven_memory_types_and_ten_edge_types_with_traversal_weights():
    assert len(MemoryType) == 7
    assert len(EdgeType) == 10
    assert {e for e, w in TYPE_WEIGHT.items() if w == 1.0} == {
        EdgeType.derived_from,
        EdgeType.created_by,
        EdgeType.causes,
        EdgeType.refines,
    }
    assert all(TYPE_WEIGHT[e] == 0.6 for e in EdgeType if TYPE_WEIGHT[e] != 1.0)


@pytest.mark.parametrize(
    ("ladder", "label", "value"),
    [
        (IMPORTANCE, "critical", 10),
        (IMPORTANCE, "TRIVIAL", 1),
        (SALIENCE, "Pivotal", 1.0),
        (SALIENCE, "NONE", 0.0),
        (CONFIDENCE, "TENTATIVE", 0.5),
        (EDGE_WEIGHT, "WEAK", 0.3),
    ],
)
def test_labels_map_to_their_numbers_in_any_case(ladder, label, value):
    assert ladder.parse(label) == value


def test_numbers_inside_the_range_are_accepted_as_they_are():
    assert IMPORTANCE.parse(7) == 7.0
    assert IMPORTANCE.parse("6.5") == 6.5


@pytest.mark.parametrize("bad", ["HUGE", 11, -1, float("nan"), True, None, [3]])
def test_unknown_labels_and_out_of_range_numbers_name_the_field_and_the_levels(bad):
    with pytest.raises(InvalidInput) as info:
        IMPORTANCE.parse(bad)
    assert info.value.field == "importance"
    assert "CRITICAL" in str(info.value)


def test_number_to_label_takes_the_nearest_band_and_ties_go_upward():
    assert IMPORTANCE.label(9.2) == "CRITICAL"
    assert IMPORTANCE.label(9.0) == "CRITICAL"  # 1 from HIGH and from CRITICAL: upward
    assert IMPORTANCE.label(4.0) == "MEDIUM"  # tie between LOW (3) and MEDIUM (5)
    assert SALIENCE.label(0.4) == "NOTABLE"  # tie between ROUTINE and NOTABLE


def test_status_exists_only_on_todos_and_defaults_to_open():
    assert Memory(content="x", type="todo").status == "open"
    with pytest.raises(ValueError, match="only todos"):
        Memory(content="x", type="info", status="done")


def test_owner_is_role_at_instance_without_reserved_characters():
    assert parse_owner("coder@laptop") == ("coder", "laptop")
    assert parse_owner("") == ("", "")
    for bad in ["a_b", "a@b@c", "x%y", "@inst", "role@", "two words"]:
        with pytest.raises(InvalidInput):
            parse_owner(bad)


def test_client_names_become_valid_owners():
    assert owner_from_client_name("Claude Desktop") == "claude-desktop"
    assert owner_from_client_name("my_client@1") == "my-client-1"
    assert owner_from_client_name("") == "agent"
    parse_owner(owner_from_client_name("we!rd__name%%"))


def test_content_hash_ignores_whitespace_case_and_compatibility_forms_only():
    """DESIGN.md §4.2: an exact repeat is equal after NFKC, case folding and whitespace collapse."""
    assert content_hash("a  b\n c") == content_hash("a b c")
    assert content_hash("a b c") == content_hash("A B C")
    assert content_hash("ﬁle Ｘ") == content_hash("file x")  # ligature and full-width X
    assert content_hash("a b c") != content_hash("a b c.")
    assert content_hash("limit 100") != content_hash("limit 500")


def test_derived_sizes_count_chars_tokens_and_sentences():
    assert sizes("One. Two! Three?") == {"chars": 16, "tokens": 4, "sentences": 3}
    assert sizes("no end mark") == {"chars": 11, "tokens": 3, "sentences": 1}


def test_cue_set_is_the_lower_cased_words_of_tags_entities_and_place():
    assert cue_set(["Deploy"], ["Alice Smith"], "Release-Train") == {
        "deploy",
        "alice",
        "smith",
        "release-train",
    }


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_a_blank_label_is_refused_naming_its_place_not_dropped(blank: str) -> None:
    """A blank tag was dropped without a word, so an update's [""] removed every tag; now it
    is refused with the field, the item and the fix (the caller may give its own fix)."""
    with pytest.raises(InvalidInput) as info:
        clean_labels(["ops", blank], "entities")
    assert info.value.field == "entities"
    assert str(info.value) == (
        f"entities: {blank!r} (item 2) is blank. Give it a word or leave it out."
    )
    with pytest.raises(InvalidInput, match=r"item 1\) is blank\. Say so\.$"):
        clean_labels([blank], "tags", "Say so.")
    # Spaces inside a label are folded, and a repeat is still kept once.
    assert clean_labels([" a  b ", "a b", "c"], "tags") == ["a b", "c"]


def test_a_label_refusal_names_its_place_and_says_none_were_cut() -> None:
    """Which item is not text or too long, as for a blank one; past 50 the refusal said "at
    most 50 are kept", as if the rest had been cut, when nothing is written."""
    with pytest.raises(InvalidInput, match=r"^tags: 7 \(item 2\) is not text\."):
        clean_labels(["ops", 7], "tags")
    with pytest.raises(InvalidInput, match=r"\(item 3\) is longer than 100 characters"):
        clean_labels(["a", "b", "x" * 101], "tags")
    with pytest.raises(InvalidInput) as info:
        clean_labels([f"t{i}" for i in range(51)], "tags")
    assert str(info.value) == "tags: 51 labels given; a memory holds at most 50. Pass fewer labels."


def test_link_with_an_unknown_relation_lists_the_relations():
    with pytest.raises(InvalidInput) as info:
        parse_link({"target": "abcdef12", "relation": "likes"})
    assert info.value.field == "links.relation"
    assert "refines" in str(info.value)


@pytest.mark.parametrize("owner", ["alice\n", "alice@x\n", "\nalice", "alice\r"])
def test_an_owner_with_a_line_break_is_refused(owner):
    """`$` matched before a trailing newline, so "alice\\n" passed as an owner
    (found by the hook's owner-rule property)."""
    with pytest.raises(InvalidInput):
        parse_owner(owner)
