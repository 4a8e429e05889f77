"""A synthetic agent-session workload: what a coding agent would author and recall.

Deterministic for a seed. Used by `nooa-mcp eval replay` to populate a fresh store with a
meaningful access stream, and by the benchmarks to fill stores of any size. The texts are
built from templates over projects, files, tools, people and decisions, so keyword and
embedding search both have something to find and related memories share entities.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["Session", "generate_memories", "generate_sessions"]

PROJECTS = ["billing", "search", "onboarding", "payments", "analytics", "auth", "mobile", "infra"]
FILES = [
    "api/routes.py",
    "db/schema.sql",
    "web/app.tsx",
    "jobs/worker.py",
    "ci/deploy.yml",
    "core/cache.rs",
    "docs/README.md",
    "tests/test_api.py",
    "config/settings.toml",
]
TOOLS = [
    "postgres",
    "redis",
    "kafka",
    "pytest",
    "docker",
    "terraform",
    "grafana",
    "celery",
    "react",
    "fastapi",
    "sqlite",
    "nginx",
]
PEOPLE = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hiro"]
ISSUES = [
    "a race condition",
    "a memory leak",
    "slow queries",
    "a flaky test",
    "a timeout",
    "an off-by-one error",
    "a missing index",
    "a deadlock",
    "stale cache entries",
]
REASONS = [
    "it halves the latency",
    "the team already knows it",
    "it is cheaper to run",
    "it removes a dependency",
    "the old one is unmaintained",
    "it is easier to test",
]

_TEMPLATES: list[tuple[str, str]] = [
    ("info", "{project} uses {tool} for {purpose}; the config lives in {file}."),
    ("info", "{person} owns the {project} service and reviews changes to {file}."),
    (
        "skill",
        "To debug {issue} in {project}: enable {tool} tracing, reproduce, then bisect {file}.",
    ),
    ("episode", "Fixed {issue} in {file} of {project}; root cause was {cause}."),
    ("episode", "Deployed {project} with {tool}; {person} approved the rollout."),
    ("info", "Decided to use {tool} for {project} because {reason}."),
    ("todo", "Follow up with {person} about {issue} in {project}."),
    ("info", "{project} tests run with {tool}; {file} holds the fixtures."),
    ("reflection", "In {project}, {issue} keeps coming back around {file}; add a check."),
]
_PURPOSES = ["job queues", "session storage", "metrics", "migrations", "feature flags", "search"]
_CAUSES = [
    "an unbounded retry",
    "a missing lock",
    "a wrong timezone",
    "an unclosed cursor",
    "a config typo",
    "an integer overflow",
]


def _fill(rng: random.Random, template: str) -> tuple[str, list[str]]:
    values = {
        "project": rng.choice(PROJECTS),
        "tool": rng.choice(TOOLS),
        "file": rng.choice(FILES),
        "person": rng.choice(PEOPLE),
        "issue": rng.choice(ISSUES),
        "reason": rng.choice(REASONS),
        "purpose": rng.choice(_PURPOSES),
        "cause": rng.choice(_CAUSES),
    }
    text = template.format(**values)
    entities = [v for k, v in values.items() if k in ("project", "tool", "person") and v in text]
    return text, entities


def generate_memories(
    n: int, seed: int = 0, start: datetime | None = None, unique: bool = True
) -> Iterator[dict[str, Any]]:
    """`n` author specs, spread over the 90 days before `start` (now by default).

    With `unique`, a serial number keeps every text distinct, so a store fills to exactly
    `n` memories instead of folding repeats into reinforcements.
    """
    rng = random.Random(seed)
    end = start or datetime.now(UTC)
    for i in range(n):
        kind, template = rng.choice(_TEMPLATES)
        text, entities = _fill(rng, template)
        if unique:
            text += f" (note {seed}-{i})"
        yield {
            "content": text,
            "type": kind,
            "entities": entities,
            "importance": rng.choice(["LOW", "MEDIUM", "MEDIUM", "HIGH"]),
            "created_at": end - timedelta(seconds=rng.uniform(0, 90 * 86400)),
        }


@dataclass
class Session:
    """One agent session: what it authors, and the questions it asks its memory."""

    authored: list[dict[str, Any]]
    queries: list[str]


def generate_sessions(n_sessions: int, seed: int = 0) -> list[Session]:
    """Sessions that author a few memories and recall about projects touched before.

    A later session asks about entities of earlier ones, so some recalled memories get
    used again, which is what replay looks for.
    """
    rng = random.Random(seed)
    sessions: list[Session] = []
    for s in range(n_sessions):
        authored = list(generate_memories(rng.randint(3, 8), seed=seed * 1000 + s))
        queries = []
        for _ in range(rng.randint(2, 5)):
            project, tool = rng.choice(PROJECTS), rng.choice(TOOLS)
            issue, person = rng.choice(ISSUES), rng.choice(PEOPLE)
            queries.append(
                rng.choice(
                    [
                        f"how do we use {tool} in {project}",
                        f"who owns {project}",
                        f"{issue} in {project}",
                        f"what did {person} approve",
                        f"why did we choose {tool}",
                        f"{project} deploy",
                    ]
                )
            )
        sessions.append(Session(authored, queries))
    return sessions
