"""Owners, grants and read scopes (DESIGN.md §10), each refusal pinned to its sentence.

What a reader may see is decided by `Scope.allows` and `Actor.scope`; these tests check them
on owners inside and outside the scope (present and absent, so over-filtering fails too), and
pin the sentences that refuse a bad owner, grant or scope word.
"""

from __future__ import annotations

import pytest

from nooa_mcp.domain.scope import (
    ALL_ROLES,
    Actor,
    Scope,
    owner_from_client_name,
    owner_role,
    parse_owner,
    parse_roles,
)
from nooa_mcp.errors import InvalidInput

OWNER_FIX = (
    "Use role or role@instance; each part is 1–64 ASCII letters, digits, '.' or '-', "
    "starting with a letter or digit."
)
OWNERS = ["", "alice", "alice@laptop", "alice@phone", "bob", "bob@ci", "carol@x"]


def seen(scope: Scope) -> list[str]:
    return [o for o in OWNERS if scope.allows(o)]


# --------------------------------------------------------------------------- owners


@pytest.mark.parametrize(
    ("owner", "parts"),
    [
        ("", ("", "")),
        ("alice", ("alice", "")),
        ("alice@laptop", ("alice", "laptop")),
        ("a.b-c@9.x-y", ("a.b-c", "9.x-y")),
        ("r" * 64 + "@" + "i" * 64, ("r" * 64, "i" * 64)),
    ],
)
def test_valid_owners_split_into_role_and_instance(owner, parts):
    assert parse_owner(owner) == parts


@pytest.mark.parametrize(
    "owner", ["alice@", "@laptop", "-alice", "alice@.x", "a@b@c", "r" * 65, "a@" + "i" * 65, "a b"]
)
def test_invalid_owners_are_refused_naming_the_field_and_the_alphabet(owner):
    with pytest.raises(InvalidInput) as exc:
        parse_owner(owner, "owners[2]")
    assert str(exc.value) == f"owners[2]: {owner!r} is not a valid owner. {OWNER_FIX}"


def test_an_owner_that_is_not_text_is_refused():
    with pytest.raises(InvalidInput) as exc:
        parse_owner(7)  # type: ignore[arg-type]
    assert str(exc.value) == f"owner: 7 is not an owner. {OWNER_FIX}"


def test_the_role_of_an_owner_is_the_part_before_the_at():
    assert [owner_role(o) for o in ("alice@laptop", "alice", "")] == ["alice", "alice", ""]


@pytest.mark.parametrize(
    ("name", "owner"),
    [
        (None, "agent"),
        ("", "agent"),
        ("  ", "agent"),
        ("!!!", "agent"),
        ("Claude Desktop", "claude-desktop"),
        ("..Cursor.App..", "cursor.app"),
        ("v1.2 beta", "v1.2-beta"),
        ("x" * 63 + " tail", "x" * 63),
        ("y" * 80, "y" * 64),
    ],
)
def test_a_client_name_becomes_a_valid_owner_of_at_most_64_characters(name, owner):
    assert owner_from_client_name(name) == owner
    assert parse_owner(owner) == (owner, "")


# --------------------------------------------------------------------------- grants


def test_grants_are_read_from_a_comma_list_or_a_list_ignoring_blanks():
    assert parse_roles(None) == frozenset()
    assert parse_roles("bob, carol,,  ") == frozenset({"bob", "carol"})
    assert parse_roles([" bob ", "", "*"]) == frozenset({"bob", ALL_ROLES})
    assert parse_roles("*") == frozenset({"*"})


def test_a_grant_naming_an_instance_is_refused():
    with pytest.raises(InvalidInput) as exc:
        parse_roles("bob, alice@laptop", "NOOA_READ")
    assert str(exc.value) == (
        "NOOA_READ: 'alice@laptop' names an instance. Grant roles (no @instance), or '*'."
    )


def test_a_grant_that_is_not_a_role_is_refused_naming_the_field():
    with pytest.raises(InvalidInput) as exc:
        parse_roles(["bob", 3])
    assert str(exc.value) == "read: 3 is not a role. List role names, or '*'."
    with pytest.raises(InvalidInput) as exc:
        parse_roles("b!d", "tokens[0].read")
    assert str(exc.value) == f"tokens[0].read: 'b!d' is not a valid owner. {OWNER_FIX}"


# --------------------------------------------------------------------------- scopes


def test_a_scope_for_one_owner_sees_that_owner_and_shared_rows_only():
    scope = Scope(owner="alice@laptop")
    assert seen(scope) == ["", "alice@laptop"]
    assert scope.describe() == ["alice@laptop", "(shared)"]
    assert not scope.everyone


def test_a_scope_of_roles_sees_every_instance_of_those_roles_and_shared_rows():
    scope = Scope(frozenset({"bob", "alice"}))
    assert seen(scope) == ["", "alice", "alice@laptop", "alice@phone", "bob", "bob@ci"]
    assert scope.describe() == ["alice", "bob", "(shared)"]
    assert not scope.everyone


def test_a_scope_without_roles_sees_everyone_and_an_empty_one_only_shared_rows():
    assert seen(Scope(None)) == OWNERS
    assert Scope(None).everyone
    assert Scope(None).describe() == ["*"]
    assert seen(Scope()) == [""]
    assert not Scope().everyone
    assert Scope().describe() == ["(shared)"]
    assert not Scope(None, owner="bob").everyone


# --------------------------------------------------------------------------- actors


def test_an_actor_without_grants_reads_its_own_role_for_every_word_but_instance():
    alice = Actor("alice@laptop")
    assert alice.role == "alice"
    for word in (None, "", "mine", "  mine  ", "*", "bob", "bob@ci", "alice"):
        assert seen(alice.scope(word)) == ["", "alice", "alice@laptop", "alice@phone"], word
    assert seen(alice.scope("instance")) == ["", "alice@laptop"]
    assert seen(alice.scope("alice@phone")) == ["", "alice@phone"]
    assert seen(alice.own) == ["", "alice", "alice@laptop", "alice@phone"]
    assert seen(alice.effective()) == ["", "alice", "alice@laptop", "alice@phone"]
    assert alice.readable_roles() == frozenset({"alice"})
    assert alice.may_read_role("alice") and not alice.may_read_role("bob")


def test_a_grant_widens_star_and_lets_a_scope_word_name_the_granted_role():
    alice = Actor("alice@laptop", frozenset({"bob"}))
    assert seen(alice.scope("*")) == ["", "alice", "alice@laptop", "alice@phone", "bob", "bob@ci"]
    assert seen(alice.scope("bob")) == ["", "bob", "bob@ci"]
    assert seen(alice.scope("bob@ci")) == ["", "bob@ci"]
    assert seen(alice.scope("carol@x")) == ["", "alice", "alice@laptop", "alice@phone"]
    assert seen(alice.scope("mine")) == ["", "alice", "alice@laptop", "alice@phone"]
    assert seen(alice.effective()) == seen(alice.scope("*"))
    assert alice.may_read_role("bob") and not alice.may_read_role("carol")


def test_a_star_grant_reads_every_role():
    admin = Actor("admin", frozenset({ALL_ROLES}))
    assert admin.readable_roles() is None
    assert seen(admin.scope("*")) == OWNERS
    assert seen(admin.effective()) == OWNERS
    assert seen(admin.scope("carol")) == ["", "carol@x"]
    assert admin.may_read_role("anyone")
    assert seen(admin.scope()) == [""]  # its own role, "admin", owns nothing here


def test_the_shared_owner_reads_shared_rows_for_mine_and_instance():
    shared = Actor("")
    assert seen(shared.scope("instance")) == [""]
    assert seen(shared.scope("mine")) == [""]


def test_a_scope_word_that_is_no_owner_is_refused_in_one_sentence():
    with pytest.raises(InvalidInput) as exc:
        Actor("alice").scope("everyone!")
    assert str(exc.value) == (
        "scope: 'everyone!' is not a scope. "
        "Use mine, instance, * or an owner such as role or role@instance."
    )


@pytest.mark.parametrize(
    ("name", "owner"),
    [("--My Agent..", "my-agent"), (".-x-.", "x"), ("...", "agent"), ("", "agent")],
)
def test_a_client_name_becomes_an_owner_without_leading_or_trailing_dots_or_dashes(
    name: str, owner: str
) -> None:
    assert owner_from_client_name(name) == owner
