"""The grep-over-markdown baseline: what an agent gets from a notes file and grep.

Every turn is appended to one markdown file, one line per turn under a heading per session.
A query is cut into keywords (lower-cased words of three or more letters that are not stop
words); each line scores the number of distinct keywords it contains as case-insensitive
substrings (as `grep -i` matches them), ties broken by total occurrences, then file order.
Lines that match nothing are not returned.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["STOP_WORDS", "GrepIndex", "keywords", "write_markdown"]

#: Function words an agent would leave out of a grep pattern.
STOP_WORDS: frozenset[str] = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves kind sort type likely""".split()  # noqa: SIM905 (a word list reads better)
)
_WORD = re.compile(r"[a-z0-9][a-z0-9'-]*")
_LINE_ID = re.compile(r"^- \[([^\]]+)\] ")


def keywords(query: str) -> list[str]:
    """Distinct grep keywords of a query, in order: words of ≥ 3 characters, no stop words.

    A possessive `'s` is cut, so "Caroline's" greps for "caroline".
    """
    out: list[str] = []
    for word in _WORD.findall(query.lower()):
        word = re.sub(r"'s$", "", word).strip("'-")
        if len(word) >= 3 and word not in STOP_WORDS and word not in out:
            out.append(word)
    return out


def write_markdown(path: Path, sessions: Iterable[tuple[str, Iterable[tuple[str, str]]]]) -> Path:
    """Write `# heading` per session and `- [id] text` per item; return the path."""
    lines: list[str] = []
    for heading, items in sessions:
        lines.append(f"## {heading}")
        lines.extend(f"- [{ident}] {' '.join(text.split())}" for ident, text in items)
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@dataclass
class GrepIndex:
    """The lines of a markdown notes file, searchable by keyword hits."""

    ids: list[str]
    lines: list[str]

    @classmethod
    def from_markdown(cls, path: Path) -> GrepIndex:
        ids: list[str] = []
        lines: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            match = _LINE_ID.match(line)
            if match:
                ids.append(match.group(1))
                lines.append(line[match.end() :].lower())
        return cls(ids, lines)

    def search(self, query: str, k: int = 10) -> list[str]:
        """Ids of the k best lines for the query's keywords (fewer when fewer lines match)."""
        words = keywords(query)
        scored: list[tuple[int, int, int]] = []
        for i, line in enumerate(self.lines):
            counts = [line.count(w) for w in words]
            distinct = sum(1 for c in counts if c)
            if distinct:
                scored.append((-distinct, -sum(counts), i))
        scored.sort()
        return [self.ids[i] for _, _, i in scored[:k]]
