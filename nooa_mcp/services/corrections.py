"""A correction outlives what it corrects.

A memory that `refines` or `contradicts` an older one is its current version: recall ranks the
older one below it (DESIGN.md §5.7), but only while the correction is live. Prune fades what
nobody uses, and an old fact that is protected (importance ≥ 8) or simply more used would
then come back unsuperseded, above nothing, while the user's correction sits faded. So prune
keeps a correction while a memory it corrects is live (DESIGN.md §7.2), and a memory's view
and explain say why it is never pruned (`kept_from_pruning`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..domain.forgetting import protection
from ..domain.kinds import SUPERSEDING
from ..domain.schema import Edge, Memory
from ..domain.scope import Scope
from .caller import Caller
from .planning import EDGE_CHUNK

_RELATIONS = frozenset(kind.value for kind in SUPERSEDING)


#: Whose memories a correction may correct: any owner's (a link reached it when it was
#: written; whether it is live is all that counts, whoever reads the correction).
_ANY_OWNER = Scope(roles=None)


async def live_corrected(caller: Caller, ids: Sequence[str]) -> dict[str, list[str]]:
    """For each of `ids` that refines or contradicts a live memory written no later than it
    (the memories it supersedes in recall): those memories' ids. Ids that correct nothing
    live are left out."""
    pairs: list[tuple[str, str]] = []
    for start in range(0, len(ids), EDGE_CHUNK):
        # Out-edges to live memories only: the store drops archived targets.
        for e in await caller.store.out_edges(list(ids[start : start + EDGE_CHUNK]), _ANY_OWNER):
            if e.type in _RELATIONS and e.dst != e.src:
                pairs.append((e.src, e.dst))
    if not pairs:
        return {}
    rows = await caller.store.fetch_many(list({end for pair in pairs for end in pair}))
    out: dict[str, list[str]] = {}
    for src, dst in pairs:
        new, old = rows.get(src), rows.get(dst)
        if new is None or old is None or old.created_at > new.created_at:
            continue
        out.setdefault(src, []).append(dst)
    return out


async def correcting_live(caller: Caller, ids: Sequence[str], scope: Scope) -> set[str]:
    """Those of `ids` (memories inside `scope`) that prune keeps as they correct a live memory
    (`live_corrected`). When the index holds the scope's roles, their held edges say first
    which of them refine or contradict anything at all: most recalls return none, and ask
    the store nothing."""
    if caller.index.holds(scope.visible_roles):
        ids = list(caller.index.links.sources_with(ids, sorted(_RELATIONS)) & set(ids))
    if not ids:
        return set()
    return set(await live_corrected(caller, ids))


async def kept_from_pruning(
    caller: Caller, memory: Memory, edges: Sequence[Edge] | None = None
) -> str | None:
    """Why prune never takes `memory`, or None when it may: its type, status or importance
    (`domain.forgetting.protection`), or a live memory it corrects. `edges`, the memory's
    out-edges when the caller has read them, spares the look when none supersedes."""
    policy = caller.settings.forgetting
    reason = protection(memory.type, memory.importance, memory.prune_status, policy)
    if reason is not None or memory.archived:
        return reason
    if edges is not None and not any(e.type in _RELATIONS for e in edges):
        return None
    corrected = (await live_corrected(caller, [memory.id])).get(memory.id)
    return correction_reason(corrected) if corrected else None


async def successors_of(caller: Caller, memories: Sequence[Memory], scope: Scope) -> dict[str, str]:
    """For each of `memories` that a memory in `scope`, live or faded (not forgotten), written
    no earlier than it refines or contradicts (one recall ranks it below, DESIGN.md §5.7):
    the newest such memory. Memories nothing supersedes are left out."""
    if not memories:
        return {}
    links = await caller.store.successors([m.id for m in memories], list(_RELATIONS), scope)
    newer = await caller.store.fetch_many(list({e.src for e in links if e.src != e.dst}))
    created = {m.id: m.created_at for m in memories}
    found: dict[str, Memory] = {}
    for e in links:
        new = newer.get(e.src)
        if new is None or e.src == e.dst or new.created_at < created[e.dst]:
            continue
        kept = found.get(e.dst)
        if kept is None or (new.created_at, new.id) > (kept.created_at, kept.id):
            found[e.dst] = new
    return {memory_id: new.id for memory_id, new in found.items()}


async def successor_of(caller: Caller, memory: Memory, scope: Scope) -> str | None:
    """`successors_of` for one memory: the newest memory that supersedes it, or None."""
    return (await successors_of(caller, [memory], scope)).get(memory.id)


def correction_reason(corrected: Sequence[str]) -> str:
    """Why a correction is never pruned, naming what it corrects."""
    return f"corrects {corrected[0][:8]}, which is still live"
