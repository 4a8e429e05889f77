"""What makes two texts the same fact: normalised repeats and the values a fact carries.

Pure. Two texts are an *exact repeat* when they are equal after Unicode NFKC, case folding and
whitespace collapsing, and alike in what those hide but a writer may mean (`same_as_written`):
an identifier's letters' case and indented lines' indentation. Two near-identical texts are
still *different facts* when they differ in a value: a number, a date or time, an
identifier (JIRA-5678, web-02, 10.0.0.12), a name or a negation. Embeddings put "the rate
limit is 100" and "… 500" at cosine 0.99; these rules are what keeps the second from being
folded into the first. A number may be written in words ("three" / "four" worker nodes).

Two texts *say the same thing* (`same_statement`, the only pairs reflection merges) when they
have the same words in the same order — after case, punctuation, the articles a, an and the
and a possessive's s — and the same values. Any other changed word is a different statement,
whatever kind of word it is: a number in words ("three" / "four"), an antonym ("low" /
"high"), a place, a product, a unit, and the small words that carry direction, time and person
("from Frankfurt to Dublin" / "from Dublin to Frankfurt", "was" / "will be", "he" / "she").
A word's ending counts too, so words are compared as written, not stemmed: "finished" is not
"finishing", "hated" not "hates", "server" not "servers". Order counts for the same reason:
"Alice reports to Bob" is not "Bob reports to Alice". No list of such words could be
complete; equality of the words is. A reworded duplicate that this keeps apart costs a second
memory; a merge of two statements costs one.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import textwrap
import unicodedata
from dataclasses import dataclass

from .text import STOPWORDS

__all__ = [
    "VALUE_KINDS",
    "Values",
    "cased_apart",
    "differs_in",
    "indentation",
    "normalise",
    "normalised_hash",
    "same_as_written",
    "same_statement",
    "statement_words",
    "values",
    "written_key",
]

#: The kinds of value two versions of a fact can differ in, in the order replies list them.
VALUE_KINDS: tuple[str, ...] = ("number", "date", "identifier", "name", "negation")

_MONTHS = frozenset(
    """jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june
    july august september october november december monday tuesday wednesday thursday friday
    saturday sunday today tomorrow yesterday""".split()  # noqa: SIM905
)
# Identifiers first: a token holding a digit and a letter (JIRA-5678, web-02, us-east-1, v2,
# 3f9a2c) or digits joined by two or more dots (10.0.0.12, 2.3.1).
_IDENTIFIER = re.compile(
    r"(?<![\w.])(?:(?=[\w.:/-]*\d)(?=[\w.:/-]*[A-Za-z])[\w][\w.:/-]*[\w]|\d+(?:\.\d+){2,})(?![\w])"
)
_DATE = re.compile(
    r"(?<![\w.])(\d{4}-\d{1,2}-\d{1,2}(?:[tT ]\d{1,2}:\d{2}(?::\d{2})?)?"
    r"|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}|\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\.?)?"
    r"|\d{1,2}\s*[ap]\.?m\.?)(?!\w|\.\w)",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)*(?![\w])")
#: Numbers in words are values too: "three worker nodes" and "four worker nodes" are two facts
#: (and a reply that called them a rewording told the model the change was cosmetic). "One"
#: is left out: mostly a pronoun ("the new one"), and against "two" the other word differs.
_NUMBER_WORDS = frozenset(
    """zero two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty
    ninety hundred thousand million billion trillion dozen once twice thrice""".split()  # noqa: SIM905
)
_NAME = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)*\b")
_NEGATION = re.compile(
    r"\b(not|no|never|none|nobody|nothing|neither|nor|without|cannot|isn't|aren't|wasn't|"
    r"weren't|don't|doesn't|didn't|won't|wouldn't|can't|couldn't|shouldn't|hasn't|haven't|"
    r"hadn't|mustn't)\b|n't\b",
    re.IGNORECASE,
)


def normalise(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed: the form exact repeats are compared in."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def normalised_hash(text: str) -> str:
    """The content hash of a memory: equal exactly for repeats (DESIGN.md §4.2)."""
    return hashlib.sha256(normalise(text).encode()).hexdigest()


@dataclass(frozen=True)
class Values:
    """The values a text states, by kind; two versions of a fact differ when any set does."""

    number: frozenset[str]
    date: frozenset[str]
    identifier: frozenset[str]
    name: frozenset[str]
    negation: int

    def kinds_differing(self, other: Values) -> list[str]:
        out = [
            kind
            for kind in ("number", "date", "identifier", "name")
            if getattr(self, kind) != getattr(other, kind)
        ]
        if (self.negation % 2) != (other.negation % 2):
            out.append("negation")
        return out


def values(text: str) -> Values:
    """The numbers, dates, identifiers, names and negations a text states."""
    flat = unicodedata.normalize("NFKC", text)
    # Dates and times first (02:00, 2026-03-01, 3 pm; a sentence's full stop after one is
    # not part of it, a dot before a digit is), then identifiers, then bare numbers, each
    # taken out of the text before the next looks, so "10.0.0.12" is one identifier.
    dates = {_date_form(m.group(0)) for m in _DATE.finditer(flat)}
    lowered = re.findall(r"[a-z]+", flat.lower())
    dates |= {w for w in lowered if w in _MONTHS}
    rest = _DATE.sub(" ", flat)
    identifiers = {m.group(0).lower() for m in _IDENTIFIER.finditer(rest)}
    rest = _IDENTIFIER.sub(" ", rest)
    numbers = {m.group(0).replace(",", "") for m in _NUMBER.finditer(rest)}
    numbers |= {w for w in lowered if w in _NUMBER_WORDS}
    # Capitalised words, minus function words that start a sentence ("The", "We").
    names = {m.group(0) for m in _NAME.finditer(flat) if m.group(0).lower() not in STOPWORDS}
    negations = len(_NEGATION.findall(flat))
    return Values(
        frozenset(numbers),
        frozenset(dates),
        frozenset(identifiers),
        frozenset(names),
        negations,
    )


def _date_form(said: str) -> str:
    """A date or time as compared: "9:30 a.m.", "9:30am" and "9:30 am" are one time."""
    form = said.lower().replace(" ", "")
    return _MERIDIEM.sub(lambda m: m.group(0).replace(".", ""), form)


_MERIDIEM = re.compile(r"[ap]\.?m\.?$")


def differs_in(a: str, b: str) -> list[str]:
    """The kinds of value in which `a` and `b` differ (empty: the same values); an
    identifier written in other letters' case ("aB3xY9" / "Ab3Xy9", "./Build.sh" /
    "./build.sh") is another identifier (`cased_apart`), and indented lines indented
    otherwise differ in "indentation" (code: a line moved into a block is another
    program, not a rewording that a forget of the old one would block). A name differs only
    when one text names what the other does not hold as a word in any case: a capital that
    starts a sentence ("Rotate the key" / "rotate the key") or a name written small is the
    same word, as `same_statement` reads it."""
    left, right = values(a), values(b)
    kinds = left.kinds_differing(right)
    if "name" in kinds and not _names_apart(left.name, b) and not _names_apart(right.name, a):
        kinds.remove("name")
    if "identifier" not in kinds and cased_apart(a, b):
        kinds.insert(len([k for k in kinds if k in ("number", "date")]), "identifier")
    if indentation(a) != indentation(b):
        kinds.append("indentation")
    return kinds


def _names_apart(names: frozenset[str], text: str) -> bool:
    """Whether a name of `names` is no word of `text`, in any case (`values` reads a name only
    from a capital, so "Rotate" at a sentence's start against "rotate" was a name changed)."""
    words = set(_words(text))
    return any(name.casefold() not in words for name in names)


#: What may stand before and after a word without being part of it: quotes, brackets, and
#: after it a sentence's end ("./Build.sh" keeps its dot).
_OPENING = "\"'`([{<«“‘"
_CLOSING = "\"'`)]}>»”’.,;:!?"
#: A token whose letters' case is part of what it says beside a capital after a small letter
#: (`_case_bearing`): a path's or a code name's sign (`/`, `\`, `_`, `::`), or two dotted
#: parts of two letters or more (Build.sh; not "e.g"). A digit alone does not make one: "1Password"
#: / "1password" and "JIRA-5678" / "jira-5678" are one name, "aB3xY9" / "Ab3Xy9" two tokens.
_CASE_BEARING = re.compile(r"[/\\_]|::|[^\W_]{2,}\.[^\W_]{2,}")
#: The leading whitespace of each line that holds something.
_INDENT = re.compile(r"(?m)^([ \t]*)\S")


def _case_bearing(word: str) -> bool:
    """Whether a word's letters' case is part of what it says: a capital after a small letter
    ("aB3xY9", "iPhone", "camelCase") or a path's or code name's mark (`_CASE_BEARING`)."""
    return _CASE_BEARING.search(word) is not None or any(
        a.islower() and b.isupper() for a, b in itertools.pairwise(word)
    )


def _written_words(text: str) -> list[str]:
    """The words of `text` as written: split at whitespace after NFKC, quotes and brackets
    and a sentence's end stripped (`_OPENING`, `_CLOSING`)."""
    words = (
        t.lstrip(_OPENING).rstrip(_CLOSING) for t in unicodedata.normalize("NFKC", text).split()
    )
    return [w for w in words if w]


def _forms(text: str) -> dict[str, set[str]]:
    """Each word of `text` as written (`_written_words`), case folded, to the ways it is
    written there."""
    out: dict[str, set[str]] = {}
    for word in _written_words(text):
        out.setdefault(word.casefold(), set()).add(word)
    return out


def cased_apart(a: str, b: str) -> list[str]:
    """The words both texts hold, written in other letters' case where case is part of what
    a word says (`_case_bearing`: a token, a key, a path, a file name, "iPhone"), as `a`
    writes them. Folding case made "The API token is aB3xY9" an exact repeat of "...
    Ab3Xy9", so the new token was never stored; ordinary words' case ("The deploy" / "the
    deploy", "URGENT") still folds, and a word only one text holds is the other rules'."""
    left, right = _forms(a), _forms(b)
    return sorted(
        form
        for key in left.keys() & right.keys()
        if left[key] != right[key] and any(map(_case_bearing, left[key] | right[key]))
        for form in left[key]
    )


def written_key(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What `same_as_written` compares, as a key for texts with one content hash (their words
    then line up one to one): the case-bearing words as written, in order, and the lines'
    indentation. Two writes of one call are one memory only with equal keys."""
    return tuple(w for w in _written_words(text) if _case_bearing(w)), indentation(text)


def indentation(text: str) -> tuple[str, ...]:
    """Each non-blank line's leading whitespace, past what all of them share, when a text of
    two lines or more has an indented one (code, a nested list), else nothing: collapsing
    whitespace made a snippet with a line moved into a block an exact repeat of the one
    before. One line's leading spaces, or a block indented as a whole, are not its shape."""
    found = tuple(_INDENT.findall(textwrap.dedent(text)))
    return found if len(found) > 1 and any(found) else ()


def same_as_written(a: str, b: str) -> bool:
    """Whether two texts alike once folded and collapsed (`normalise`, `statement_words`)
    are also alike in what folding and collapsing hide but a writer may mean: identifiers'
    letter case (`cased_apart`) and lines' indentation (`indentation`). Every decision that
    two texts are one (an exact repeat, a tombstone's text, a merge) asks it too (DESIGN.md
    §4.2)."""
    return not cased_apart(a, b) and indentation(a) == indentation(b)


#: Words as a statement's comparison splits them: runs of letters and digits (an apostrophe
#: or a hyphen splits too, as the keyword index does).
#: A word, or a sign that is part of what a text says: "C++" is not "C", "C#" not "C",
#: "~/data" not "/data", "> 500" not "< 500", "!=" not "=", a question not a statement, 👍 not
#: 👎. Marks that carry no meaning of their own are left out: a sentence's end but "?", commas,
#: quotes, brackets, dashes, and markdown's emphasis, bullets, headings, tables and mentions
#: ("*", "#" before a word, "|", "@"), so a restatement may differ in those alone.
_CONTENT_WORD = re.compile(
    r"\w+|(?<=\w)#|!(?=[\w=])"
    r"|[^\w\s.,;:!'\"`()\[\]{}\-\u2010-\u2015\u2018-\u201f\u2026*@|#]"
)
#: Written two ways, one sign: arrows; a quote's leading ">"; a path's closing "/".
_ARROW = re.compile(r"-+>|=>")
_QUOTED = re.compile(r"(?m)^[ \t]*(?:>[ \t]*)+")
_CLOSING_SLASH = re.compile(r"(?<=\w)/+(?=[\s)\]}.,;:!?'\"]|$)")


#: The only words a restatement may add or drop: articles, and a possessive's "s".
_NEUTRAL_WORDS = frozenset({"a", "an", "the", "s"})


def statement_words(text: str) -> tuple[str, ...]:
    """A text's words in order: NFKC, case folded, split on punctuation (a sign that says
    something, "+", "/", "~", "?", "<", an emoji, is a word of its own), the articles and a
    possessive's "s" dropped. Every other word stays as written, function words and endings
    included: "from", "to", "was", "will", "he" and "she" change a meaning, and so do
    "finished" / "finishing" and "user" / "users"."""
    return tuple(w for w in _words(text) if w not in _NEUTRAL_WORDS)


def _words(text: str) -> list[str]:
    flat = unicodedata.normalize("NFKC", text).casefold()
    flat = _CLOSING_SLASH.sub("", _QUOTED.sub("", _ARROW.sub("→", flat)))
    return _CONTENT_WORD.findall(flat)


def same_statement(a: str, b: str) -> bool:
    """Whether `a` and `b` say the same thing in the same words, so that one may be folded
    into the other: the same `statement_words` in the same order, and the same numbers,
    dates, identifiers and negation (values catch what splitting words hides: "1,000"
    against "1.000"). Names are compared as the other words are, case folded."""
    if statement_words(a) != statement_words(b) or not same_as_written(a, b):
        return False
    left, right = values(a), values(b)
    return not [kind for kind in left.kinds_differing(right) if kind != "name"]
