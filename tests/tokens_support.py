"""Reply sizes counted independently of the code under test.

The product sizes replies at characters / 4; these tests count with a real tokenizer, the
all-MiniLM-L6-v2 WordPiece tokenizer the package bundles for its model, and compare with the
numbers DESIGN.md §13.4 documents, written out here rather than imported from the module they check.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

#: DESIGN.md §13.4: every reply within 8k tokens by default, far below the 25k clients refuse.
REPLY_BUDGET = 8_000
CLIENT_CAP = 25_000

TOKENIZER_JSON = (
    Path(__file__).resolve().parents[1] / "nooa_mcp" / "assets" / "minilm" / "tokenizer.json"
)


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(TOKENIZER_JSON))
    tok.no_truncation()
    tok.no_padding()
    return tok


def real_tokens(text: str) -> int:
    """Tokens of `text` for the bundled WordPiece tokenizer, without special tokens."""
    if not text:
        return 0
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)
