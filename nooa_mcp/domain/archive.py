"""Why a memory is archived: forgotten by its user, or faded by maintenance.

Pure. Both kinds leave the live tier and keep their row, edges and history. They differ in who
may still reach them:

- **forgotten**: a user asked (`memory_update forget=true`, the console's forget, an intent
  cancelled). Recall, explain's rankings and the hooks never show it again; only reviving it
  by id or by writing it again with `revive=true` brings it back.
- **faded**: reflection archived it (pruned for low retention, merged into a memory that says
  the same thing, superseded by a reconcile). In ACT-R a decayed chunk is still retrieved by
  a strong enough cue, and that retrieval is a use: recall returns a faded memory that is
  relevant to the query (flagged `faded`, below live memories of similar relevance), and the
  recall that returns it brings it back to life.

The store keeps the kind as a flag on the row (`faded`), and an export line carries it
(`faded`): a user may give a forget any reason, one starting like maintenance's too. Stores
written before the flag existed, and imports of older exports, tell the kinds apart by the
reason of the memory's
standing tombstone: reflection's reasons start with one of `FADED_REASONS`; anything else,
and an archived memory with no standing tombstone at all, counts as forgotten, so no user's
forget can ever be read as maintenance.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

#: A memory's state as replies name it.
State = Literal["live", "faded", "forgotten"]

__all__ = [
    "FADED_REASONS",
    "State",
    "forgotten_with_reason",
    "id8s",
    "merged_anchor",
    "merged_reason",
    "pruned_reason",
    "reason_fades",
    "renamed_reason",
    "standing_fade",
    "state",
    "superseded_reason",
]

#: How the reasons reflection writes begin (what `merged_reason` and the others produce).
_MERGED = "merged into "
FADED_REASONS: tuple[str, ...] = (_MERGED, "pruned: ", "superseded by ")


def merged_reason(anchor_id: str) -> str:
    return f"{_MERGED}{anchor_id[:8]}"


def forgotten_with_reason(anchor_id: str) -> str:
    """Why a merged duplicate was forgotten: its anchor was (a forget, not a fade)."""
    return f"forgotten with {anchor_id[:8]}"


def merged_anchor(reason: str | None) -> str | None:
    """The anchor's id prefix a `merged_reason` names (None for any other reason)."""
    if reason is None or not reason.startswith(_MERGED):
        return None
    return reason[len(_MERGED) :]


#: How a reason names another memory: the first 8 hex digits of its id.
_ID8 = re.compile(r"\b[0-9a-f]{8}\b")


def renamed_reason(reason: str, renamed: Mapping[str, str]) -> str:
    """A reason that names another memory by its id's first 8 characters ("merged into …",
    "forgotten with …", "superseded by …"), naming it by its new id where an import gave that
    memory one (`renamed`: old id prefix → new id prefix, `id8s`). Recall and forget find a
    merged duplicate's anchor by the id its reason names. One lookup per id the reason names,
    whatever the size of `renamed` (an import renames every line of another owner's file)."""
    return _ID8.sub(lambda m: renamed.get(m.group(), m.group()), reason)


def id8s(renamed: Mapping[str, str]) -> dict[str, str]:
    """`renamed` (old id → new id) as reasons name them: by their first 8 characters."""
    return {old[:8]: new[:8] for old, new in renamed.items()}


def pruned_reason(retention: float, prune_below: float) -> str:
    return f"pruned: retention {retention:.4f} < {prune_below:g}"


def superseded_reason(successor_id: str) -> str:
    return f"superseded by {successor_id[:8]} (reconcile)"


def reason_fades(reason: str | None) -> bool:
    """Whether a standing tombstone's reason says maintenance archived the memory (faded);
    False for a user's forget, an unknown reason or none at all (forgotten)."""
    return reason is not None and reason.startswith(FADED_REASONS)


def standing_fade(reasons: Sequence[str]) -> bool:
    """Whether an archived memory whose standing (not lifted) tombstones give `reasons` is
    faded: every one of them is maintenance's. One user's forget among them makes it
    forgotten, whatever the order of their times (a forget stamped by a clock behind the
    pass that faded it still forgets it); none at all reads as forgotten."""
    return bool(reasons) and all(reason_fades(r) for r in reasons)


def state(archived: bool, faded: bool) -> State:
    """live, faded (archived by maintenance) or forgotten (archived by its user)."""
    if not archived:
        return "live"
    return "faded" if faded else "forgotten"
