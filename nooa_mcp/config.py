"""Settings: where the store lives, whose memory it is, and every model constant.

DESIGN.md §17 lists each default; its test checks them against this module.

Only front ends build a Settings (from flags and environment); mechanisms receive it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import platformdirs
from pydantic import BaseModel, Field, ValidationError

from .domain.forgetting import ForgettingPolicy
from .errors import InvalidInput


def default_store_path() -> Path:
    """`<user data dir>/nooa-mcp/memory.sqlite`: never the working directory, never /tmp."""
    return Path(platformdirs.user_data_dir("nooa-mcp", appauthor=False)) / "memory.sqlite"


#: Where a store is configured, as a refusal names it.
STORE_OPTION = "--store (or NOOA_STORE)"


def store_target(value: str | Path) -> Path | str:
    """A store as configured: a PostgreSQL URL stays text, anything else is a file path."""
    text = str(value)
    if not text.strip():
        raise InvalidInput(
            STORE_OPTION,
            "is empty.",
            "Pass a SQLite file path or a postgresql:// URL, or leave it out for the default.",
        )
    if text.startswith(("postgresql://", "postgres://")):
        return text
    if isinstance(value, str) and text.startswith("file:"):
        # SQLite reads "file:" as a URI of its own, and the name left a stray file behind.
        raise InvalidInput(
            STORE_OPTION,
            f"{text!r} is a file: URI.",
            "Pass the file's path without file:.",
        )
    if isinstance(value, str) and (scheme := url_scheme(text)) is not None:
        # Taken as a path, "mysql://host/db" made the folders ./mysql:/host and a new store.
        raise InvalidInput(
            STORE_OPTION,
            f"{scheme}:// is not a store nooa-mcp can open.",
            "Pass a SQLite file path or a postgresql:// URL.",
        )
    return Path(text).expanduser()


#: A URL's scheme ("mysql://…"): a store is a file path or a PostgreSQL URL.
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def url_scheme(text: str) -> str | None:
    """The scheme of `text` when it is a URL ("postgresql", "mysql"), else None: a path is
    never one."""
    found = _URL.match(text)
    return None if found is None else found.group(1)


class RecallSettings(BaseModel):
    """The constants of recall's ranking (DESIGN.md §5)."""

    lam: float = Field(
        0.5, ge=0, le=1, description="λ: weight of cosine against BM25 inside relevance"
    )
    mu: float = Field(0.3, ge=0, description="μ: weight of cue overlap inside relevance")
    decay: float = Field(0.5, gt=0, lt=1, description="d: base-level decay")
    time_grain: float = Field(
        3600.0,
        gt=0,
        description="g: accesses younger than this count as this old in base-level (seconds)",
    )
    a_rel: float = 1.0
    a_rec: float = 0.5
    a_imp: float = 0.5
    gamma: float = Field(0.5, description="γ: weight of spreading activation")
    hops: int = Field(1, ge=0, le=3)
    per_hop_fanout: int = Field(5, ge=1)
    per_hop_decay: float = Field(0.6, ge=0, le=1, description="δ: decay per hop")
    activation_floor: float = 0.05
    n_dense: int = Field(50, ge=0)
    n_sparse: int = Field(50, ge=0)
    min_similarity: float = 0.0
    min_relevance: float = Field(0.0, description="scorer floor: below it candidates are dropped")
    # 0.18 = λ·0.36: a memory that matches by meaning alone (no keyword, no cue) is weak below
    # cosine 0.36, the same line NOOA's 0.25 drew at λ = 0.7.
    weak_relevance: float = Field(0.18, description="reply floor: hits below it are marked weak")
    norm_min_span: float = Field(
        0.1, ge=0, description="smallest span min-max stretches rec and imp over"
    )
    exact_accesses: int = Field(16, ge=1, description="k newest accesses summed exactly")
    # A fact that no longer holds should lose to an equally relevant current one whatever its
    # importance and recency: the drop equals their combined weight (a_rec + a_imp).
    superseded_penalty: float = Field(1.0, description="score drop for a replaced memory")
    stale_penalty: float = Field(1.0, description="score drop for a memory past valid_to")
    # A faded memory (archived by maintenance) is still recalled when it is relevant, but a
    # live memory of similar relevance comes first: it ranks as if 0.1 less relevant (0.2 of
    # cosine, or of BM25 against the best hit), before the candidates' relevance is stretched
    # over 0–1. A much more relevant faded memory still ranks first: it may be the only answer.
    faded_penalty: float = Field(
        0.1, ge=0, description="relevance a faded memory ranks with below its own"
    )
    n_faded: int = Field(
        10, ge=0, description="faded candidates by cosine and by BM25, beside the live ones"
    )
    version_similarity: float = Field(
        0.92,
        description="two memories this close are versions of one statement: the newer first",
    )
    validity_similarity: float = Field(
        0.55,
        description="two facts this close share a subject: of them, what holds now comes first",
    )
    use_dense: bool = True
    use_sparse: bool = True


class Settings(BaseModel):
    """Everything a Memory needs; front ends fill it from flags and environment."""

    store: Path | str = Field(
        default_factory=default_store_path,
        description="a SQLite file path, or a postgresql:// URL",
    )
    owner: str = ""
    read: list[str] = Field(
        default_factory=list, description="roles this owner may also read (or '*'): a grant"
    )
    reference_root: Path | None = None
    private_files: list[Path] = Field(
        default_factory=list,
        description="the server's own files besides its store (its tokens file): no file: "
        "reference reads them",
    )
    recall: RecallSettings = Field(default_factory=RecallSettings)
    forgetting: ForgettingPolicy = Field(default_factory=ForgettingPolicy)
    dedup_similarity: float = Field(0.92, description="near-duplicate write threshold")
    ring_size: int = 64
    reflect_every_writes: int = Field(200, ge=0, description="a pass after N writes; 0 = off")
    reflect_idle_seconds: float = Field(
        600.0, ge=0, description="a pass when idle (env NOOA_REFLECT_IDLE_SECONDS); 0 = off"
    )
    generative_reflection: bool = Field(
        False,
        description="reconcile and abstract through the client's model (MCP sampling); "
        "env NOOA_GENERATIVE_REFLECTION=1",
    )
    reflect_tool: bool = Field(True, description="offer memory_reflect (env NOOA_REFLECT_TOOL=0)")
    model_cache_dir: Path | None = None
    max_sessions_per_client: int = Field(
        64, ge=1, description="open HTTP sessions one token (or address) may hold"
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names or addresses an HTTP server answers besides the one it binds "
        "and loopback (env NOOA_ALLOWED_HOSTS, comma-separated)",
    )
    model_wait_seconds: float = Field(
        0.0, ge=0, description="how long a recall waits for a loading model before keywords"
    )
    vector_idle_seconds: float = Field(
        600.0,
        ge=0,
        description="a role's vectors unused this long are let go (env NOOA_VECTOR_IDLE_SECONDS; "
        "0 = kept)",
    )
    vector_max_roles: int = Field(
        0,
        ge=0,
        description="at most this many roles' vectors held, least recently used go first "
        "(env NOOA_VECTOR_MAX_ROLES; 0 = no bound)",
    )

    model_config = {"arbitrary_types_allowed": True}

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Build settings from NOOA_* environment variables, then explicit overrides."""
        values: dict[str, object] = {}
        given = {k: v for k, v in overrides.items() if v is not None}
        # A variable an explicit value replaces is not read: a bad NOOA_STORE must not refuse
        # the --store typed over it.
        if os.environ.get("NOOA_STORE") and "store" not in given:
            values["store"] = store_target(os.environ["NOOA_STORE"])
        if os.environ.get("NOOA_MAX_SESSIONS_PER_CLIENT"):
            values["max_sessions_per_client"] = os.environ["NOOA_MAX_SESSIONS_PER_CLIENT"]
        if os.environ.get("NOOA_READ"):
            values["read"] = [r for r in os.environ["NOOA_READ"].split(",") if r.strip()]
        if os.environ.get("NOOA_OWNER"):
            values["owner"] = os.environ["NOOA_OWNER"]
        if os.environ.get("NOOA_REFERENCE_ROOT"):
            values["reference_root"] = Path(os.environ["NOOA_REFERENCE_ROOT"]).expanduser()
        if os.environ.get("NOOA_ALLOWED_HOSTS"):
            values["allowed_hosts"] = [
                h for h in os.environ["NOOA_ALLOWED_HOSTS"].split(",") if h.strip()
            ]
        for name in (
            "vector_idle_seconds",
            "vector_max_roles",
            "generative_reflection",
            "reflect_idle_seconds",
        ):
            if os.environ.get(f"NOOA_{name.upper()}", "").strip():
                values[name] = os.environ[f"NOOA_{name.upper()}"].strip()
        if os.environ.get("NOOA_REFLECT_TOOL", "").strip().lower() in ("0", "false", "no", "off"):
            values["reflect_tool"] = False
        values.update(given)
        if "store" in values:
            values["store"] = store_target(values["store"])  # type: ignore[arg-type]
        try:
            return cls(**values)
        except ValidationError as exc:
            # A variable set to "abc" or -5: name it, not pydantic's report with a traceback.
            error = exc.errors()[0]
            name = str(error["loc"][0]) if error["loc"] else "settings"
            source = name if name in given else f"NOOA_{name.upper()}"
            raise InvalidInput(
                source,
                f"{str(error.get('input'))[:80]!r} is not accepted: {error['msg'].lower()}.",
                "Correct it, or unset it for the default.",
            ) from None
