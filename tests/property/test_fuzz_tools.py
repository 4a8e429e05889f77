"""Property-based fuzzing of every tool, resource and prompt through mcp.Client.

Hypothesis builds argument dicts for each tool from valid values, hostile values (FTS5 syntax,
huge strings, unicode, lone surrogates, NUL bytes, negative/NaN/huge numbers, unknown ids and
prefixes, wrong enum labels) and arbitrary JSON, drops required arguments and adds unknown ones.
Every call must come back either as a result or as an error that names the argument at fault;
no call may crash the server (the SDK's bare "Error executing tool X" reply, or an exception
logged by the server) and no reply may carry a stack trace or a library's internals.

Two oracles do not depend on refusals: every third example per tool is followed by valid calls
(on a memory the harness writes itself) that must all succeed, and the share of fuzzed calls
answered per tool must stay above a measured floor; a server refusing everything fails both.
Reply sizes are counted with the bundled MiniLM tokenizer against the 25k clients refuse
(DESIGN.md §13.4).

Profiles (NOOA_FUZZ_PROFILE): `ci` (default, ~10,300 calls), `long` (~114,000) and `smoke`.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings, strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextResourceContents
from tokens_support import CLIENT_CAP, real_tokens

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

PROFILE = os.environ.get("NOOA_FUZZ_PROFILE", "ci")
EXAMPLES = {"smoke": 20, "ci": 180, "long": 2000}[PROFILE]
BATCH = 8  # calls per generated example
settings.register_profile(
    "nooa-fuzz",
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile("nooa-fuzz")

# --------------------------------------------------------------------------- the oracle

# What a stack trace or a library's internals look like in a reply.
_LEAKS = re.compile(
    r"Traceback|File \"|line \d+, in|sqlite3|OperationalError|IntegrityError|aiosqlite|"
    r"KeyError|AttributeError|TypeError|IndexError|UnicodeEncodeError|numpy|site-packages"
)


@dataclass
class Tally:
    calls: int = 0
    ok: int = 0
    refused: int = 0
    crashes: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)
    oversized: list[str] = field(default_factory=list)
    #: Valid calls sent between the fuzzed ones that did not succeed (must stay empty).
    good_failed: list[str] = field(default_factory=list)
    good: int = 0
    #: Fuzzed calls per tool and how many of them were answered (not refused).
    by_tool: dict[str, list[int]] = field(default_factory=dict)


TALLY = Tally()


class CrashLog(logging.Handler):
    """Collects what the SDK logs when a handler raises something unexpected."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(self.format(record))


def names_a_field(text: str, fields: set[str]) -> bool:
    """True when some line of the error starts with one of the argument names.

    NooaError messages start `field: problem`; the SDK's validation errors list each failing
    location (`k`, `links.0.target`, `importance.float`) on a line of its own.
    """
    body = re.sub(r"^Error executing tool \w+: ", "", text)
    for line in body.splitlines():
        head = re.split(r"[:.\s\[]", line.strip(), maxsplit=1)[0]
        if head in fields:
            return True
    return False


def judge_tool(tool: str, args: dict[str, Any], result: CallToolResult, fields: set[str]) -> None:
    TALLY.calls += 1
    counts = TALLY.by_tool.setdefault(tool, [0, 0])
    counts[0] += 1
    counts[1] += not result.is_error
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    where = f"{tool}({_show(args)}) -> {text[:300]!r}"
    if _LEAKS.search(text):
        TALLY.leaks.append(where)
    if result.is_error:
        TALLY.refused += 1
        # An argument the tool does not take is refused by its own name (quoted when it is
        # not an identifier).
        passed = {k if k.isidentifier() else repr(k[:40]) for k in args}
        if text.strip() == f"Error executing tool {tool}":
            TALLY.crashes.append(where)
        elif not names_a_field(text, fields | passed):
            TALLY.unnamed.append(where)
        return
    TALLY.ok += 1
    structured = json.dumps(result.structured_content or {}, ensure_ascii=False)
    # Counted with the real tokenizer against the 25k cap clients enforce. Short replies skip the
    # count: no character makes more than three tokens (a Hangul syllable splits into three jamo).
    if 3 * (len(text) + len(structured)) > CLIENT_CAP:
        size = real_tokens(text) + real_tokens(structured)
        if size > CLIENT_CAP:
            TALLY.oversized.append(f"{where} ({size} tokens)")


def _show(args: Any) -> str:
    shown = repr(args)
    return shown if len(shown) < 300 else shown[:300] + "…"


# --------------------------------------------------------------------------- the server


@dataclass
class Harness:
    portal: BlockingPortal
    client: Client
    ids: list[str]
    fields: dict[str, set[str]]
    schemas: dict[str, dict[str, Any]]
    crash_log: CrashLog

    def call(self, tool: str, args: dict[str, Any]) -> None:
        result = self.portal.call(self.client.call_tool, tool, args)
        judge_tool(tool, args, result, self.fields.get(tool, set()))

    def call_all(self, tool: str, batch: list[dict[str, Any]]) -> None:
        """Send a batch at once on the one connection (the calls also race each other)."""

        async def send() -> list[CallToolResult]:
            results: list[CallToolResult | None] = [None] * len(batch)

            async def one(i: int) -> None:
                results[i] = await self.client.call_tool(tool, batch[i])

            async with anyio.create_task_group() as tg:
                for i in range(len(batch)):
                    tg.start_soon(one, i)
            return [r for r in results if r is not None]

        for args, result in zip(batch, self.portal.call(send), strict=True):
            judge_tool(tool, args, result, self.fields.get(tool, set()))

    def known_good(self, tool: str) -> None:
        """Valid calls of `tool`, sent between fuzzed batches: each must succeed.

        A server that refused everything would pass every other check in this file; these
        calls (on a memory the harness writes itself, so the fuzzer cannot have archived or
        rewritten it) are the independent proof that it still answers.
        """
        TALLY.good += 1
        n = TALLY.good
        fresh = self._good_call("memory_author", {"content": f"Known good note {n} on gauges."})
        if fresh is None:
            return
        memory_id = fresh["id"]
        calls: dict[str, list[dict[str, Any]]] = {
            "memory_author": [
                {"content": f"Known good skill {n}.", "type": "skill", "importance": "HIGH"},
                {"content": f"Known good episode {n}.", "type": "episode", "tags": ["good"]},
            ],
            "memory_recall": [
                {"query": f"known good note {n} gauges", "k": 5},
                {"query": "staging database", "types": ["info"], "hops": 0},
            ],
            "memory_explain": [
                {"query": f"known good note {n}"},
                {"memory_id": memory_id},
                {"query": "gauges", "memory_id": memory_id},
            ],
            "memory_update": [
                {"memory_id": memory_id, "importance": "LOW", "tags": ["checked"]},
                {"memory_id": memory_id[:8], "title": f"Gauge note {n}"},
            ],
            "todo": [
                {"action": "add", "content": f"Known good task {n}."},
                {"action": "list"},
            ],
            "intent": [
                {"action": "add", "content": f"Known good reminder {n}.", "cue": "gauges"},
                {"action": "list"},
                {"action": "check"},
            ],
        }
        for args in calls.get(tool, []):
            self._good_call(tool, args)

    def _good_call(self, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
        result = self.portal.call(self.client.call_tool, tool, args)
        if result.is_error:
            text = "\n".join(getattr(c, "text", "") for c in result.content)
            TALLY.good_failed.append(f"{tool}({_show(args)}) -> {text[:300]!r}")
            return None
        return result.structured_content or {}

    def read(self, uri: str) -> None:
        TALLY.calls += 1
        try:
            result = self.portal.call(self.client.read_resource, uri)
        except MCPError as exc:
            TALLY.refused += 1
            message = exc.error.message
            where = f"read {uri[:200]!r} -> {message[:300]!r}"
            if _LEAKS.search(message):
                TALLY.leaks.append(where)
            if message.strip() == f"Error reading resource {uri}":
                TALLY.crashes.append(where)
            elif not (
                message.startswith(("Unknown resource", "Resource not found"))
                or names_a_field(message, {"memory_id", "cursor", "limit", "offset"})
            ):
                TALLY.unnamed.append(where)
            return
        TALLY.ok += 1
        for content in result.contents:
            assert isinstance(content, TextResourceContents)
            if _LEAKS.search(content.text) and "Traceback" in content.text:
                TALLY.leaks.append(f"read {uri[:200]!r}")
            if 3 * len(content.text) > CLIENT_CAP and real_tokens(content.text) > CLIENT_CAP:
                TALLY.oversized.append(f"read {uri[:200]!r} ({len(content.text)} chars)")

    def prompt(self, name: str, args: dict[str, Any]) -> None:
        TALLY.calls += 1
        try:
            self.portal.call(self.client.get_prompt, name, args)
        except MCPError as exc:
            TALLY.refused += 1
            if _LEAKS.search(exc.error.message):
                TALLY.leaks.append(f"prompt {name} -> {exc.error.message[:300]!r}")
            # The SDK logs its own refusal of an unknown prompt name with a traceback (its
            # get_prompt raises ValueError); the client still gets a clean error. Not ours.
            self.crash_log.records = [r for r in self.crash_log.records if "in get_prompt" not in r]
            return
        TALLY.ok += 1


async def _seed(client: Client) -> list[str]:
    ids = []
    seeds: list[tuple[str, dict[str, Any]]] = [
        ("memory_author", {"content": "The staging database restarts at midnight."}),
        ("memory_author", {"content": "Use ruff for lint.", "type": "skill", "tags": ["lint"]}),
        ("memory_author", {"content": "Deploy failed on Friday.", "type": "episode"}),
        ("memory_author", {"content": "See the notes", "references": ["file:docs/notes.md"]}),
        ("todo", {"action": "add", "content": "Rotate the API keys."}),
        ("todo", {"action": "add", "content": "Write the release notes."}),
        ("intent", {"action": "add", "content": "Mention the freeze.", "cue": "deploy"}),
    ]
    for tool, args in seeds:
        result = await client.call_tool(tool, args)
        assert not result.is_error, result.content
        ids.append(result.structured_content["id"])
    return ids


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    base = tmp_path_factory.mktemp("fuzz")
    root = base / "files"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "notes.md").write_text("Release notes: the freeze starts Friday.\n")
    (base / "secret.txt").write_text("outside the root\n")
    settings_ = Settings(store=base / "memory.sqlite", owner="fuzz@box", reference_root=root)
    crash_log = CrashLog()
    logging.getLogger("mcp").addHandler(crash_log)
    try:
        with start_blocking_portal(backend="asyncio") as portal:
            client = Client(build_server(settings_, embedder=HashEmbedder()), cache=None)
            with portal.wrap_async_context_manager(client) as c:
                tools = portal.call(c.list_tools).tools
                schemas = {t.name: t.input_schema for t in tools}
                fields = {name: set(s.get("properties", {})) for name, s in schemas.items()}
                # The facade names an intent's fire_at/cue/every_hours together as "trigger".
                fields["intent"] = fields.get("intent", set()) | {"trigger"}
                ids = portal.call(_seed, c)
                yield Harness(portal, c, ids, fields, schemas, crash_log)
    finally:
        logging.getLogger("mcp").removeHandler(crash_log)


# --------------------------------------------------------------------------- strategies

FTS5 = [
    "NEAR(staging database, 2)",
    '"unterminated',
    "title:staging",
    "content:* OR",
    "a AND OR NOT b",
    "*",
    "^staging",
    "{title content}: midnight",
    "staging*",
    '""',
    "(",
    ")",
    "-",
    "NOT",
    "'); DROP TABLE memories;--",
    "memories_fts MATCH 'x'",
    "%_%",
    "\\",
]
_HUGE = ["word " * 25_000, "word " * 125_000, "x" * 200_001, "🧠" * 30_000]
HOSTILE_TEXT = st.one_of(
    st.sampled_from(FTS5),
    st.text(max_size=20),
    st.sampled_from(
        [
            "",
            " ",
            "\x00",
            "a\x00b",
            "\ud800",  # a lone surrogate: valid in JSON escapes, not in UTF-8
            "x\udfff y",
            "\u202e\u200b\ufeff",
            "🧠" * 300,
            "Ａｄｍｉｎ",
            "e\u0301\u0301\u0301",
            "\n\r\t",
            "0123456789abcdef0123456789abcdef",
            "None",
            "null",
            "-1",
            "NaN",
        ]
    ),
    st.sampled_from(_HUGE),  # 100k–600k characters
)
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 51, 2**63, -(2**63), 0.5, -0.0, float("nan"), float("inf")]),
    st.booleans(),
)
JSONISH = st.one_of(
    st.none(),
    st.sampled_from([[], {}, [None], {"a": 1}, [[[]]], {"": ""}, {"target": None}]),
    st.lists(st.one_of(NUMBERS, HOSTILE_TEXT), max_size=3),
    st.dictionaries(st.text(max_size=5), st.one_of(NUMBERS, HOSTILE_TEXT), max_size=2),
)
LABELS = ["CRITICAL", "HIGH", "MEDIUM", "LOW", "TRIVIAL", "PIVOTAL", "CERTAIN", "STRONG", "WEAK"]
TYPES = ["info", "skill", "episode", "intent", "todo", "reflection", "scratch"]
RELATIONS = ["derived_from", "created_by", "causes", "refines", "supports", "contradicts"]
RELATIONS += ["related", "precedes", "part_of", "triggers"]
SCOPES = ["mine", "instance", "*", "fuzz", "fuzz@box", "other", "other@x", "a@b@c", "%", "_"]
DATES = st.one_of(
    st.datetimes().map(lambda d: d.isoformat()),
    st.sampled_from(["2026-13-45", "yesterday", "0000-00-00T00:00:00", "9999-12-31T23:59:59Z"]),
)


def loose(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A valid value most of the time, otherwise something hostile of any type."""
    return st.one_of(strategy, strategy, HOSTILE_TEXT, NUMBERS, JSONISH)


def ident(ids: list[str]) -> st.SearchStrategy[Any]:
    known = st.sampled_from(ids)
    return st.one_of(
        known,
        known.map(lambda i: i[:8]),
        st.tuples(known, st.integers(0, 32)).map(lambda p: p[0][: p[1]]),
        known.map(str.upper),
        st.text("0123456789abcdef", min_size=6, max_size=40),
        HOSTILE_TEXT,
        NUMBERS,
    )


def label(values: list[str]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(values),
        st.sampled_from(values).map(str.lower),
        st.sampled_from(values).map(lambda v: v + "X"),
        NUMBERS,
        HOSTILE_TEXT,
    )


def tool_args(
    tool: str, ids: list[str], schema: dict[str, Any] | None = None
) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for `tool`: each parameter valid, hostile or absent; sometimes extras.

    With the tool's input schema, every parameter it declares is fuzzed (a parameter this
    file does not know gets hostile values of any type) and its required list is used.
    """
    link = st.fixed_dictionaries(
        {"target": ident(ids), "relation": label(RELATIONS)},
        optional={"weight": label(["STRONG", "MODERATE", "WEAK"])},
    )
    links = loose(st.lists(loose(link), max_size=3))
    tags = loose(st.lists(loose(st.text(max_size=12)), max_size=4))
    text = loose(st.text(min_size=1, max_size=60))
    params: dict[str, st.SearchStrategy[Any]] = {
        "memory_author": {
            "content": text,
            "type": label(TYPES),
            "title": text,
            "importance": label(LABELS),
            "salience": label(["PIVOTAL", "NOTABLE", "ROUTINE", "NONE"]),
            "confidence": label(["CERTAIN", "CONFIDENT", "TENTATIVE", "UNCERTAIN"]),
            "tags": tags,
            "entities": tags,
            "place_or_task": text,
            "references": loose(
                st.lists(
                    st.one_of(
                        st.sampled_from(
                            [
                                "file:docs/notes.md",
                                "file:../secret.txt",
                                "file:/etc/passwd",
                                "file:docs/../../secret.txt",
                                "file:docs\u2215..\u2215..\u2215secret.txt",
                                "file:%2e%2e/secret.txt",
                                "url:https://example.org",
                                "https://example.org/x",
                                "memory:" + ids[0][:8],
                                "memory:ffffffff",
                                "ftp:x",
                            ]
                        ),
                        HOSTILE_TEXT,
                    ),
                    max_size=3,
                )
            ),
            "links": links,
            "valid_from": loose(DATES),
            "valid_to": loose(DATES),
            "trigger": loose(
                st.fixed_dictionaries(
                    {},
                    optional={"fire_at": loose(DATES), "cue": text, "every_hours": NUMBERS},
                )
            ),
            "revive": loose(st.booleans()),
        },
        "memory_recall": {
            "query": text,
            "k": loose(st.integers(1, 50)),
            "scope": label(SCOPES),
            "types": loose(st.lists(label(TYPES), max_size=3)),
            "hops": loose(st.integers(0, 3)),
            "include_archived": loose(st.booleans()),
        },
        "memory_explain": {
            "query": text,
            "memory_id": ident(ids),
            "k": loose(st.integers(1, 50)),
            "scope": label(SCOPES),
            "hops": loose(st.integers(0, 3)),
        },
        "memory_update": {
            "memory_id": ident(ids),
            "content": text,
            "title": text,
            "importance": label(LABELS),
            "tags": tags,
            "status": label(["open", "done", "dropped"]),
            "links": links,
            "valid_to": loose(DATES),
            "forget": loose(st.just(False)),
        },
        "todo": {
            "action": label(["add", "list", "done", "drop", "reopen"]),
            "content": text,
            "todo_id": ident(ids),
            "title": text,
            "importance": label(LABELS),
            "include_closed": loose(st.booleans()),
        },
        "intent": {
            "action": label(["add", "list", "check", "cancel"]),
            "content": text,
            "fire_at": loose(DATES),
            "cue": text,
            "every_hours": loose(st.floats(0.1, 100)),
            "intent_id": ident(ids),
            "importance": label(LABELS),
        },
        "memory_reflect": {
            "steps": loose(
                st.lists(label(["merge", "reconcile", "link", "rescore", "abstract", "prune"]))
            ),
        },
    }[tool]
    params["memory_id"] = params.get("memory_id", ident(ids))
    params["todo_id"] = params["intent_id"] = params["memory_id"]
    params.setdefault("text", text)
    params.setdefault("status", label(["open", "done", "dropped"]))
    params.setdefault("limit", loose(st.integers(1, 100)))
    required: list[str] = []
    if schema is not None:
        declared = schema.get("properties", {})
        params = {k: params.get(k, loose(HOSTILE_TEXT)) for k in declared}
        required = list(schema.get("required", []))
    base = st.fixed_dictionaries(
        {k: v for k, v in params.items() if k in required},
        optional={k: v for k, v in params.items() if k not in required},
    )
    extras = st.dictionaries(st.sampled_from(["owner", "id", "x", "", "__class__"]), JSONISH)
    dropped = st.sets(st.sampled_from(required)) if required else st.just(set())
    return st.tuples(base, extras, dropped, st.integers(0, 9)).map(
        lambda t: {
            **{k: v for k, v in t[0].items() if k not in t[2] or t[3] > 1},
            **(t[1] if t[3] == 0 else {}),
        }
    )


def batch(
    tool: str, ids: list[str], schema: dict[str, Any]
) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.lists(tool_args(tool, ids, schema), min_size=BATCH, max_size=BATCH)


# --------------------------------------------------------------------------- the properties


def _assert_clean(harness: Harness) -> None:
    assert TALLY.crashes == [], TALLY.crashes[:3]
    assert harness.crash_log.records == [], harness.crash_log.records[:1]
    assert TALLY.leaks == [], TALLY.leaks[:3]
    assert TALLY.unnamed == [], TALLY.unnamed[:3]
    assert TALLY.oversized == [], TALLY.oversized[:3]
    assert TALLY.good_failed == [], TALLY.good_failed[:3]


TOOLS = ["memory_author", "memory_recall", "memory_explain", "memory_update", "todo", "intent"]
#: The least share of fuzzed calls per tool that must be answered. Measured on six ci runs
#: (the tally line this file prints; ranges): intent 0.02–0.06, memory_author 0.16–0.19,
#: memory_explain 0.0097–0.06, memory_recall 0.17–0.24, memory_reflect 0.50–1.00,
#: memory_update 0.13–0.21, todo 0.01–0.02; a seventh (a fresh clone, 2026-12-01) had todo
#: at 0.0007, 1 of ~1,440, with the others in range. Generation is not seeded and not
#: independent from call to call (hypothesis mutates what it found), so a tool answering
#: ~1% is not held to a share: intent, memory_explain and todo answer known_good's valid
#: calls instead, and every fuzzed call together must be answered at ANSWERED_OVERALL (seen
#: 0.137). The floors here are about a third of the lowest share seen. memory_update's
#: answered share was mostly calls that named no change (an id alone, or with an empty list of
#: links), answered "Updated …: nothing"; those are refused now (2026-12-05: 3 of 1,440 answered),
#: so memory_update answers known_good's valid calls instead, like intent and todo.
ANSWERED_FLOOR: dict[str, float] = {
    "memory_author": 0.05,
    "memory_recall": 0.06,
    "memory_reflect": 0.15,
}
ANSWERED_OVERALL = 0.05


def _assert_answered_share(tool: str) -> None:
    """The share of `tool`'s fuzzed calls answered is at least its floor (checked in the test
    that made them, so it holds however the module's tests are shared between processes)."""
    if PROFILE != "smoke" and tool in ANSWERED_FLOOR:  # too few calls there for a share
        made, answered = TALLY.by_tool[tool]
        assert answered / max(made, 1) >= ANSWERED_FLOOR[tool], (tool, answered, made)


@pytest.mark.parametrize("tool", TOOLS)
def test_fuzzed_tool_calls_never_crash_and_name_the_field(harness: Harness, tool: str) -> None:
    @FUZZ
    @given(calls=batch(tool, harness.ids, harness.schemas[tool]))
    def run(calls: list[dict[str, Any]]) -> None:
        harness.call_all(tool, calls)
        examples.append(1)
        if len(examples) % 3 == 1:  # every third example: valid calls must all succeed
            harness.known_good(tool)
        _assert_clean(harness)

    examples: list[int] = []
    good_before = TALLY.good

    run()
    # Its valid calls ran between the fuzzed batches, and enough fuzzed calls were answered.
    assert TALLY.good - good_before >= EXAMPLES // 3
    _assert_answered_share(tool)


def test_fuzzed_reflect_calls_never_crash(harness: Harness) -> None:
    @settings(FUZZ, max_examples=max(EXAMPLES // 10, 10))
    @given(args=tool_args("memory_reflect", harness.ids, harness.schemas["memory_reflect"]))
    def run(args: dict[str, Any]) -> None:
        harness.call("memory_reflect", args)
        _assert_clean(harness)

    run()
    _assert_answered_share("memory_reflect")


URIS = [
    "memory://memories/{id}",
    "memory://memories/{id}?offset={x}",
    "memory://memories/{id}/access-log",
    "memory://memories/{id}/access-log?cursor={x}&limit={y}",
    "memory://archived",
    "memory://archived?cursor={x}&limit={y}",
    "memory://archived/{id}",
    "memory://access-log?cursor={x}&limit={y}",
    "memory://todos?cursor={x}&limit={y}",
    "memory://stats",
    "memory://context",
    "memory://{x}",
    "file:///etc/passwd",
]


def test_fuzzed_resource_reads_never_crash(harness: Harness) -> None:
    piece = st.one_of(
        st.integers(-5, 10**20).map(str),
        HOSTILE_TEXT.map(lambda s: s[:200]),
        st.just(""),
    )

    uri = st.builds(
        lambda template, i, x, y: template.format(id=i, x=x, y=y),
        st.sampled_from(URIS),
        ident(harness.ids).map(str),
        piece,
        piece,
    )

    @FUZZ
    @given(uris=st.lists(uri, min_size=BATCH, max_size=BATCH))
    def run(uris: list[str]) -> None:
        for one in uris:
            # The client cannot put a lone surrogate into a URI; the server never sees one.
            harness.read(one.encode("utf-8", "replace").decode())
        _assert_clean(harness)

    run()


def test_fuzzed_prompts_and_unknown_tools_never_crash(harness: Harness) -> None:
    @settings(FUZZ, max_examples=max(EXAMPLES // 2, 10))
    @given(
        name=st.sampled_from(["memory_guide", "session_start", "reflect", "nope", ""]),
        args=st.dictionaries(st.text(max_size=8), st.text(max_size=30), max_size=3),
        tool=st.one_of(st.sampled_from(["memory_forget", "", "MEMORY_AUTHOR"]), st.text()),
    )
    def run(name: str, args: dict[str, str], tool: str) -> None:
        # The prompts take no arguments; the SDK itself logs an exception (and answers
        # "Error rendering prompt") when given some, so only unknown names get arguments.
        known = name in ("memory_guide", "session_start", "reflect")
        harness.prompt(name, {} if known else args)
        TALLY.calls += 1
        result = harness.portal.call(harness.client.call_tool, tool, {"x": 1})
        assert result.is_error
        text = result.content[0].text
        assert not _LEAKS.search(text), text
        _assert_clean(harness)

    run()


def test_the_fuzzed_calls_add_up(harness: Harness) -> None:
    """Runs last in this module: the tally of every call above, for the CI log.

    Under pytest-xdist the tests above may run in another process, with a tally of its own:
    each checks its own tool's share, and the totals are checked here when every tool ran in
    this process.
    """
    shares = {t: ok / max(n, 1) for t, (n, ok) in sorted(TALLY.by_tool.items())}
    print(
        f"\nfuzz profile {PROFILE}: {TALLY.calls} calls, {TALLY.ok} answered, "
        f"{TALLY.refused} refused, {len(TALLY.crashes)} crashes, {len(TALLY.leaks)} leaks, "
        f"{TALLY.good} known-good rounds; answered share per tool: "
        + ", ".join(f"{t} {v:.2f}" for t, v in shares.items())
    )
    _assert_clean(harness)
    if os.environ.get("PYTEST_XDIST_WORKER") and not set(TALLY.by_tool) >= set(TOOLS):
        return  # the module was shared between processes: no process saw every call
    # Every tool ran, and its valid calls were all answered between the fuzzed batches.
    assert set(TALLY.by_tool) >= set(TOOLS)
    assert TALLY.good >= len(TOOLS) * (EXAMPLES // 3)
    # Hostile arguments are mostly refused; the share still answered is measured, not zero:
    # a server refusing everything fails here as well as in known_good.
    if PROFILE != "smoke":  # too few calls there for a share to mean much
        assert TALLY.ok / max(TALLY.calls, 1) >= ANSWERED_OVERALL, (TALLY.ok, TALLY.calls)
        for tool, floor in ANSWERED_FLOOR.items():
            assert shares.get(tool, 0.0) >= floor, (tool, shares.get(tool))


@pytest.mark.parametrize(
    "uri",
    [
        "memory://todos?cursor=99999999999999999999",
        "memory://archived?cursor=%C2%B2",
        "memory://access-log?cursor=²",
        "memory://memories/{id}?offset=²",
    ],
)
def test_cursors_and_offsets_the_fuzzer_broke_are_refused_by_name(
    harness: Harness, uri: str
) -> None:
    # Found by the fuzzer: an SQLite integer overflow, and digits int() does not read.
    with pytest.raises(MCPError) as caught:
        harness.portal.call(harness.client.read_resource, uri.format(id=harness.ids[0]))
    assert caught.value.error.message.startswith(("cursor", "offset"))
    assert harness.crash_log.records == []


def test_lone_surrogates_are_refused_by_name(harness: Harness) -> None:
    # Found by the fuzzer: JSON can carry "\ud800"; SQLite cannot store it.
    result = harness.portal.call(
        harness.client.call_tool, "memory_update", {"memory_id": harness.ids[0], "title": "\ud800"}
    )
    assert result.is_error
    assert "title: holds a lone surrogate" in result.content[0].text
    assert harness.crash_log.records == []


def test_an_intent_without_a_trigger_names_the_tools_own_argument(harness: Harness) -> None:
    result = harness.portal.call(
        harness.client.call_tool, "intent", {"action": "add", "content": "Remind me."}
    )
    assert result.is_error
    assert names_a_field(result.content[0].text, harness.fields["intent"])
