"""The English stemmer the keyword index and versions' word test use: PyStemmer's (C), which
must give the stems the pure-Python Snowball stemmer gave, as stores written with it hold
them; and no other stemmer is loaded (snowballstemmer's `__init__` imports every language's,
which a server held for its whole life: ~2.6 MiB of RSS)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nooa_mcp.domain.text import english_stemmer
from nooa_mcp.storage import keywords

ROOT = Path(__file__).resolve().parents[2]
#: Endings put on every word of the project's own prose: Snowball's English rules are mostly
#: about suffixes, and the prose alone has few of some.
ENDINGS = ("", "s", "es", "ed", "ing", "ly", "ness", "ational", "ization", "ies", "er")

WORDS = [
    "running",
    "runs",
    "ran",
    "nodes",
    "node",
    "deployed",
    "deploying",
    "generously",
    "quarterly",
    "invoices",
    "argued",
    "arguing",
    "connection",
    "connections",
    "relational",
    "happiness",
    "dying",
    "lying",
    "skies",
]


def test_keywords_stem_as_snowballs_english_stemmer_does() -> None:
    import snowballstemmer

    reference = snowballstemmer.stemmer("english")
    assert [keywords.stem(w) for w in WORDS] == [reference.stemWord(w) for w in WORDS]


def test_every_word_of_the_projects_prose_stems_as_before() -> None:
    """Tens of thousands of words (the README, the design, the benchmarks, the prompts, each
    with common endings, accents folded as the index folds them): one stem that differed
    would leave memories a store holds unfound by the words that wrote them."""
    import snowballstemmer

    reference = snowballstemmer.stemmer("english")
    texts = [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *(ROOT / "prompts").glob("*.md")]
    base = {w for path in texts for w in keywords.words(path.read_text(encoding="utf-8"))}
    base |= set(keywords.words("naïve café résumé straße données Ωmega москва 東京 ﬁnance"))
    vocabulary = sorted({v for w in base for v in keywords.words(" ".join(w + e for e in ENDINGS))})
    assert len(vocabulary) > 30_000
    stemmer = english_stemmer()
    differ = [w for w in vocabulary if stemmer.stemWord(w) != reference.stemWord(w)]
    assert differ == []


def test_a_server_loads_no_stemmer_but_the_c_one() -> None:
    probe = (
        "import sys\n"
        "import nooa_mcp.memory, nooa_mcp.mcp.server, nooa_mcp.domain.facts\n"
        "import nooa_mcp.services.consolidation, nooa_mcp.storage.keywords\n"
        "nooa_mcp.storage.keywords.stem('running')\n"  # the stemmer is made at its first word
        "print(sorted(m for m in sys.modules if 'stemmer' in m.lower()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.split() == ["['Stemmer']"], out
