"""What keyword search indexes and asks for, word for word the same on both backends (DESIGN §15).

Both backends rank with FTS5's BM25, so they rank alike only if they see the same words.
Their own tokenizers and stemmers differ (FTS5's Porter, PostgreSQL's Snowball and its
parser, which reads `5e2x` as a number and a word), so neither is used: the words are cut and
stemmed here, once, and each backend indexes the result as it is.

- A word is a run of letters and digits after case folding and removing diacritics (what
  FTS5's unicode61 with remove_diacritics 2 keeps); `_` and every other mark separate words.
- Each word is stemmed with the English Snowball stemmer; longer than `LONGEST` characters,
  it is not indexed (a hash or an encoded blob, never a word anyone asks for).
- Chinese, Japanese and Korean put no spaces between words, so a run of their characters
  (Han, Hiragana, Katakana, Hangul) is cut into overlapping character bigrams, a lone
  character staying one word ("東京の会議" is 東京 京の の会 会議): what search engines do
  without a dictionary, so "東京 会議" meets it. Kana keep their voicing marks (が is not か)
  and Hangul its syllables (NFKD would leave jamo). Text without such characters gives the
  words it always gave.
- A row's searchable text is `stems`: a JSON list of its four columns' stems (title, content,
  tags, entities), each a space-separated string. SQLite's FTS5 table indexes these strings
  with a plain unicode61 tokenizer (which splits them at the spaces and changes nothing
  else); PostgreSQL builds its tsvector and term frequencies from the same strings.
- A query word goes through the same steps, so it meets its stem.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from ..domain.text import STOPWORDS, cut_cjk, fts_terms, has_cjk, stem

__all__ = [
    "LONGEST",
    "indexed_stems",
    "named_stems",
    "query_stems",
    "row_stems",
    "stem",
    "stemmed",
    "words",
]

#: Words longer than this are not indexed (nor asked for).
LONGEST = 100

_WORD = re.compile(r"[^\W_]+")
#: A kana and its voicing mark, as NFKD cuts が: put back together before marks are removed.
_VOICED = re.compile("[\u3040-\u30ff][\u3099\u309a]")


def _voiced(found: re.Match[str]) -> str:
    return unicodedata.normalize("NFC", found.group(0))


def words(text: str) -> list[str]:
    """The words of a text: lower-cased, diacritics removed, `_` and marks as separators; a
    run of CJK characters as its character bigrams."""
    folded = text.lower()
    if not folded.isascii():
        decomposed = unicodedata.normalize("NFKD", folded)
        if "\u3099" in decomposed or "\u309a" in decomposed:
            decomposed = _VOICED.sub(_voiced, decomposed)
        folded = "".join(c for c in decomposed if not unicodedata.combining(c)).lower()
    return [w for w in cut_cjk(_WORD.findall(folded), folded) if len(w) <= LONGEST]


@lru_cache(maxsize=65536)
def stemmed(text: str) -> str:
    """A text as the index holds it: its words' stems, space-separated."""
    return " ".join(stem(w) for w in words(text))


def row_stems(title: str, content: str, tags: Sequence[str], entities: Sequence[str]) -> str:
    """The `stems` column of a row: its four searchable columns, stemmed (JSON)."""
    return json.dumps(
        [stemmed(title), stemmed(content), stemmed(" ".join(tags)), stemmed(" ".join(entities))],
        ensure_ascii=False,
    )


def indexed_stems(
    title: str, content: str, tags: Sequence[str], entities: Sequence[str]
) -> frozenset[str]:
    """Every stem a row's four searchable columns hold: the words the held postings hold of
    it (`storage.postings`), from the row itself."""
    columns = (title, content, " ".join(tags), " ".join(entities))
    return frozenset(s for text in columns for s in stemmed(text).split())


def named_stems(text: str) -> frozenset[str]:
    """The stems of the content words `text` names (stopwords and a possessive's "s"
    dropped): what a query names of a memory's `indexed_stems`."""
    return frozenset(stem(w) for w in words(text) if w not in STOPWORDS and w != "s")


def query_stems(text: str, max_terms: int = 32) -> list[str]:
    """The stems a query asks for, one per query word (function words dropped as
    `fts_terms` drops them). Two words with one stem give it twice: it counts twice, as it
    does in FTS5's BM25."""
    out: list[str] = []
    bigrams = 0
    for term in fts_terms(text, max_terms):
        cut = words(term)
        if has_cjk(term):  # a run's bigrams count against the terms a query may ask for
            cut = cut[: max(0, max_terms - bigrams)]
            bigrams += len(cut)
        out.extend(stem(w) for w in cut)
    return out
