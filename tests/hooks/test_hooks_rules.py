"""The hook's fast path repeats a few rules of the full code (it cannot import it in time):
each repetition is checked equal here, and the injection rule itself."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given, strategies as st

from nooa_mcp.__main__ import hook_arguments
from nooa_mcp.config import RecallSettings, default_store_path
from nooa_mcp.domain import injection
from nooa_mcp.domain.schema import IMPORTANCE
from nooa_mcp.domain.scope import parse_owner
from nooa_mcp.errors import InvalidInput
from nooa_mcp.hooks import paths, run
from nooa_mcp.storage import base, quick, sqlite


def test_the_quick_store_shares_the_stores_schema_revision_and_keyword_constants() -> None:
    """The hook's path holds no copies: it takes the store's own objects (a copy of equal
    value would pass an equality check and drift with the next edit of either)."""
    assert quick.SCHEMA_VERSION == sqlite.SCHEMA_VERSION
    assert quick.NEXT_REV is sqlite.NEXT_REV
    assert (quick.COMMON_FLOOR, quick.COMMON_SHARE) == (base.COMMON_FLOOR, base.COMMON_SHARE)
    assert quick.BM25 is sqlite.BM25
    for verb in (sqlite.SQLiteStore._keyword_candidates, quick.QuickStore.keyword_candidates):
        assert "KEYWORD_POOL" in inspect.getsource(verb)


def test_the_injection_rule_uses_the_shipped_recall_constants() -> None:
    shipped = RecallSettings()
    used = (injection.LAM, injection.MU, injection.WEAK)
    assert used == (shipped.lam, shipped.mu, shipped.weak_relevance)


@given(st.floats(min_value=0, max_value=10, allow_nan=False))
def test_importance_labels_match_the_ladder(value: float) -> None:
    assert injection.importance_label(value) == IMPORTANCE.label(value)


@given(st.text(max_size=20) | st.sampled_from(["a@b", "role", "r.1-x@i", "-x", "x@", "é", "a b"]))
def test_the_hook_accepts_exactly_the_owners_the_server_accepts(owner: str) -> None:
    try:
        parse_owner(owner)
        valid = owner != ""
    except InvalidInput:
        valid = False
    try:
        run._owner(owner)
        hook_valid = owner.strip() == owner and owner != ""
    except run.HookFailed:
        hook_valid = False
    assert hook_valid == valid


def test_the_default_store_is_the_servers_default_store(monkeypatch, tmp_path) -> None:
    assert paths.default_store() == str(default_store_path())
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert paths.default_store() == str(default_store_path())


def test_a_project_is_the_nearest_folder_with_nooa_or_git(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    repo = tmp_path / "src" / "billing"
    (repo / ".git").mkdir(parents=True)
    (repo / "api" / "v2").mkdir(parents=True)
    assert paths.find_project(str(repo / "api" / "v2")) == (str(repo), "billing")
    loose = tmp_path / "scratch"
    loose.mkdir()
    assert paths.find_project(str(loose)) == (str(loose), "scratch")
    assert paths.find_project(str(tmp_path / "home")) == ("", "")
    assert paths.find_project("relative/path") == ("", "")
    assert paths.find_project(str(tmp_path / "missing")) == ("", "")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["hook", "user-prompt"], {"event": "user-prompt"}),
        (
            ["--store", "s.db", "--owner=me@code", "--json", "hook", "session-start"],
            {"event": "session-start", "store": "s.db", "owner": "me@code"},
        ),
        (
            ["hook", "user-prompt", "--url", "http://127.0.0.1:8765"],
            {"event": "user-prompt", "url": "http://127.0.0.1:8765"},
        ),
        (["--reference-root", "/x", "hook", "user-prompt"], {"event": "user-prompt"}),
        (["hook", "user-prompt", "--help"], None),
        (["hook", "stop"], None),
        (["hooks", "install"], None),
        (["--verbose", "hook", "user-prompt"], None),
        (["--store"], None),
        (["recall", "hook"], None),
        ([], None),
    ],
)
def test_the_console_script_answers_plain_hook_invocations_before_importing_the_cli(
    argv: list[str], expected: dict | None
) -> None:
    assert hook_arguments(argv) == expected


RULE = dict(weak=False, stale=False, superseded=False, shared=0, prompt_words=10, overlap=0.0)


@given(
    weak=st.booleans(),
    stale=st.booleans(),
    superseded=st.booleans(),
    shared=st.integers(0, 10),
    prompt_words=st.integers(0, 40),
    overlap=st.floats(0, 1),
    cos=st.none() | st.floats(-1, 1),
)
def test_nothing_weak_stale_or_superseded_is_ever_injected(**case) -> None:
    if case["weak"] or case["stale"] or case["superseded"]:
        assert not injection.relevant(**case)


def test_relevance_that_stands_on_its_own_is_what_gets_injected() -> None:
    assert not injection.relevant(**RULE)
    assert not injection.relevant(**{**RULE, "shared": 1})
    assert injection.relevant(**{**RULE, "shared": 2})
    assert injection.relevant(**{**RULE, "shared": 1, "prompt_words": 1})
    assert injection.relevant(**{**RULE, "overlap": 0.6})
    assert injection.relevant(**{**RULE, "cos": 0.36})  # λ·cos on the weak line
    assert not injection.relevant(**{**RULE, "cos": 0.30})


def test_shared_words_match_inflections_and_ignore_function_words() -> None:
    prompt = injection.content_words("Please deploy the invoices to staging")
    memory = injection.content_words("Deploying an invoice export to the staging cluster")
    assert injection.shared_words(prompt, memory) == {"deploy", "invoices", "staging"}
    assert "please" not in prompt and "the" not in prompt
    # A word that only begins with another is not it: one stem, not a prefix.
    planet = injection.content_words("The planet test plan")
    assert injection.shared_words({"plan", "testing"}, planet) == {"plan", "testing"}
    assert injection.shared_words({"plan"}, {"planet"}) == set()
    assert injection.shared_words({"upgrading"}, {"upgrade"}) == {"upgrading"}


def test_the_trust_list_lives_in_the_user_config_dir(monkeypatch, tmp_path) -> None:
    import platformdirs

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert paths.config_dir() == platformdirs.user_config_dir("nooa-mcp", appauthor=False)
    assert paths.trust_file() == str(tmp_path / "nooa-mcp" / "trusted-stores")
