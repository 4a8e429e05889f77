"""LoCoMo turns as memories and LoCoMo questions as queries, for the stdio benchmark.

The file is read by path (CC BY-NC; it is never copied into the project). The first pass
yields every turn as `Speaker: text` (2,760 turns in the dev file). Past that, each further
round yields one new text per turn: the first half of that turn's words followed by the
second half of another turn's (a different partner every round). That keeps the texts as
long as real turns, so the embedding cost per memory stays the same from the first memory
to the 100,000th and a falling ingest rate is the store's doing, not longer texts. A few
per cent of the recombined texts still come out near-duplicates of an earlier one; the
benchmark counts what each server says it stored, not the calls it made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LOCOMO = Path("/work/shared/data/locomo/locomo10_dev.json")


@dataclass(frozen=True)
class Item:
    """One memory to write: its text and the person it is about."""

    content: str
    speaker: str


def _turns(path: Path) -> list[tuple[str, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"{path} does not exist; pass --locomo PATH to the LoCoMo file.") from None
    turns: list[tuple[str, str]] = []
    for sample in data:
        conversation = sample["conversation"]
        sessions = sorted(
            (int(key.split("_")[1]), key)
            for key in conversation
            if key.startswith("session_") and not key.endswith("date_time")
        )
        for _, key in sessions:
            for turn in conversation[key]:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares an image: {turn['blip_caption']}]"
                turns.append((turn["speaker"], text))
    return turns


def items(path: Path = LOCOMO) -> Iterator[Item]:
    """An endless stream of memory texts: the turns, then recombined halves of them."""
    turns = _turns(path)
    n = len(turns)
    for speaker, text in turns:
        yield Item(f"{speaker}: {text}", speaker)
    round_ = 1
    while True:
        for i, (speaker, text) in enumerate(turns):
            j = (i * 7919 + round_ * 104729 + 1) % n
            if j == i:
                j = (j + 1) % n
            head = text.split()
            tail = turns[j][1].split()
            words = head[: max(1, len(head) // 2)] + tail[len(tail) // 2 :]
            yield Item(f"{speaker}: {' '.join(words)}", speaker)
        round_ += 1


def questions(path: Path = LOCOMO) -> list[str]:
    """Every distinct question text in the file, in file order (999 questions, 998 distinct
    in the dev file): more than the query-embedding caches hold, so a query that comes round
    again was evicted long ago."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"{path} does not exist; pass --locomo PATH to the LoCoMo file.") from None
    seen: dict[str, None] = {}
    for sample in data:
        for qa in sample["qa"]:
            if qa.get("question"):
                seen.setdefault(qa["question"].strip(), None)
    return list(seen)


class Queries:
    """Hands out questions in rotation, counting how many came round a second time."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.next = 0
        self.repeated = 0

    def take(self, n: int) -> list[str]:
        out = []
        for _ in range(n):
            if self.next >= len(self.texts):
                self.repeated += 1
            out.append(self.texts[self.next % len(self.texts)])
            self.next += 1
        return out
