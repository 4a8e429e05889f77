"""The English stemmer the keyword index and versions' word test use: the package's own
English stemmer, loaded alone (its `__init__` imports every language's, which a server held
for its whole life: ~2.6 MiB of RSS)."""

from __future__ import annotations

import subprocess
import sys

from nooa_mcp.storage import keywords

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


def test_a_server_loads_no_stemmer_but_the_english_one() -> None:
    probe = (
        "import sys\n"
        "import nooa_mcp.memory, nooa_mcp.mcp.server, nooa_mcp.domain.facts\n"
        "import nooa_mcp.services.consolidation, nooa_mcp.storage.keywords\n"
        "print(sorted(m for m in sys.modules if m.endswith('_stemmer')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.split() == ["['_nooa_snowball.english_stemmer']"], out
