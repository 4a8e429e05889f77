"""Shared material for the write, ranking, evaluation and CLI tests.

Only stable entry points are used here: the Memory facade, the click CLI and the console
script. Nothing from the store, recall or scoring modules.
"""

from __future__ import annotations

import inspect
import json
import shutil
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from nooa_mcp import Memory
from nooa_mcp.cli import main
from nooa_mcp.embeddings import HashEmbedder


@dataclass(frozen=True)
class ValueChange:
    """Two facts that differ only in one value, and a query made of each one's own words."""

    kind: str  # number, date, identifier, name or negation
    first: str
    second: str
    first_query: str
    second_query: str


#: The issue's "12 value changes": realistic facts whose value changed.
VALUE_CHANGES: tuple[ValueChange, ...] = (
    ValueChange(
        "number",
        "The API rate limit is 100 requests per minute",
        "The API rate limit is 500 requests per minute",
        "API rate limit 100",
        "API rate limit 500",
    ),
    ValueChange(
        "date",
        "Nightly backup runs at 02:00",
        "Nightly backup runs at 04:30",
        "nightly backup 02:00",
        "nightly backup 04:30",
    ),
    ValueChange(
        "identifier",
        "web-01 has IP 10.0.0.11",
        "web-02 has IP 10.0.0.12",
        "web-01 IP 10.0.0.11",
        "web-02 IP 10.0.0.12",
    ),
    ValueChange(
        "identifier",
        "JIRA-1234 tracks the login timeout on the mobile app",
        "JIRA-5678 tracks the login timeout on the mobile app",
        "JIRA-1234 login timeout",
        "JIRA-5678 login timeout",
    ),
    ValueChange(
        "negation",
        "The staging database is encrypted at rest",
        "The staging database is not encrypted at rest",
        "staging database encrypted at rest",
        "staging database not encrypted",
    ),
    ValueChange(
        "name",
        "Alice Chen is the on-call engineer for the payments service this week",
        "Bob Martins is the on-call engineer for the payments service this week",
        "Alice Chen on-call payments",
        "Bob Martins on-call payments",
    ),
    ValueChange(
        "number",
        "The production cluster runs Kubernetes 1.27",
        "The production cluster runs Kubernetes 1.29",
        "production cluster Kubernetes 1.27",
        "production cluster Kubernetes 1.29",
    ),
    ValueChange(
        "date",
        "The quarterly release is scheduled for 2026-03-15",
        "The quarterly release is scheduled for 2026-04-02",
        "quarterly release 2026-03-15",
        "quarterly release 2026-04-02",
    ),
    ValueChange(
        "number",
        "The maximum upload size for the document service is 25 MB",
        "The maximum upload size for the document service is 100 MB",
        "document service upload size 25 MB",
        "document service upload size 100 MB",
    ),
    ValueChange(
        "identifier",
        "The primary DNS server is ns1.example.com",
        "The primary DNS server is ns2.example.com",
        "primary DNS server ns1.example.com",
        "primary DNS server ns2.example.com",
    ),
    ValueChange(
        "name",
        "Application logs are shipped to Datadog",
        "Application logs are shipped to Splunk",
        "application logs Datadog",
        "application logs Splunk",
    ),
    ValueChange(
        "number",
        "Session tokens expire after 30 minutes",
        "Session tokens expire after 45 minutes",
        "session tokens expire 30 minutes",
        "session tokens expire 45 minutes",
    ),
)

#: Labels of `similar_to.differs_in` that fit each kind of change (a time of day may be read
#: as a date or a number, an address as an identifier or numbers).
FITTING_LABELS: dict[str, set[str]] = {
    "number": {"number"},
    "date": {"date", "number"},
    "identifier": {"identifier", "number"},
    "name": {"name", "identifier"},
    "negation": {"negation"},
}

DIFFERS_IN = {"number", "date", "identifier", "name", "negation"}


#: What makes ledger lines near-identical for the bag-of-words HashEmbedder as well.
LEDGER_DETAIL = (
    " via SEPA bank transfer to the main operating account of the company, booked by the"
    " finance team"
)


def ledger_lines(n: int, detail: str = "") -> list[str]:
    """`n` distinct, near-identical ledger lines: what a bookkeeping import looks like."""
    customers = ("ACME", "Globex", "Initech", "Umbrella", "Hooli")
    start = datetime(2026, 3, 1, tzinfo=UTC)
    lines = []
    for i in range(n):
        day = start + timedelta(days=i // 10)
        amount = 50 + (i * 37) % 950 + (i % 100) / 100
        lines.append(
            f"{day:%Y-%m-%d} invoice #{1001 + i} paid {amount:.2f} EUR by {customers[i % 5]}"
            + detail
        )
    assert len(set(lines)) == n
    return lines


def jsonl(items: list[dict]) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


# --------------------------------------------------------------------------- the CLI


class Cli:
    """`nooa-mcp` run in-process by click's CliRunner against one store file."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None) -> Result:
        return self.runner.invoke(main, list(args), input=input, catch_exceptions=False)

    def json(self, *args: str, input: str | None = None):
        result = self(*args, input=input)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)


def clean_env(monkeypatch: pytest.MonkeyPatch, store: Path) -> None:
    """Only this test's store: no owner, root, grant or tokens from the caller's shell."""
    for name in ("NOOA_OWNER", "NOOA_REFERENCE_ROOT", "NOOA_READ", "NOOA_TOKENS", "NOOA_JSON"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NOOA_STORE", str(store))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def use_hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Memory the CLI opens without an embedder gets the fast deterministic one.

    Only `Memory.open` (the stable facade) is wrapped; should a command stop going through it,
    that command falls back to the real model: slower, never wrong.
    """
    real = inspect.getattr_static(Memory, "open").__func__

    def open_with_hash(cls, path=None, *, owner=None, embedder=None, settings=None):
        return real(cls, path, owner=owner, embedder=embedder or HashEmbedder(), settings=settings)

    monkeypatch.setattr(Memory, "open", classmethod(open_with_hash))


def hash_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The CLI on a fresh store, with the fast embedder."""
    store = tmp_path / "cli.sqlite"
    clean_env(monkeypatch, store)
    use_hash_embedder(monkeypatch)
    return Cli(store)


def model_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The CLI on a fresh store, with the product's own embedder (the real model)."""
    store = tmp_path / "cli.sqlite"
    clean_env(monkeypatch, store)
    return Cli(store)


def console_script() -> str:
    """The installed `nooa-mcp` executable (beside this interpreter, else on PATH)."""
    beside = Path(sys.executable).parent / "nooa-mcp"
    found = str(beside) if beside.exists() else shutil.which("nooa-mcp")
    if found is None:
        pytest.fail("the nooa-mcp console script is not installed: run `pip install -e .`")
    return found


def dumped(model) -> dict:
    """A reply model (or dict) as plain JSON-shaped data."""
    return model.model_dump(mode="json") if hasattr(model, "model_dump") else dict(model)
