"""LoCoMo conversations as memories and questions.

Pure: turns a parsed LoCoMo file into one memory spec per turn (`Speaker: text`, the image
caption appended, created_at and valid_from = the session date) and into the questions that
have evidence. Category 5 (adversarial) is excluded: its questions ask what the conversation
never says, so no turn is the answer to retrieve.

Data: Maharana et al. 2024, snap-research/LoCoMo, CC BY-NC 4.0. The file is read by path and
never copied into the project.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import InvalidInput

__all__ = [
    "CATEGORY_NAMES",
    "Conversation",
    "Question",
    "Turn",
    "load_locomo",
    "normalise_evidence",
    "parse_conversation",
    "parse_session_date",
]

#: LoCoMo question categories as the data set numbers them (5 is excluded from the evaluation).
CATEGORY_NAMES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
EXCLUDED_CATEGORIES: frozenset[int] = frozenset({5})

_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I
)
_MONTHS = {
    name: i + 1
    for i, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}
# Evidence ids are `D<session>:<turn>`; a few entries in the published data are malformed
# ("D8:6; D9:17", "D:11:26"), so every well-formed id inside the string is taken.
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Turn:
    """One utterance of a conversation; it becomes one memory."""

    dia_id: str
    speaker: str
    text: str
    session: int
    date: datetime
    caption: str = ""

    @property
    def content(self) -> str:
        """`Speaker: text`, with the shared image's caption appended when there is one."""
        body = f"{self.speaker}: {self.text}"
        if self.caption:
            body += f" [shares an image: {self.caption}]"
        return body

    def memory_spec(self) -> dict[str, Any]:
        """Keyword arguments for `Memory.author` (and `author_many`)."""
        return {
            "content": self.content,
            "type": "info",
            "entities": [self.speaker],
            "created_at": self.date,
            "valid_from": self.date,
        }


@dataclass(frozen=True)
class Question:
    """A question with the turns that answer it."""

    qid: str
    text: str
    answer: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    """One LoCoMo sample: its turns in order and its evaluable questions."""

    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]
    skipped_questions: int = 0
    session_dates: dict[int, datetime] = field(default_factory=dict)

    @property
    def last_date(self) -> datetime:
        return max(t.date for t in self.turns)


def parse_session_date(text: str) -> datetime:
    """Parse a LoCoMo session stamp such as `1:56 pm on 8 May, 2023` as a UTC datetime.

    Raises:
        InvalidInput: the text is not in that form.
    """
    match = _DATE.match(text or "")
    if not match:
        raise InvalidInput(
            "session date",
            f"'{text}' is not a LoCoMo date.",
            "Expected e.g. '1:56 pm on 8 May, 2023'.",
        )
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name[:3].lower())
    if month is None:
        raise InvalidInput(
            "session date", f"'{month_name}' is not a month.", "Use an English name."
        )
    h = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), month, int(day), h, int(minute), tzinfo=UTC)


def normalise_evidence(values: list[Any] | None) -> tuple[str, ...]:
    """Every well-formed `D<s>:<t>` id inside the evidence list, in order, without repeats."""
    out: list[str] = []
    for value in values or []:
        for session, turn in _EVIDENCE.findall(str(value)):
            ident = f"D{int(session)}:{int(turn)}"
            if ident not in out:
                out.append(ident)
    return tuple(out)


def parse_conversation(sample: dict[str, Any]) -> Conversation:
    """Build a Conversation from one parsed LoCoMo sample.

    Questions in an excluded category, or whose evidence names no turn of the conversation,
    are skipped and counted in `skipped_questions`.

    Raises:
        InvalidInput: the sample lacks a conversation or a session lacks its date.
    """
    conv = sample.get("conversation")
    sample_id = str(sample.get("sample_id", "?"))
    if not isinstance(conv, dict):
        raise InvalidInput("conversation", f"sample {sample_id} has no conversation.", "")
    sessions = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.match(k)))
    turns: list[Turn] = []
    dates: dict[int, datetime] = {}
    for n in sessions:
        stamp = conv.get(f"session_{n}_date_time")
        if stamp is None:
            raise InvalidInput("session date", f"{sample_id} session {n} has no date.", "")
        dates[n] = parse_session_date(stamp)
        for raw in conv[f"session_{n}"] or []:
            turns.append(
                Turn(
                    dia_id=str(raw["dia_id"]),
                    speaker=str(raw["speaker"]),
                    text=str(raw.get("text", "")),
                    session=n,
                    date=dates[n],
                    caption=str(raw.get("blip_caption") or ""),
                )
            )
    known = {t.dia_id for t in turns}
    questions: list[Question] = []
    skipped = 0
    for i, qa in enumerate(sample.get("qa") or []):
        category = int(qa.get("category", 0))
        evidence = tuple(e for e in normalise_evidence(qa.get("evidence")) if e in known)
        if category in EXCLUDED_CATEGORIES or not evidence:
            skipped += 1
            continue
        questions.append(
            Question(
                qid=f"{sample_id}#{i}",
                text=str(qa["question"]),
                answer=str(qa.get("answer", "")),
                category=category,
                evidence=evidence,
            )
        )
    speakers = (str(conv.get("speaker_a", "")), str(conv.get("speaker_b", "")))
    return Conversation(sample_id, speakers, turns, questions, skipped, dates)


def load_locomo(path: str | Path) -> list[Conversation]:
    """Read a LoCoMo JSON file (a list of samples) by path.

    Raises:
        InvalidInput: the file is missing, is not JSON, or is not a list of samples.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(
            "FILE", f"{p} does not exist.", "Pass the path of locomo10.json."
        ) from None
    except json.JSONDecodeError as exc:
        raise InvalidInput("FILE", f"{p} is not JSON ({exc.msg}).", "Pass a LoCoMo file.") from None
    if not isinstance(data, list):
        raise InvalidInput("FILE", f"{p} is not a list of conversations.", "Pass a LoCoMo file.")
    return [parse_conversation(sample) for sample in data]
