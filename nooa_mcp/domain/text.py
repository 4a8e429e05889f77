"""Text rules shared by scoring, keyword search and rendering: words, stopwords, heads, sizes.

Pure. Keyword search and cue overlap must agree on what a word is, so both read it here.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

__all__ = [
    "STOPWORDS",
    "a_or_an",
    "choices",
    "cjk_bigrams",
    "cut_cjk",
    "english_stemmer",
    "fts_terms",
    "has_cjk",
    "head",
    "holds_unstorable",
    "sizes",
    "stem",
    "tokens",
    "without_unstorable",
]

#: Function words: they match nearly every memory and would drown the words that matter.
STOPWORDS = frozenset(
    """
    a an and are as at be but by did do does for from had has have he her hers him his how
    i if in into is it its me my of on or our she so than that the their them then there
    these they this to was we were what when where which who whom why will with you your
    yours
    """.split()  # noqa: SIM905
)
_WORD = re.compile(r"[\w'-]+")
_SEARCH_WORD = re.compile(r"\w+")
#: An English clitic ("what's", "user's", "don't", "I'm", "we'll"): its letters are no word a
#: query asks for, and "s" or "t" alone matched every possessive and negation stored ("what's
#: the plan?" put "The user's cat is called Tom" first). "can't" and "won't" keep their verb.
_APOSTROPHE = "['’‘`´＇]"  # what keyboards and editors put between "what" and "s"
_CLITIC = re.compile(
    rf"\b(ca|wo)(?=n{_APOSTROPHE}t\b)|(?<=\w)(?:n{_APOSTROPHE}t|{_APOSTROPHE}(?:s|m|d|ll|re|ve))\b"
)
_CLITIC_VERB = {"ca": "can", "wo": "will"}
_SENTENCE_END = re.compile(r"[.!?]+(\s|$)")
#: Characters of the scripts written without spaces between words: Hangul jamo, CJK radicals,
#: 々〆〇, Hiragana, Katakana (not the combining voicing marks), Bopomofo, Hangul
#: compatibility jamo, CJK ideographs (their extensions and compatibility forms), Hangul
#: syllables, halfwidth Katakana and Hangul.
_CJK_CHARS = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3040-\u3098\u309b-\u30ff\u3100-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uffdc"
    "\U00020000-\U0003134f"
)
_CJK = re.compile(f"[{_CJK_CHARS}]")
_CJK_RUN = re.compile(f"([{_CJK_CHARS}]+)")


def has_cjk(text: str) -> bool:
    """Whether a text holds a Chinese, Japanese or Korean character (`cjk_bigrams`); ASCII
    text, most of what is ranked, is answered without a scan."""
    return not text.isascii() and _CJK.search(text) is not None


def cjk_bigrams(word: str) -> list[str]:
    """A word with its runs of CJK characters cut into overlapping character bigrams, a lone
    character kept as one ("東京の会議" is 東京 京の の会 会議); the letters and digits of other
    scripts around a run stay words. A word without CJK comes back whole.

    Chinese, Japanese and Korean put no spaces between words, so a run is one "word" to a
    `\\w+` cut and a query's "東京 会議" never meets the memory's run: bigrams are what search
    engines index without a dictionary. A run is put in NFC, so Hangul that NFKD cut into jamo
    is back in syllables.
    """
    if not has_cjk(word):
        return [word]
    out: list[str] = []
    for i, part in enumerate(_CJK_RUN.split(word)):
        if not part:
            continue
        if i % 2 == 0:  # between the runs
            out.append(part)
            continue
        run = unicodedata.normalize("NFC", part)
        out.extend([run] if len(run) == 1 else [run[j : j + 2] for j in range(len(run) - 1)])
    return out


def cut_cjk(words: list[str], text: str) -> list[str]:
    """`words` (as cut from `text`) with each run of CJK characters as its bigrams
    (`cjk_bigrams`): what every cut of words into keywords, cues and labels does; `words`
    themselves when `text` holds none."""
    return [p for w in words for p in cjk_bigrams(w)] if has_cjk(text) else words


def tokens(text: str) -> set[str]:
    """Lower-cased content words of a text (stopwords dropped), for cue overlap; a CJK run as
    its bigrams (`cjk_bigrams`), as `domain.schema.cue_set` cuts a label."""
    found = cut_cjk(_WORD.findall(text.lower()), text)
    return {w.strip("'-") for w in found} - STOPWORDS - {""}


def _without_clitic(found: re.Match[str]) -> str:
    return _CLITIC_VERB.get(found.group(1) or "", "")


def fts_terms(text: str, max_terms: int = 32) -> list[str]:
    """The distinct keyword terms of user text, function words and clitics dropped (function
    words kept if alone).

    Stopwords match nearly every row and would drown the real terms; they are kept only when
    the query has nothing else.
    """
    words = _SEARCH_WORD.findall(_CLITIC.sub(_without_clitic, text.lower()))
    content = [w for w in words if w not in STOPWORDS]
    return list(dict.fromkeys(content or words))[:max_terms]


def head(text: str, n: int = 120) -> str:
    """The text on one line, cut to `n` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def sizes(content: str) -> dict[str, int]:
    """Derived sizes: characters, tokens (≈ chars / 4) and sentences."""
    chars = len(content)
    sentences = len(_SENTENCE_END.findall(content)) or (1 if content.strip() else 0)
    return {"chars": chars, "tokens": math.ceil(chars / 4), "sentences": sentences}


def choices(values: Sequence[str]) -> str:
    """ "a, b or c": the allowed values, as an error message names them."""
    items = list(values)
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} or {items[-1]}"


def a_or_an(word: str) -> str:
    """The word with its indefinite article: "an info", "a todo" (error messages name types)."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def english_stemmer():
    """A new instance of the English Snowball stemmer (an instance keeps its state on
    itself), from PyStemmer: the Snowball project's C stemmers, ~2 µs a word where the
    pure-Python `snowballstemmer` took ~37, with the same stems (tested against it), so the
    stems stores already hold still match. A query's new words are stemmed while its caller
    waits (BENCHMARKS.md, "Stemming in C"). (Unannotated: the stemmer has no types, and
    `typing` is not imported on the hook's path.)"""
    import Stemmer

    return Stemmer.Stemmer("english")


#: Stems `stem` keeps: ~0.6 MiB (65,536 held ~10 MiB for good once a server had indexed a
#: large vocabulary, which the words a query and its hits read do not need).
STEMS_KEPT = 4096

#: One stemmer for the process, made at its first word; it keeps its state on itself, so it
#: stems one word at a time.
_stemmer = None
_stemming = threading.Lock()


@lru_cache(maxsize=STEMS_KEPT)
def stem(word: str) -> str:
    """One word's stem: what keyword search indexes (`storage.keywords`) and what a cue word
    is matched on (`domain.cues`), so "deploying" meets "deploy" and "planet" not "plan".
    The words seen most recently are kept: a cue, and recall's use rule, stem every word of
    each text they read, most of them the same few words."""
    global _stemmer
    with _stemming:
        if _stemmer is None:
            _stemmer = english_stemmer()
        return _stemmer.stemWord(word) or word


#: What a NUL character or a lone surrogate becomes where it cannot go (PostgreSQL text, an
#: import line, UTF-8): the Unicode replacement character, so the text keeps its place and
#: shows that one was there.
NUL_REPLACEMENT = "\ufffd"

#: What no store or export can hold: NUL (PostgreSQL's text), and the halves of a UTF-16 pair
#: alone (no UTF-8 form; Python makes them of bytes that are not UTF-8 in a command line).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def holds_unstorable(value: Any) -> bool:
    """Whether `value` (text, or JSON decoded into lists and dicts) holds a NUL or a lone
    surrogate; it stops at the first."""
    if isinstance(value, str):
        return _UNSTORABLE.search(value) is not None
    if isinstance(value, dict):
        return any(holds_unstorable(k) or holds_unstorable(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(holds_unstorable(v) for v in value)
    return False


def without_unstorable(value: Any) -> Any:
    """`value` (text, or JSON decoded into lists and dicts) with every NUL character and lone
    surrogate replaced by U+FFFD. Stores of releases before they were refused may hold one; a
    copy of such a store keeps the memory rather than leave it out."""
    if isinstance(value, str):
        return _UNSTORABLE.sub(NUL_REPLACEMENT, value)
    if isinstance(value, dict):
        return {without_unstorable(k): without_unstorable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_unstorable(v) for v in value]
    return value
